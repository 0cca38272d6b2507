"""CXL link budgets (NT022-NT024) and the policy keys expect.cxl.gpus_per_x16_link / interleave_ways_min.

handmade-cxl-8gpu-x8link is HAND-MADE (tests/handmade_cxl.py: the real vm-cxl-switch capture with x8
32 GT/s links and eight GPUs added); vm-cxl and vm-cxl-switch are real kernel captures.
"""

from __future__ import annotations

import json

import pytest

from numatune.analysis.cxl_links import node_budgets, over_budget
from numatune.analysis.policy import parse_policy
from numatune.analysis.topology_findings import topology_findings
from numatune.errors import InputError
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_copy, fixture_root
from tests.handmade_cxl import set_link

HANDMADE = "handmade-cxl-8gpu-x8link"


def codes(topo) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in topology_findings(topo):
        out.setdefault(f.code, []).append(f)
    return out


def topo_of(root) -> object:
    return read_topology(Host.open(str(root)))


def test_eight_gpus_on_one_x8_link() -> None:
    topo = topo_of(fixture_root(HANDMADE))
    (budget,) = node_budgets(topo)
    assert budget.node == 2 and len(budget.gpus) == 8
    assert [x.downstream for x in budget.links] == ["0000:81:00.0"]  # the switch's upstream link
    assert (budget.gbps, budget.gpus_allowed) == (31.51, 2.0)
    found = codes(topo)
    (nt022,) = found["NT022"]
    assert "8 GPUs' ranks spill to CXL node 2" in nt022.message and "2 GPUs' worth" in nt022.message
    (nt023,) = found["NT023"]
    assert "switch port2's upstream link" in nt023.message and "63.02 GB/s together" in nt023.message
    assert "NT024" not in found


def test_the_one_device_vm_has_no_link_finding() -> None:
    found = codes(topo_of(fixture_root("vm-cxl")))
    assert not {"NT022", "NT023", "NT024"} & set(found)


def test_the_switch_vm_interleaves_behind_its_narrow_uplink() -> None:
    found = codes(topo_of(fixture_root("vm-cxl-switch")))
    assert "NT022" not in found  # no GPU
    assert [f.subject for f in found["NT023"]] == ["region0"]  # x1 uplink, two x1 members


@pytest.mark.parametrize(("width", "speed", "per_x16", "allowed", "over"), [
    (16, "32.0 GT/s PCIe", 4, 4.0, True),    # one CXL 2.0 x16: four GPUs
    (16, "64.0 GT/s PCIe", 4, 7.68, True),   # CXL 3 x16: about twice that
    (16, "64.0 GT/s PCIe", 5, 9.6, False),   # a policy allowing five per x16 link
    (4, "32.0 GT/s PCIe", 4, 1.0, True),
])
def test_budget_scales_with_width_and_generation(tmp_path, width, speed, per_x16, allowed, over) -> None:
    root = fixture_copy(HANDMADE, tmp_path)
    set_link(root, "0000:81:00.0", width, speed)
    set_link(root, "0000:80:00.0", width, speed)
    topo = topo_of(root)
    (budget,) = node_budgets(topo, per_x16)
    assert budget.gpus_allowed == allowed
    assert bool(over_budget(topo, per_x16)) is over


def test_link_trained_below_max(tmp_path) -> None:
    root = fixture_copy(HANDMADE, tmp_path)
    set_link(root, "0000:83:00.0", 4, "16.0 GT/s PCIe", 8, "32.0 GT/s PCIe")
    (f,) = codes(topo_of(root))["NT024"]
    assert f.subject == "0000:83:00.0"
    assert "runs x4 16.0 GT/s PCIe but both ends can do x8 32.0 GT/s PCIe: 7.88 GB/s" in f.message
    assert "31.51 GB/s possible" in f.message


def test_max_is_the_lower_end(tmp_path) -> None:
    """A x16-capable device under a x8 port trained x8 is not trained down."""
    root = fixture_copy(HANDMADE, tmp_path)
    set_link(root, "0000:83:00.0", 8, "32.0 GT/s PCIe", 16, "32.0 GT/s PCIe")
    assert "NT024" not in codes(topo_of(root))


def test_policy_keys(cli, tmp_path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[expect]\ncxl.gpus_per_x16_link = 4\ncxl.interleave_ways_min = 4\n")
    res = cli("--root", str(fixture_root(HANDMADE)), "check", "--policy", str(policy), "--json")
    checks = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    budget = checks["policy.expect.cxl.gpus_per_x16_link"]
    assert [f["code"] for f in budget["findings"]] == ["NT314"]
    ways = checks["policy.expect.cxl.interleave_ways_min"]
    assert [f["code"] for f in ways["findings"]] == ["NT315"]
    assert "interleaves 2 way(s)" in ways["findings"][0]["message"]
    policy.write_text("[expect]\ncxl.gpus_per_x16_link = 16\ncxl.interleave_ways_min = 2\n")
    res = cli("--root", str(fixture_root(HANDMADE)), "check", "--policy", str(policy), "--json")
    checks = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    assert checks["policy.expect.cxl.gpus_per_x16_link"]["findings"] == []
    assert checks["policy.expect.cxl.interleave_ways_min"]["findings"] == []
    res = cli("--root", str(fixture_root("vm-two-socket")), "check", "--policy", str(policy), "--json")
    checks = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    assert "no CXL" in checks["policy.expect.cxl.gpus_per_x16_link"]["skipped_reason"]


def test_policy_values_are_validated() -> None:
    with pytest.raises(InputError, match="expect.cxl.gpus_per_x16_link must be a number"):
        parse_policy({"expect": {"cxl": {"gpus_per_x16_link": "four"}}})
    with pytest.raises(InputError, match="expect.cxl.interleave_ways_min must be a whole number"):
        parse_policy({"expect": {"cxl": {"interleave_ways_min": 1.5}}})
