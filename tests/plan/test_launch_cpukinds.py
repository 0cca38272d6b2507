"""launch on hybrid CPUs: exclusive, cores:N and socket take performance cores first (real trees)."""

from __future__ import annotations

import pytest

from numatune.model.launch import CpuBind
from tests.plan.test_launch import plan

GB10 = "nvidia-dgx-gb10"  # X925: CPUs 5-9,15-19; A725: CPUs 0-4,10-14
X925 = frozenset([*range(5, 10), *range(15, 20)])
A725 = frozenset([*range(0, 5), *range(10, 15)])


@pytest.mark.parametrize("size", [1, 2, 5, 10])
def test_gb10_exclusive_ranks_get_x925_cores_only(size):
    seen: set[int] = set()
    for rank in range(size):
        p = plan(GB10, node=0, rank=rank, local_size=size, cpu_bind=CpuBind("exclusive"))
        assert set(p.cpus) <= X925 and len(p.cpus) == 10 // size
        assert not seen & set(p.cpus)
        seen |= set(p.cpus)
        assert [(k.name, k.role) for k in p.cpu_kinds] == [("Cortex-X925", "performance")]
        assert not p.warnings
    assert seen == X925


def test_gb10_more_ranks_than_x925_cores_reach_a725_with_a_warning():
    plans = [plan(GB10, node=0, rank=r, local_size=12, cpu_bind=CpuBind("exclusive")) for r in range(12)]
    assert all(len(p.cpus) == 1 for p in plans)
    assert {p.cpus[0] for p in plans[:10]} == X925 and {p.cpus[0] for p in plans[10:]} <= A725
    assert all("not enough performance cores" in " ".join(p.warnings) for p in plans)
    assert plans[11].cpu_kinds[0].role == "efficiency"


def test_gb10_cores_n_fills_x925_then_a725():
    p0 = plan(GB10, node=0, rank=0, local_size=2, cpu_bind=CpuBind("cores", 6))
    p1 = plan(GB10, node=0, rank=1, local_size=2, cpu_bind=CpuBind("cores", 6))
    assert set(p0.cpus) <= X925 and len(p0.cpus) == 6
    assert len(p1.cpus) == 6 and set(p1.cpus) & X925 and set(p1.cpus) & A725
    assert [k.role for k in p1.cpu_kinds] == ["performance", "efficiency"]
    assert any("not enough performance cores" in w for w in p1.warnings)


def test_gb10_socket_is_the_x925_cores_and_any_restores_every_core():
    p = plan(GB10, node=0, cpu_bind=CpuBind("socket"))
    assert frozenset(p.cpus) == X925
    p = plan(GB10, node=0, cpu_bind=CpuBind("socket"), cpu_kind="any")
    assert p.cpus == tuple(range(20))
    assert [k.role for k in p.cpu_kinds] == ["performance", "efficiency"]


def test_gb10_cpu_kind_efficiency_takes_a725_first():
    p = plan(GB10, node=0, cpu_bind=CpuBind("exclusive"), cpu_kind="efficiency")
    assert frozenset(p.cpus) == A725 and not p.warnings
    assert any("Cortex-A725 (efficiency) core(s) only" in r for r in p.reasons)


def test_node_mode_is_unchanged_but_says_which_kinds():
    p = plan(GB10, node=0, cpu_bind=CpuBind("node"))
    assert p.cpus == tuple(range(20))
    assert [k.cpus for k in p.cpu_kinds] == [tuple(sorted(X925)), tuple(sorted(A725))]


def test_raptor_lake_exclusive_keeps_smt_siblings_on_p_cores():
    """i7-1370P: 6 P-cores with 2 threads (CPUs 0-11), 8 E-cores (12-19)."""
    p = plan("20em64t-hybrid-1p6c2t+2ca4co1t", node=0, rank=0, local_size=2, cpu_bind=CpuBind("exclusive"))
    assert p.cpus == (0, 1, 2, 3, 4, 5) and p.cpu_kinds[0].role == "performance"
    p = plan("20em64t-hybrid-1p6c2t+2ca4co1t", node=0, rank=1, local_size=2, cpu_bind=CpuBind("exclusive"))
    assert p.cpus == (6, 7, 8, 9, 10, 11)


def test_alder_lake_pmu_kinds():
    p = plan("nri-sample1-alderlake", node=0, cpu_bind=CpuBind("exclusive"))
    assert set(p.cpus) == set(range(8)) and p.cpu_kinds[0].name == "Intel Core (P-core)"


def test_symmetric_tree_is_unchanged():
    """One kind: the plan is what it was before kinds existed (all cores, no kind lines)."""
    for kind in ("performance", "efficiency", "any"):
        p = plan("128arm-2pa2n8cluster4co", node=1, rank=1, local_size=4, cpu_bind=CpuBind("exclusive"),
                 cpu_kind=kind)
        assert p.cpus == tuple(range(40, 48)) and p.cpu_kinds == ()
        assert not any("cpu kind" in r for r in p.reasons)


def test_summary_line_names_the_kind():
    from numatune.render.launch_text import summary_line

    p = plan(GB10, node=0, cpu_bind=CpuBind("exclusive"))
    assert "cpus 5-9,15-19 (exclusive, 10 Cortex-X925 performance)" in summary_line(p)
    p = plan("128arm-2pa2n8cluster4co", node=0, cpu_bind=CpuBind("exclusive"))
    assert "cpus 0-31 (exclusive)," in summary_line(p)


def test_reserve_cores_takes_efficiency_cores_on_hybrid_cpus():
    """i7-1370P: CPU 0 is a P-core; --reserve-cores 2 leaves E-cores 12-13 to housekeeping, not P-cores."""
    p = plan("20em64t-hybrid-1p6c2t+2ca4co1t", node=0, cpu_bind=CpuBind("node"), reserve_cores=2)
    assert p.cpus == (*range(12), *range(14, 20))
    assert any("after reserving its least performant 2 core(s)" in r for r in p.reasons)
    p = plan("128arm-2pa2n8cluster4co", node=0, cpu_bind=CpuBind("node"), reserve_cores=2)
    assert p.cpus == tuple(range(2, 32))  # one kind: the first cores, as before
