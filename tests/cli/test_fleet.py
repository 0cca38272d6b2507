"""numatune fleet on reports made from the fixtures: grouping, outliers, findings, input forms."""

from __future__ import annotations

import json

import pytest

from tests.conftest import fixture_root

BASE = "intel-xeon-L5640-2node"  # 2 sockets, 2 nodes, NICs with numa_node -1 (NT001)
OTHER = "40intel64-2g2n4c+pcilocality"  # 4 sockets, 4 nodes
_DOCS: dict[str, str] = {}


@pytest.fixture
def inspect_json(cli):
    def make(name: str) -> dict:
        if name not in _DOCS:
            result = cli("--root", str(fixture_root(name)), "inspect", "--json")
            assert result.exit_code == 0
            _DOCS[name] = result.stdout
        return json.loads(_DOCS[name])

    return make


@pytest.fixture
def fleet_dir(tmp_path, inspect_json):
    """Five nodes: three identical, one on another kernel with a little less memory, one different machine."""
    d = tmp_path / "reports"
    d.mkdir()
    for host in ("node01", "node02", "node03"):
        (d / f"{host}.json").write_text(json.dumps(inspect_json(BASE)))
    drift = inspect_json(BASE)
    drift["settings"]["release"] = "6.8.0-45-generic"
    drift["nodes"][0]["memory_total_kib"] = int(drift["nodes"][0]["memory_total_kib"] * 0.995)
    (d / "node04.json").write_text(json.dumps(drift))
    (d / "node05.json").write_text(json.dumps(inspect_json(OTHER)))
    return d


def test_groups_outliers_and_findings(cli, fleet_dir):
    result = cli("fleet", "--json", str(fleet_dir))
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["schema"] == "numatune.fleet/1" and doc["nodes"] == 5
    a, b = doc["groups"]
    assert a["nodes"] == ["node01", "node02", "node03", "node04"] and a["id"] == "A"
    assert a["kernels"] == {"unknown": 3, "6.8.0-45-generic": 1}
    assert b["nodes"] == ["node05"] and doc["outliers"] == ["node05"]
    assert doc["reference_is_majority"] is True
    diffs = {d["key"]: (d["reference"], d["group"]) for d in b["differs_from_reference"]}
    assert diffs["sockets"] == ("2", "4") and diffs["numa nodes"] == ("2", "4")
    assert diffs["node 2"][0] is None
    (nt001,) = [f for f in a["findings"] if f["code"] == "NT001"]
    assert nt001["count"] == 4 and nt001["severity"] == "warning"
    assert a["fingerprint"] != b["fingerprint"] and len(a["fingerprint"]) == 12


def test_text_and_fail_on_outliers(cli, fleet_dir):
    result = cli("fleet", str(fleet_dir))
    assert result.exit_code == 0
    text = result.stdout
    assert text.splitlines()[0] == "numatune fleet: 5 nodes, 2 topologies"
    assert "group A [" in text and "4 nodes (reference): node01, node02, node03, node04" in text
    assert "differs from group A: sockets: 2 -> 4" in text
    assert "outliers (1): node05" in text
    assert cli("fleet", "--fail-on-outliers", str(fleet_dir)).exit_code == 1
    same = [str(fleet_dir / f"node0{i}.json") for i in (1, 2, 3)]
    assert cli("fleet", "--fail-on-outliers", *same).exit_code == 0


def test_json_lines_on_stdin(cli, inspect_json):
    lines = "\n".join(json.dumps(inspect_json(n)) for n in (BASE, BASE, OTHER)) + "\n"
    doc = json.loads(cli("fleet", "--json", input=lines).stdout)
    assert [g["nodes"] for g in doc["groups"]] == [["stdin#1", "stdin#2"], ["stdin#3"]]


def test_pdsh_prefixed_pretty_json(cli, inspect_json):
    """`pdsh -w node[1-3] numatune inspect --json`: every line prefixed with the host, lines interleaved."""
    per_host = {h: json.dumps(inspect_json(BASE if h != "gpu3" else OTHER), indent=2).splitlines()
                for h in ("gpu1", "gpu2", "gpu3")}
    out = []
    for i in range(max(len(v) for v in per_host.values())):
        for host, lines in per_host.items():
            if i < len(lines):
                out.append(f"{host}: {lines[i]}")
    doc = json.loads(cli("fleet", "--json", "-", input="\n".join(out) + "\n").stdout)
    assert [g["nodes"] for g in doc["groups"]] == [["gpu1", "gpu2"], ["gpu3"]]


