"""apply()'s arena size from a plan (pure: the allocation itself runs in the VM stage)."""

from __future__ import annotations

from numatune.placement.pytorch import plan_extent
from numatune.plan.memory import latency_first

MIB = 1 << 20


def test_an_interleaved_last_item_is_inside_the_arena():
    """The straddling item's DRAM and CXL parts share its offset: the arena must hold all of it (the
    paper's interleave), not end one part past the offset (a 4 MiB arena for 3 + 2 MiB)."""
    plan = latency_first([("adam state", 3 * MIB, 1), ("bf16 weights", 2 * MIB, 2)], dram_budget=4 * MIB,
                         dram_node=0, cxl_free={3: 512 * MIB})
    weights = [p for p in plan.parts if p.item == "bf16 weights"]
    assert len(weights) == 2 and all(p.interleaved for p in weights) and len({p.offset for p in weights}) == 1
    assert plan_extent(plan.parts) == 5 * MIB


def test_a_plan_in_dram_alone_ends_at_its_last_item():
    plan = latency_first([("a", 1 * MIB, 1), ("b", 2 * MIB, 2)], dram_budget=64 * MIB, dram_node=0, cxl_free={})
    assert plan_extent(plan.parts) == max(p.offset + p.nbytes for p in plan.parts) >= 3 * MIB
