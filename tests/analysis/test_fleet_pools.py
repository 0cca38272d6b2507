"""`fleet` groups hosts that see one CXL device (serial number) or one region (UUID) into pools.

vm-cxl-switch and vm-cxl-pool are two real guests (tests/vm/topologies/cxl-switch.toml and
cxl-pool.toml) whose QEMU devices were given one serial number (cxl-type3 sn=0x4e540001).
"""

from __future__ import annotations

import copy
import json

from numatune.analysis.fleet import NodeReport, cxl_identities, group_fleet
from tests.conftest import fixture_root


def inspect_doc(cli, name: str) -> dict:
    result = cli("--root", str(fixture_root(name)), "inspect", "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_two_guests_sharing_a_serial_are_one_pool(cli, tmp_path) -> None:
    for name in ("vm-cxl-switch", "vm-cxl-pool", "vm-cxl"):
        (tmp_path / f"{name}.json").write_text(json.dumps(inspect_doc(cli, name)))
    res = cli("fleet", str(tmp_path), "--json")
    (pool,) = json.loads(res.stdout)["pools"]
    assert (pool["kind"], pool["key"]) == ("device", "0x4e540001")
    hosts = {h["node"]: h for h in pool["hosts"]}
    assert set(hosts) == {"vm-cxl-switch", "vm-cxl-pool"}  # vm-cxl's device reports serial 0: unknown
    switch, single = hosts["vm-cxl-switch"], hosts["vm-cxl-pool"]
    assert switch["memdevs"] == ["mem1"] and switch["capacity_bytes"] == 512 << 20
    assert switch["online_bytes"] == 512 << 20  # half of the 1 GiB 2-way region
    assert switch["numa_nodes"] == [2] and switch["tiers"][0] is not None
    assert single["memdevs"] == ["mem0"] and single["capacity_bytes"] == 512 << 20
    assert single["numa_nodes"] and single["tiers"][0] is not None
    text = cli("fleet", str(tmp_path)).stdout
    assert "pool: CXL device serial 0x4e540001 seen by 2 hosts" in text


def test_serial_zero_never_pools(cli) -> None:
    doc = inspect_doc(cli, "vm-cxl")
    assert doc["cxl"]["memdevs"][0]["serial"] == "0x0"
    assert doc["cxl"]["regions"][0]["uuid"]  # the same report twice shares its region's UUID too:
    doc["cxl"]["regions"][0]["uuid"] = None  # leave that out, to see the serial alone
    fleet = group_fleet([NodeReport("a", doc), NodeReport("b", doc)])
    assert fleet.pools == ()


def test_one_host_is_not_a_pool(cli) -> None:
    doc = inspect_doc(cli, "vm-cxl-switch")
    assert group_fleet([NodeReport("a", doc)]).pools == ()


def test_region_uuid_pools_and_bad_values_are_ignored(cli) -> None:
    """Edited copies of a real report (the region UUID set by hand, as two hosts assembling one pmem
    region from shared label areas would report it)."""
    doc = inspect_doc(cli, "vm-cxl-switch")
    a, b = copy.deepcopy(doc), copy.deepcopy(doc)
    for d in (a, b):
        d["cxl"]["regions"][0]["uuid"] = "3b8e7f70-d6b9-4609-b365-645affe0d333"
        d["cxl"]["memdevs"][0]["serial"] = "garbage"
        d["cxl"]["memdevs"][1]["serial"] = -5
    pools = group_fleet([NodeReport("a", a), NodeReport("b", b)]).pools
    assert [(p.kind, p.key, [h.node for h in p.hosts]) for p in pools] == [
        ("region", "3b8e7f70-d6b9-4609-b365-645affe0d333", ["a", "b"])]
    assert pools[0].hosts[0].online_bytes == 1 << 30
    assert cxl_identities({"cxl": {"memdevs": ["x", None], "regions": [{"uuid": 5}]}}) == []
