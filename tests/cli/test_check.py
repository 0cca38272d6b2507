"""numatune check: every fixture's expected outcome, policies, exit codes, JSON and JUnit."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import PROJECT, fixture_root, tree_fixtures

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).parent
CASES = tomllib.loads((HERE / "check_expected.toml").read_text())["case"]


def _id(case: dict) -> str:
    return "-".join(x for x in (case["fixture"], case.get("policy", ""), case.get("fail_on", "")) if x)


def test_every_expected_outcome_names_a_fixture():
    stale = sorted({c["fixture"] for c in CASES} - set(tree_fixtures()))
    assert not stale, f"tests/cli/check_expected.toml names fixtures that do not exist: {stale}"


def test_a_fixture_without_expected_outcome_still_checks(cli):
    """Expected outcomes are optional for a new machine; `check` must still give a verdict on it."""
    for name in sorted(set(tree_fixtures()) - {c["fixture"] for c in CASES}):
        result = cli("--root", str(fixture_root(name)), "check", "--json")
        assert result.exit_code in (0, 1), (name, result.stderr)
        assert json.loads(result.stdout)["result"] == ("fail" if result.exit_code else "pass"), name


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fixture_outcome(cli, case):
    args = ["--root", str(fixture_root(case["fixture"])), "check", "--json"]
    if "policy" in case:
        args += ["--policy", str(HERE / "policies" / case["policy"])]
    if "fail_on" in case:
        args += ["--fail-on", case["fail_on"]]
    result = cli(*args)
    doc = json.loads(result.stdout)
    found = {f["code"] for f in doc["findings"]}
    assert result.exit_code == case["exit"], (found, doc["counts"])
    assert doc["result"] == ("fail" if case["exit"] == 1 else "pass")
    assert set(case["codes"]) <= found
    assert not (set(case.get("absent", [])) & found)


def test_text_report_and_verbose(cli):
    root = str(fixture_root("8em64t-2s2ca2c-buggynuma"))
    result = cli("--root", root, "check")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"numatune check: {root}"
    assert any(line.startswith("FAIL  NT008 error") for line in lines)
    assert any(line.strip().startswith("fix: update the BIOS") for line in lines)
    assert lines[-1].startswith("FAIL: ") and "1 error" in lines[-1]
    assert not any(line.startswith("ok ") for line in lines)
    verbose = cli("--root", root, "check", "-v").stdout
    assert "ok    topology.offline_cpus" in verbose


@pytest.mark.parametrize("name", ["vm-two-socket", "handmade-launch-2s4gpu-cxl", "8em64t-2s2ca2c-buggynuma"])
def test_the_summary_counts_add_up(cli, name):
    """"27 checks, 25 passed, 1 skipped" left a warned check out: every status is counted, and they sum up,
    as the JSON's statuses say."""
    import json
    import re

    root = str(fixture_root(name))
    last = cli("--root", root, "check").stdout.splitlines()[-1]
    m = re.match(r"(PASS|FAIL): (\d+) checks: (\d+) passed, (\d+) failed, (\d+) warned \(findings below "
                 r"--fail-on\), (\d+) skipped; findings: ", last)
    assert m, last
    total, *counts = (int(x) for x in m.groups()[1:])
    assert sum(counts) == total
    statuses = [c["status"] for c in json.loads(cli("--root", root, "check", "--json").stdout)["checks"]]
    assert [statuses.count(s) for s in ("passed", "failed", "warned", "skipped")] == counts


