"""topology.conf against a real slurmctld: Debian trixie's Slurm 24.11 (topology/block) in the chroot that
scripts/slurm-chroot.sh builds (tests/cluster/slurm_harness.py). What it loads is read back from Slurm; what it
refuses fails with Slurm's own words. Without the chroot (or root) the tests skip saying so; under CI=true they fail
(scripts/test.sh builds the chroot first)."""

from __future__ import annotations

import re

import pytest

from tests.cluster import slurm_harness
from tests.conftest import engine_missing

pytestmark = pytest.mark.slurm

RACK = 18  # GB200 NVL72: 18 compute trays a rack, one NVLink domain each


def rack(r: int, trays: int = RACK) -> str:
    return f"gb-r{r}-t[01-{trays:02d}]"


def names(r: int, trays: int = RACK) -> list[str]:
    return [f"gb-r{r}-t{t:02d}" for t in range(1, trays + 1)]


@pytest.fixture(scope="module")
def slurm() -> None:
    reason = slurm_harness.missing()
    if reason:
        engine_missing(reason)


def refusal(topology: str, nodes: list[str]) -> str:
    """slurmctld's message for a configuration it must refuse."""
    with pytest.raises(slurm_harness.SlurmRefused) as refused:
        slurm_harness.load_topology(topology, nodes)
    return str(refused.value)


# four full racks, a partial rack of 16 trays (the base block size) and one tray left out of every block
MULTI_RACK = "\n".join([
    "# hand-written: four NVL72 racks and a partial one",
    *(f"BlockName=nvl{r} Nodes={rack(r)}" for r in range(1, 5)),
    f"BlockName=nvl5 Nodes={rack(5, 16)}  # two trays out for repair",
    "BlockSizes=16,32,64",
    "",
])
SPARE = "gb-r5-t17"
MULTI_RACK_NODES = [*(rack(r) for r in range(1, 5)), rack(5, 16), SPARE]


def per_block(nodes: list[str], blocks: dict[str, list[str]]) -> dict[str, int]:
    """How many of `nodes` each block holds (a node in no block counts under "")."""
    where = {n: name for name, members in blocks.items() for n in members}
    counts: dict[str, int] = {}
    for n in nodes:
        counts[where.get(n, "")] = counts.get(where.get(n, ""), 0) + 1
    return counts


def test_multi_rack_topology_loads_with_exactly_its_blocks(slurm):
    spare = SPARE
    got = slurm_harness.load_topology(MULTI_RACK, MULTI_RACK_NODES)
    assert re.match(r"slurm(-wlm)? 24\.11\.", got.version), got.version
    assert got.errors == []
    assert sorted(got.blocks) == [f"nvl{r}" for r in range(1, 6)]
    for r in range(1, 6):
        assert sorted(got.blocks[f"nvl{r}"]) == names(r, RACK if r < 5 else 16), r
    assert got.blocks == got.declared  # node by node, as the controller holds them
    assert got.unblocked == [spare]
    # every block holds the base size; BlockSizes' higher levels pair the full racks, and 64 takes four of them
    assert got.sizes == {f"nvl{r}": 16 for r in range(1, 6)}
    assert {name: len(nodes) for name, nodes in got.aggregated.items()} == {
        "nvl[1-2]": 2 * RACK, "nvl[3-4]": 2 * RACK, "nvl[1-4]": 4 * RACK}


def test_segmented_jobs_land_inside_blocks(slurm):
    # slurmctld's own placement (the nodes are CLOUD nodes: allocated, never started): each --segment of a job
    # lies inside one block, so every block holds a multiple of the segment size of the job's nodes
    jobs = [["-N", "16", "--segment=16"], ["-N", "32", "--segment=16"], ["-N", "8", "--segment=4"]]
    got = slurm_harness.load_topology(MULTI_RACK, MULTI_RACK_NODES, jobs)
    assert got.errors == []
    for options in jobs:
        nodes = got.placed[" ".join(options)]
        segment = int(options[2].split("=")[1])
        assert len(nodes) == int(options[1]) and len(set(nodes)) == len(nodes), (options, nodes)
        counts = per_block(nodes, got.blocks)
        assert "" not in counts and all(c % segment == 0 for c in counts.values()), (options, counts)
    assert len(per_block(got.placed["-N 16 --segment=16"], got.blocks)) == 1


