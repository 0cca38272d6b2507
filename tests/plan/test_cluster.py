"""Slurm blocks by topology/block's rules, host lists, and reading topology files (plan.cluster)."""

from __future__ import annotations

import pytest

from numatune.errors import InputError
from numatune.model.nvfleet import Domain, FleetFabric
from numatune.plan.cluster import compress, expand, plan_blocks, read_topology_conf, topology_conf


def _domain(key: str, nodes: list[str], excluded: tuple = ()) -> Domain:
    return Domain(key, tuple(nodes), excluded)


def _valid_for_slurm(plan) -> bool:  # noqa: ANN001
    """block_record.c: base = first BlockSizes value; no block below it; sizes = base x 2^k, k <= 15."""
    base = plan.sizes[0]
    return all(len(b.nodes) >= base for b in plan.blocks) and all(
        s % base == 0 and (s // base) & (s // base - 1) == 0 and s // base <= 1 << 15 for s in plan.sizes)


def test_base_is_the_smallest_block_and_a_lone_node_makes_none():
    fabric = FleetFabric((_domain("u1.1", [f"a{i:02d}" for i in range(1, 19)]),
                          _domain("u2.1", [f"b{i:02d}" for i in range(1, 10)]),
                          _domain("u3.1", ["c01"])), nodes=28)
    plan = plan_blocks(fabric)
    assert [len(b.nodes) for b in plan.blocks] == [18, 9]
    assert plan.base == 9 and plan.sizes == (9, 18) and _valid_for_slurm(plan)
    assert [what for what, _ in plan.left_out] == ["domain u3.1 (c01)"]
    conf = topology_conf(plan)
    assert "BlockName=block01 Nodes=a[01-18]" in conf and "BlockSizes=9,18" in conf


def test_a_base_block_size_leaves_smaller_domains_out():
    fabric = FleetFabric((_domain("u1.1", [f"a{i}" for i in range(1, 19)]),
                          _domain("u2.1", [f"b{i}" for i in range(1, 17)]),
                          _domain("u3.1", [f"c{i}" for i in range(1, 9)])), nodes=42)
    plan = plan_blocks(fabric, base=16)
    assert [b.domain for b in plan.blocks] == ["u1.1", "u2.1"] and plan.sizes == (16, 32)
    assert "fewer than the base block size 16" in dict(plan.left_out)["domain u3.1 (c[1-8])"]
    assert _valid_for_slurm(plan)


def test_many_blocks_stop_at_slurms_level_limit():
    fabric = FleetFabric(tuple(_domain(f"u{i}.1", [f"n{i}x1", f"n{i}x2"]) for i in range(70_000)), nodes=140_000)
    plan = plan_blocks(fabric)
    assert len(plan.sizes) == 16 and plan.sizes[-1] == 2 << 15 and _valid_for_slurm(plan)


def test_unhealthy_nodes_are_named_never_blocked():
    fabric = FleetFabric((_domain("u1.1", ["a1", "a2", "a3"], (("a4", "GPU1 route unhealthy"),)),),
                         split=(("z1", ("u1.1", "u2.1")),), unplaced=(("y1", "GPU0 fabric registration in-progress"),),
                         nodes=6)
    plan = plan_blocks(fabric)
    assert plan.blocks[0].nodes == ("a1", "a2", "a3") and plan.blocks[0].trimmed == 1
    left = dict(plan.left_out)
    assert "route unhealthy" in left["a4"] and "2 NVLink domains" in left["z1"] and "in-progress" in left["y1"]


@pytest.mark.parametrize(("names", "ranged"), [
    (["gb01", "gb02", "gb03", "gb05"], "gb[01-03,05]"),
    (["n9", "n10", "n11"], "n[9-11]"),
    (["a1", "b1", "a2"], "a[1-2],b1"),
    (["solo"], "solo"),
    (["r1n01", "r1n02"], "r1n[01-02]"),
    (["a08", "a09", "a10", "a7"], "a[08-10],a7"),
    (["x1", "x01"], "x1,x01"),
])
def test_hostlist_as_slurm_writes_it(names, ranged):
    assert compress(names) == ranged
    assert sorted(expand(ranged, "t")) == sorted(names)


def test_hostlist_bounds():
    assert expand("r[1-2]n[01-02]", "t") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    for bad in ("n[0-99999999]", "n[1-3", "n[3-1]", "n[a-b]", "n]"):
        with pytest.raises(InputError):
            expand(bad, "t")


def test_reading_topology_conf():
    listed = read_topology_conf("# c\nblockname=b1 nodes=n[1-2]  # two\nBlockSizes=2,4\n", "t.conf")
    assert listed.blocks == (("b1", ("n1", "n2")),) and listed.sizes == (2, 4)
    for bad in ("SwitchName=s1 Nodes=n1", "BlockName=b1", "Frobnicate=1", "garbage"):
        with pytest.raises(InputError):
            read_topology_conf(bad + "\n", "t.conf")