def test_unreadable_reports_are_listed_not_fatal(cli, fleet_dir):
    (fleet_dir / "broken.json").write_text("{ not json")
    (fleet_dir / "check.json").write_text(json.dumps({"schema": "numatune.check/1"}))
    result = cli("fleet", "--json", str(fleet_dir))
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    reasons = {u["source"].rsplit("/", 1)[-1]: u["reason"] for u in doc["unreadable"]}
    assert "not valid JSON" in reasons["broken.json"]
    assert "numatune.check/1" in reasons["check.json"]
    assert "broken.json" in result.stderr
    assert cli("fleet", "--fail-on-outliers", str(fleet_dir / "broken.json"), str(fleet_dir / "node01.json")
               ).exit_code == 1


def test_no_reports_is_an_input_error(cli, tmp_path):
    empty = tmp_path / "e.json"
    empty.write_text("")
    result = cli("fleet", str(empty))
    assert result.exit_code == 3 and "no numatune inspect report" in result.stderr
    assert cli("fleet", str(tmp_path / "missing.json")).exit_code == 3
    assert cli("fleet", input="hello world\n").exit_code == 3


def test_every_fixture_report_is_accepted(cli, inspect_json, tmp_path):
    from tests.conftest import tree_fixtures

    names = tree_fixtures()
    for n in names:
        (tmp_path / f"{n}.json").write_text(json.dumps(inspect_json(n)))
    doc = json.loads(cli("fleet", "--json", str(tmp_path)).stdout)
    assert doc["nodes"] == len(names) and doc["unreadable"] == []
    assert sum(g["size"] for g in doc["groups"]) == len(names)


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_a_json_array_is_read_element_by_element(inspect_json, monkeypatch, chunk):
    """`jq -s` output (one array of reports), in pieces of any size: every report once, each decoded on its
    own (linear: decode calls grow with the reports, not with reports x pieces), a bad separator named."""
    import io

    import numatune.commands.fleet as fleet_run

    docs = [inspect_json(BASE)] * 30 + [inspect_json(OTHER)] * 10
    text = json.dumps(docs, indent=1)
    calls = []
    real = fleet_run._decoder.raw_decode

    class Counting:
        def raw_decode(self, s, idx=0):  # noqa: ANN001, ANN202
            calls.append(len(s) - idx)
            return real(s, idx)

    monkeypatch.setattr(fleet_run, "CHUNK", chunk)
    monkeypatch.setattr(fleet_run, "_decoder", Counting())
    fleet, unreadable = fleet_run.run_fleet(("-",), stdin=io.StringIO(text))
    assert unreadable == [] and sorted(len(g.nodes) for g in fleet.groups) == [10, 30]
    per_doc = len(text) // len(docs)
    assert len(calls) <= len(docs) * (1 + 2 * per_doc // chunk + 1)  # retries only while one report is cut
    bad = "[" + json.dumps(docs[0]) + " x " + json.dumps(docs[1]) + "]"
    fleet, unreadable = fleet_run.run_fleet(("-",), stdin=io.StringIO(bad))
    assert unreadable == [("stdin #2", "not valid JSON: expected ',' or ']' between array elements")]


def test_a_big_json_array_in_bounded_memory(tmp_path, inspect_json):
    """A 60 MB array (5,000 reports) in a child process limited to 256 MiB of address space... and 10 s."""
    import resource
    import subprocess
    import sys

    one = json.dumps(inspect_json(BASE))
    path = tmp_path / "all.json"
    with open(path, "w") as fh:
        fh.write("[\n" + ",\n".join([one] * 5000) + "\n]\n")
    assert path.stat().st_size > 40 << 20

    def limit():  # noqa: ANN202
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))  # the interpreter alone maps ~200 MB

    done = subprocess.run([sys.executable, "-m", "numatune", "fleet", "--json", str(path)], capture_output=True,
                          text=True, timeout=60, preexec_fn=limit, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    assert json.loads(done.stdout)["nodes"] == 5000


def test_snapshots_instead_of_reports_are_named_as_such(cli, tmp_path):
    """`fleet DIR` of snapshot archives said only "holds no *.json report": it says what fleet reads and how
    to make it from each snapshot; one archive given as a report says it is a snapshot."""
    import shutil

    from tests.conftest import fixture_root

    shutil.copy(fixture_root("vm-cxl", archive=True), tmp_path / "node1.tar.gz")
    r = cli("fleet", str(tmp_path))
    assert r.exit_code == 3 and "1 snapshot archive(s) (node1.tar.gz): fleet reads `numatune inspect --json` " \
        "reports, not snapshots" in r.stderr and "inspect --json >" in r.stderr, r.stderr
    r = cli("fleet", str(tmp_path / "node1.tar.gz"))
    assert r.exit_code == 3 and "a snapshot archive, not an inspect report" in r.stderr, r.stderr