def test_json_document(cli):
    result = cli("--root", str(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")), "check", "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["schema"] == "numatune.check/1"
    assert doc["fail_on"] == "warning" and doc["policy"] is None
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert statuses["topology.unknown_device_node"] == "failed"
    assert statuses["topology.overlapping_node_cpus"] == "passed"
    assert statuses["irq.all"] == "skipped"
    (irq,) = [c for c in doc["checks"] if c["name"] == "irq.all"]
    assert irq["skipped_reason"] == "this root has no /proc/interrupts"
    assert doc["counts"] == {"info": 0, "warning": 1, "error": 0}
    high = json.loads(cli("--root", str(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")), "check", "--json",
                          "--fail-on", "error").stdout)
    assert {c["name"]: c["status"] for c in high["checks"]}["topology.unknown_device_node"] == "warned"


def test_junit_parses_and_counts(cli, tmp_path):
    out = tmp_path / "report.xml"
    result = cli("--root", str(fixture_root("intel-xeon-L5640-2node")), "check", "--format", "junit",
                 "--policy", str(HERE / "policies" / "two-socket-gpu.toml"), "-o", str(out))
    assert result.exit_code == 1 and result.stdout == ""
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"numatune.topology", "numatune.irq", "numatune.policy"}
    cases = root.findall(".//testcase")
    assert int(root.get("tests")) == len(cases)
    failures = root.findall(".//failure")
    assert int(root.get("failures")) == len(failures) == sum(int(s.get("failures")) for s in suites.values())
    assert int(root.get("skipped")) == len(root.findall(".//skipped"))
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert {"topology.unknown_device_node", "policy.expect.gpus_per_node", "policy.expect.device_nodes_known"} <= failed
    assert "policy.expect.sockets" not in failed
    gpus = next(c for c in cases if c.get("name") == "policy.expect.gpus_per_node").find("failure")
    assert gpus.get("type") == "error" and gpus.get("message").startswith("NT307: ")
    assert "fix: " in gpus.text


def test_junit_passing_run_has_no_failures(cli):
    result = cli("--root", str(fixture_root("memorysidecaches")), "check", "-f", "junit",
                 "--policy", str(HERE / "policies" / "memorysidecaches.toml"))
    assert result.exit_code == 0
    root = ET.fromstring(result.stdout)
    assert root.get("failures") == "0" and root.findall(".//failure") == []
    assert int(root.get("tests")) > 13


def test_policy_fail_on_is_the_default(cli, tmp_path):
    policy = tmp_path / "p.toml"
    policy.write_text('[check]\nfail_on = "info"\n')
    root = str(fixture_root("vm-offlineCPUs"))
    assert cli("--root", root, "check").exit_code == 0
    assert cli("--root", root, "check", "--policy", str(policy)).exit_code == 1
    assert cli("--root", root, "check", "--policy", str(policy), "--fail-on", "warning").exit_code == 0


def test_bad_policy_is_an_input_error(cli, tmp_path):
    policy = tmp_path / "p.toml"
    policy.write_text("[expect]\nsokets = 2\n")
    result = cli("--root", str(fixture_root("vm-offlineCPUs")), "check", "--policy", str(policy))
    assert result.exit_code == 3
    assert result.stderr.startswith(f"numatune: error: policy {policy}: expect.sokets unknown key")
    assert result.stdout == ""


def test_usage_and_root_errors(cli, tmp_path):
    assert cli("check", "--fail-on", "fatal").exit_code == 2
    result = cli("--root", str(tmp_path / "nope"), "check")
    assert result.exit_code == 3 and "does not exist" in result.stderr


# What each example policy finds on the two-socket Xeon L5640 tree (2 nodes, no GPU and no CXL, NICs with
# numa_node -1, no /proc/sys in the tree): (exit status, failed policy codes, skipped policy checks).
EXAMPLE_OUTCOMES = {
    "cxl-tiered.toml": (1, {"NT312"}, 6),  # no CXL capacity; tier, link budget, ways and kernel settings not judged
    "gpu-node.toml": (1, {"NT306", "NT307", "NT310", "NT311"}, 7),  # no GPUs, NICs -1, 31 GiB per node
    "kernel-settings.toml": (0, set(), 4),  # only kernel settings, none in this tree; fail_on = "error"
}


@pytest.mark.parametrize("path", sorted((PROJECT / "examples").glob("*.toml")), ids=lambda p: p.name)
def test_example_policies_run(cli, path):
    result = cli("--root", str(fixture_root("intel-xeon-L5640-2node")), "check", "--json", "--policy", str(path))
    doc = json.loads(result.stdout)
    assert doc["policy"] == str(path)
    policy = [c for c in doc["checks"] if c["group"] == "policy"]
    failed = {f["code"] for c in policy if c["status"] == "failed" for f in c["findings"]}
    skipped = sum(c["status"] == "skipped" for c in policy)
    assert (result.exit_code, failed, skipped) == EXAMPLE_OUTCOMES[path.name]


def test_numactl_version_is_skipped_on_a_saved_root(cli, tmp_path):
    policy = tmp_path / "p.toml"
    policy.write_text('[tools]\nnumactl_min_version = "2.0.10"\n')
    doc = json.loads(cli("--root", str(fixture_root("vm-offlineCPUs")), "check", "--json", "--policy",
                         str(policy)).stdout)
    (c,) = [c for c in doc["checks"] if c["name"] == "policy.tools.numactl_min_version"]
    assert c["status"] == "skipped" and "live node" in c["skipped_reason"]


def test_irq_rules_run_where_the_root_has_proc_interrupts(cli):
    doc = json.loads(cli("--root", str(fixture_root("procfs-4cpu-kvm")), "check", "--json").stdout)
    irq = [c for c in doc["checks"] if c["group"] == "irq"]
    assert irq and all(c["status"] != "skipped" for c in irq)
    none = json.loads(cli("--root", str(fixture_root("vm-offlineCPUs")), "check", "--json").stdout)
    assert [c["status"] for c in none["checks"] if c["group"] == "irq"] == ["skipped"]


def test_audit_rules_with_pid(cli):
    import os

    result = cli("check", "--json", "--pid", str(os.getpid()))
    doc = json.loads(result.stdout)
    audit = [c for c in doc["checks"] if c["group"] == "audit"]
    assert audit and all(c["status"] != "skipped" for c in audit)
    assert cli("check", "--pid", str(2**22 - 4321)).exit_code == 6  # a PID that may exist and does not
    assert cli("check", "--pid", "999999999").exit_code == 2  # above PID_MAX_LIMIT: no PID at all


def test_finding_heads_name_gpus_and_nics_as_every_other_view():
    """check's FAIL lines led with a bare BDF where inspect, launch and the picture say GPU0/NIC0."""
    from numatune.model.findings import Finding, Severity
    from numatune.render.finding_text import finding_block

    f = Finding("NT002", Severity.WARNING, "m", "", "0000:18:00.0")
    assert finding_block(f, "FAIL  ", "x", {"0000:18:00.0": "GPU0 0000:18:00.0"})[0] == (
        "FAIL  NT002 warning GPU0 0000:18:00.0  [x]")
    assert finding_block(f)[0] == "NT002 warning 0000:18:00.0"  # no names: the subject as it is