def test_a_block_smaller_than_the_base_block_is_refused(slurm):
    # a partial rack of 8 trays beside full racks with BlockSizes=18: Slurm 24.11 exits at start-up
    topology = f"BlockName=nvl1 Nodes={rack(1)}\nBlockName=nvl2 Nodes={rack(2, 8)}\nBlockSizes=18\n"
    said = refusal(topology, [rack(1), rack(2, 8)])
    assert "fatal: Block configuration (nvl2) children count lower than bblock_node_cnt" in said


@pytest.mark.parametrize(("sizes", "bad"), [("18,54", "54"), ("36,18", "18")])
def test_block_sizes_not_the_base_times_powers_of_two_are_refused(slurm, sizes, bad):
    # 54 is 18 x 3; 36,18 is out of order (the first size is the base)
    topology = "".join(f"BlockName=nvl{r} Nodes={rack(r)}\n" for r in (1, 2, 3)) + f"BlockSizes={sizes}\n"
    said = refusal(topology, [rack(r) for r in (1, 2, 3)])
    assert f"fatal: Invalid BlockSizes value: {bad}" in said


def test_a_block_naming_an_undeclared_node_is_reported(slurm):
    # slurmctld starts, drops the unknown node and says so in its log: the harness hands that line to the test
    # (BlockSizes=16: the 17 nodes left in nvl2 still hold a base block, else that is the fatal error above)
    topology = f"BlockName=nvl1 Nodes={rack(1)}\nBlockName=nvl2 Nodes={rack(2)}\nBlockSizes=16\n"
    got = slurm_harness.load_topology(topology, [rack(1), rack(2, 17)])
    assert got.errors == ['error: _find_node_record: lookup failure for node "gb-r2-t18"']
    assert sorted(got.blocks["nvl2"]) == names(2, 17)
    assert sorted(got.declared["nvl2"]) == names(2)


def test_numatune_topology_loads_in_slurmctld(slurm, tmp_path, cli):
    """The synthetic NVL72 fleet (tests/fleet_gen.py: full racks, two racks on the sentinel clique under different
    cluster UUIDs, partial racks of 16, 9 and 8, a degraded and a registering tray) through `fleet --emit
    slurm-topology`: slurmctld 24.11 loads exactly numatune's blocks and places a one-block job inside one."""
    from tests.fleet_gen import nvl72_fleet, write_dir

    fleet = write_dir(nvl72_fleet(), tmp_path / "fleet")
    nodes = sorted(p.stem for p in fleet.glob("*.json"))
    out = tmp_path / "topology.conf"
    result = cli("fleet", str(fleet), "--emit", "slurm-topology", "-o", str(out))
    assert result.exit_code == 0, result.output
    topology = out.read_text()
    blocks, sizes = slurm_harness.parse_topology_conf(topology)
    assert len(blocks) >= 2 and sizes, topology
    base = min(int(x) for x in sizes)
    job = ["-N", str(base), f"--segment={base}"]
    got = slurm_harness.load_topology(topology, nodes, [job])
    assert got.errors == [], topology
    # Slurm holds exactly numatune's blocks, node by node, and every node numatune left out is in none
    assert sorted(got.blocks) == sorted(blocks)
    assert {k: sorted(v) for k, v in got.blocks.items()} == {k: sorted(v) for k, v in got.declared.items()}
    in_blocks = {n for members in got.declared.values() for n in members}
    assert in_blocks <= set(nodes)
    assert sorted(got.unblocked) == sorted(set(nodes) - in_blocks)
    # a job of one base block lands inside one of numatune's blocks
    assert len(per_block(got.placed[" ".join(job)], got.blocks)) == 1
