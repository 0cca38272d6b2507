"""irq plan on a hybrid CPU: rank cores are launch's (performance first), --irq-cpu-kind efficiency.

The topology is the real DGX Spark GB10 tree (X925: CPUs 5-9,15-19; A725: 0-4,10-14). No public tree has
/proc/interrupts for it, so the NIC and its IRQs below are HAND-MADE model records.
"""

from __future__ import annotations

import pytest

from numatune.analysis.irq import irq_findings
from numatune.model.irq import DeviceIrqs, Irq, IrqReport
from numatune.model.launch import CpuBind
from numatune.plan.irq import exclusive_split, plan_irqs
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root
from tests.plan.test_launch import plan

X925 = frozenset([*range(5, 10), *range(15, 20)])
A725 = frozenset([*range(0, 5), *range(10, 15)])


@pytest.fixture(scope="module")
def gb10():
    return read_topology(Host.open(fixture_root("nvidia-dgx-gb10")))


def report(where: str = "0-19") -> IrqReport:
    cpus = tuple(range(20)) if where == "0-19" else tuple(sorted(X925))
    irqs = tuple(Irq(100 + q, (f"mlx5_comp{q}@pci:0000:01:00.0",), "queue", q, total=10, smp_affinity_list=cpus,
                     present=True, managed=False) for q in range(8))
    nic = DeviceIrqs("0000:01:00.0", "0000:01:00.0", "nic", 0, netdevs=("enP1p1s0",), irqs=irqs)
    return IrqReport("hand-made", False, tuple(range(20)), True, True, (nic,))


@pytest.mark.parametrize("ranks", [1, 2, 3, 10, 12])
def test_rank_cores_are_exactly_launchs_exclusive_cores(gb10, ranks):
    split, _ = exclusive_split(gb10, ranks)
    for r in range(ranks):
        p = plan("nvidia-dgx-gb10", node=0, rank=r, local_size=ranks, cpu_bind=CpuBind("exclusive"))
        assert split[r] == p.cpus


@pytest.mark.parametrize("ranks", [None, 1, 2, 12])
def test_irq_cpu_kind_efficiency_keeps_irqs_on_a725_and_off_rank_cores(gb10, ranks):
    p = plan_irqs(gb10, report(), ranks_per_node=ranks, cpu_kind="efficiency")
    rank_cores = {c for cpus in p.rank_cpus.values() for c in cpus}
    targets = {c for e in p.entries if e.target for c in e.target}
    assert targets and targets <= A725 and not targets & rank_cores
    assert len([e for e in p.entries if e.action == "set"]) == 8
    assert any("efficiency cores Cortex-A725" in n for n in p.notes)


def test_irq_cpu_kind_any_spreads_over_every_free_core(gb10):
    p = plan_irqs(gb10, report())
    targets = {c for e in p.entries if e.target for c in e.target}
    assert targets & X925 and targets & A725


def test_nt208_when_irqs_sit_on_x925_cores_only(gb10):
    codes = [f.code for f in irq_findings(gb10, report("x925"))]
    assert codes == ["NT208"]
    assert irq_findings(gb10, report()) == []


def test_symmetric_tree_efficiency_changes_nothing():
    topo = read_topology(Host.open(fixture_root("128arm-2pa2n8cluster4co")))
    irqs = tuple(Irq(100 + q, (f"q{q}",), "queue", q, total=1, smp_affinity_list=(0,), present=True, managed=False)
                 for q in range(4))
    rep = IrqReport("hand-made", False, tuple(range(128)), True, True,
                    (DeviceIrqs("0000:01:00.0", "0000:01:00.0", "nic", 0, irqs=irqs),))
    a, b = plan_irqs(topo, rep, ranks_per_node=2), plan_irqs(topo, rep, ranks_per_node=2, cpu_kind="efficiency")
    assert a.entries == b.entries and a.rank_cpus == b.rank_cpus
    assert irq_findings(topo, rep) == []


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_rank_cores_with_reserve_match_launch(ranks):
    topo = read_topology(Host.open(fixture_root("20em64t-hybrid-1p6c2t+2ca4co1t")))
    split, _ = exclusive_split(topo, ranks, reserve_cores=2)
    for r in range(ranks):
        p = plan("20em64t-hybrid-1p6c2t+2ca4co1t", node=0, rank=r, local_size=ranks, cpu_bind=CpuBind("exclusive"),
                 reserve_cores=2)
        assert split[r] == p.cpus
