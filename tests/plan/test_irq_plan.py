"""IRQ planning on the hand-made root (see tests/irq_roots.py): pure functions, no writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from numatune.plan.irq import (
    exclusive_split,
    irqbalance_lines,
    physical_cores,
    plan_irqs,
    rank_nodes,
    shell_script,
    spread_order,
    tuned_snippet,
)
from numatune.readers.irqs import read_irq_report
from numatune.readers.topology import read_topology
from numatune.system.host import Host

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.irq_roots import GPU, NIC, NVME, build_root  # noqa: E402


@pytest.fixture
def world(tmp_path):
    host = Host.open(build_root(tmp_path))
    topo = read_topology(host)
    return topo, read_irq_report(host, topo)


def by_irq(plan):
    return {e.irq: e for e in plan.entries}


def test_physical_cores_first(world):
    topo, _ = world
    assert physical_cores(topo, range(8)) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert spread_order(topo, [4, 5, 6, 7]) == [4, 6, 5, 7]
    assert spread_order(topo, [5, 6, 7]) == [5, 6, 7]


def test_queues_spread_on_the_device_node(world):
    topo, report = world
    plan = plan_irqs(topo, report)
    e = by_irq(plan)
    # NIC on node 1: queues one CPU each, physical cores first (4, 6, then siblings 5, 7).
    assert [e[i].target for i in (41, 42, 43, 44)] == [(4,), (6,), (5,), (7,)]
    assert e[40].role == "control" and e[40].target == (4, 5, 6, 7)
    assert all(e[i].action == "set" for i in (40, 41, 42, 43, 44))
    # Managed NVMe queues and the node-less NIC are skipped, with the reason.
    assert e[51].action == e[52].action == "skip" and "managed" in e[51].reason
    assert e[70].action == "skip" and "node unknown" in e[70].reason
    # GPU (node 0) continues node 0's cursor after nothing else on node 0 took a queue CPU.
    assert e[60].target == (0,)
    assert {x.device for x in plan.entries} == {NIC, NVME, GPU, "ens9"}


def test_exclude_cpus_and_isolated(world):
    topo, report = world
    report = report._replace(isolated_cpus=(7,))
    plan = plan_irqs(topo, report, exclude_cpus={4, 5})
    e = by_irq(plan)
    assert {t for i in (41, 42, 43, 44) for t in e[i].target} == {6}
    assert e[40].target == (6,)
    assert plan.banned == (4, 5, 7)
    assert all(4 not in (x.target or ()) and 7 not in (x.target or ()) for x in plan.entries)


def test_ranks_per_node_matches_exclusive_split(world):
    topo, report = world
    split, notes = exclusive_split(topo, 2, reserve_cores=1)
    assert split == {0: (2, 3), 1: (6, 7)}
    assert len(notes) == 1 and "assumed in blocks" in notes[0]  # one GPU for two ranks: the split is a guess
    plan = plan_irqs(topo, report, ranks_per_node=2, reserve_cores=1)
    assert plan.reserved == (2, 3, 6, 7)
    assert plan.free_by_node == {0: (0, 1), 1: (4, 5)}
    assert {by_irq(plan)[i].target for i in (41, 42, 43, 44)} == {(4,), (5,)}


def test_no_free_cpu_is_a_skip_not_a_remote_placement(world):
    topo, report = world
    plan = plan_irqs(topo, report, ranks_per_node=2)  # each node's only rank takes every core
    assert all(e.action == "skip" for e in plan.entries)
    assert "no free CPU on node 1" in by_irq(plan)[41].reason
    split, notes = exclusive_split(topo, 8)
    assert notes and all(cpus == () for cpus in split.values())


def test_rank_nodes_follow_gpus_else_blocks(world):
    topo, _ = world
    assert rank_nodes(topo, 1) == ([0], None)  # one GPU, on node 0
    nodes, note = rank_nodes(topo, 4)  # more ranks than GPUs: contiguous blocks, said
    assert nodes == [0, 0, 1, 1]
    assert note.startswith("4 ranks per node but 1 gpu(s) with a known node") and "launch needs --node" in note
    assert note in exclusive_split(topo, 4)[1]


def test_already_in_place_is_kept(world):
    topo, report = world
    first = plan_irqs(topo, report)
    target = {e.irq: e.target for e in first.entries}
    devices = tuple(
        d._replace(irqs=tuple(i._replace(smp_affinity_list=target.get(i.irq) or i.smp_affinity_list) for i in d.irqs))
        for d in report.devices
    )
    again = plan_irqs(topo, report._replace(devices=devices))
    assert not again.changes and {e.action for e in again.entries} == {"keep", "skip"}


def test_persistent_forms(world):
    topo, report = world
    plan = plan_irqs(topo, report, exclude_cpus={2, 3})
    lines = irqbalance_lines(plan)
    assert lines[0] == "IRQBALANCE_BANNED_CPULIST=2-3"
    assert "--banirq=41" in lines[1] and "--banirq=51" not in lines[1]
    tuned = tuned_snippet(plan)
    assert "[scheduler]\nirq_process=false" in tuned
    assert "type=irq\ndevices=irq41\naffinity=4" in tuned


def test_shell_script_is_valid_sh(world, tmp_path):
    topo, report = world
    script = shell_script(plan_irqs(topo, report), "hand-made")
    assert script.startswith("#!/bin/sh") and "move 41 4" in script and "move 51" not in script
    path = tmp_path / "plan.sh"
    path.write_text(script)
    assert subprocess.run(["sh", "-n", str(path)], check=False).returncode == 0


def test_without_proc_irq_nothing_is_planned(tmp_path):
    host = Host.open(build_root(tmp_path, proc_irq=False))
    topo = read_topology(host)
    plan = plan_irqs(topo, read_irq_report(host, topo))
    assert not plan.changes
    assert "no /proc/irq" in by_irq(plan)[41].reason


@pytest.mark.parametrize("reserve", [0, 1])
def test_rank_cores_equal_launch_exclusive(reserve):
    """The cores kept free of IRQs are exactly those `launch --cpu-bind exclusive` gives each rank."""
    from numatune.model.launch import CpuBind, LaunchFacts, LaunchOptions
    from numatune.plan.launch import plan_launch
    from tests.conftest import fixture_root

    topo = read_topology(Host.open(fixture_root("handmade-launch-2s4gpu-cxl")))
    ranks = len(topo.gpus)
    split, _ = exclusive_split(topo, ranks, reserve)
    for rank in range(ranks):
        opts = LaunchOptions(rank=rank, local_size=ranks, cpu_bind=CpuBind("exclusive"), reserve_cores=reserve,
                             mem_policy="none", via="direct")
        launched = plan_launch(topo, topo.devices, LaunchFacts(), opts, ["true"])
        assert tuple(launched.cpus) == split[rank], (rank, launched.reasons)
