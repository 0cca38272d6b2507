"""The latency-first plan on the study's sizes (arXiv 2507.03305: 7B and 12B models, 4K-32K contexts).

Model shapes are the public configs of a 7B and a 12B model of the kind studied: Llama-2-7B
(6,738,415,616 parameters, 32 layers, hidden 4096) and Mistral-NeMo-12B (12,247,782,400 parameters,
40 layers, hidden 5120). Sizes follow from them: Adam keeps 16 B per parameter in host memory
(momentum, variance, fp32 master weights, fp32 gradients), bf16 weights and gradients 2 B each, and
activation checkpoints one bf16 [batch, seq, hidden] tensor per layer.
"""

from __future__ import annotations

import pytest

from numatune.errors import InputError, Unsupported
from numatune.plan.memory import Item, latency_first, training_items
from tests.placement.conftest import HM, context_of

GIB = 1 << 30
P7, L7, H7 = 6_738_415_616, 32, 4096
P12, L12, H12 = 12_247_782_400, 40, 5120
TWO_CXL = {2: 64 * GIB, 3: 64 * GIB}
EQUAL_BW = {2: 30000, 3: 30000}


@pytest.mark.parametrize(("params", "layers", "hidden", "seq", "opt_gib", "act_bytes"), [
    (P7, L7, H7, 4096, 100.41, 32 * 4096 * 4096 * 2),  # 1 GiB of checkpoints
    (P7, L7, H7, 32768, 100.41, 32 * 32768 * 4096 * 2),  # 8 GiB
    (P12, L12, H12, 4096, 182.51, 40 * 4096 * 5120 * 2),  # 1.56 GiB
    (P12, L12, H12, 32768, 182.51, 40 * 32768 * 5120 * 2),  # 12.5 GiB
])
def test_training_items_follow_from_the_shapes(params, layers, hidden, seq, opt_gib, act_bytes):
    items = training_items(params, layers=layers, hidden=hidden, seq_len=seq)
    by = {i.name: i for i in items}
    assert [i.cls for i in items] == [1, 1, 1, 1, 2, 3, 4]
    assert sum(i.nbytes for i in items if i.cls == 1) == 16 * params
    assert round(16 * params / GIB, 2) == opt_gib
    assert by["bf16 weights"].nbytes == by["bf16 gradients"].nbytes == 2 * params
    assert by["activation checkpoints"].nbytes == act_bytes


def test_7b_4k_optimizer_in_dram_weights_straddle_the_rest_striped_on_cxl():
    items = training_items(P7, layers=L7, hidden=H7, seq_len=4096)
    plan = latency_first(items, dram_budget=110 * GIB, dram_node=0, cxl_free=TWO_CXL, cxl_bandwidth=EQUAL_BW)
    dram = {p.item: p.nbytes for p in plan.parts if p.tier == "dram"}
    cxl = {p.item: p.nbytes for p in plan.parts if p.tier == "cxl"}
    assert set(dram) == {"momentum (exp_avg)", "variance (exp_avg_sq)", "fp32 master weights", "fp32 gradients",
                         "bf16 weights"}
    assert dram["bf16 weights"] == 110 * GIB - 16 * P7  # 9.59 GiB: what is left of the budget
    assert cxl == {"bf16 weights": 2 * P7 - dram["bf16 weights"], "activation checkpoints": GIB,
                   "bf16 gradients": 2 * P7}
    # the split item is one contiguous buffer: its CXL part starts where its DRAM part ends
    w = plan.parts_of("bf16 weights")
    assert w[1].offset == w[0].offset + w[0].nbytes
    assert plan.dram_bytes == 110 * GIB and plan.fits and not plan.warnings
    assert plan.cxl_shares == ((2, 0.5), (3, 0.5)) and plan.cxl_by_node() == {2: plan.cxl_bytes // 2,
                                                                             3: plan.cxl_bytes // 2}
    assert any("straddles the DRAM budget: 9.59 GiB in DRAM, 2.96 GiB on CXL" in r for r in plan.reasons)


def test_12b_32k_spills_optimizer_data_to_cxl_with_a_warning():
    items = training_items(P12, layers=L12, hidden=H12, seq_len=32768)
    plan = latency_first(items, dram_budget=160 * GIB, dram_node=1, cxl_free={2: 128 * GIB},
                         cxl_bandwidth={2: 30000})
    spilled = [p for p in plan.parts if p.tier == "cxl" and p.cls == 1]
    assert [p.item for p in spilled] == ["fp32 gradients"]
    assert spilled[0].nbytes == 16 * P12 - 160 * GIB
    assert plan.cxl_bytes == 16 * P12 - 160 * GIB + 2 * P12 + 40 * 32768 * 5120 * 2 + 2 * P12
    assert any("fp32 gradients (optimizer data" in w and "latency-bound" in w for w in plan.warnings)


def test_bandwidth_weighted_shares_and_the_tightest_node_bounds_the_stripe():
    plan = latency_first([Item("bf16 weights", 10 * GIB, 2)], dram_budget=0, dram_node=0,
                         cxl_free={2: 64 * GIB, 3: 8 * GIB}, cxl_bandwidth={2: 30000, 3: 10000})
    assert plan.cxl_shares == ((2, 0.75), (3, 0.25))
    # node 3 holds a quarter of the stripe: (8 GiB - 256 MiB) / 0.25 = 31 GiB in all
    assert plan.cxl_budget == 31 * GIB
    assert plan.cxl_by_node() == {2: int(7.5 * GIB), 3: int(2.5 * GIB)}


def test_class_order_wins_over_input_order_and_items_start_on_pages():
    plan = latency_first([("grads", 5000, 4), ("adam m", 3000, 1), ("acts", 100, 3)], dram_budget=8192,
                         dram_node=0, strict=False)
    assert [(p.item, p.offset, p.nbytes) for p in plan.parts] == [("adam m", 0, 3000), ("acts", 4096, 100)]
    assert plan.unplaced == (("grads", 5000),)  # the page padding is counted against the budget


def test_nothing_fits_and_no_cxl_are_clear_errors():
    items = training_items(P7)
    with pytest.raises(Unsupported) as ei:
        latency_first(items, dram_budget=50 * GIB, dram_node=0)
    msg = ei.value.message
    assert "does not fit in local DRAM (no CXL node)" in msg and "budgets: DRAM 50.00 GiB, CXL 0.00 GiB" in msg
    assert "fp32 master weights" in msg and "bf16 gradients 12.55 GiB" in msg
    plan = latency_first(items, dram_budget=50 * GIB, dram_node=0, strict=False)
    assert not plan.fits and plan.unplaced[-1] == ("bf16 gradients", 2 * P7)
    with pytest.raises(Unsupported, match="given but this node has no CXL memory node"):
        latency_first(items, dram_budget=GIB, cxl_budget=GIB, dram_node=0)
    with pytest.raises(InputError, match="class 5 is not 1-4"):
        latency_first([("x", 1, 5)], dram_budget=GIB)
    with pytest.raises(InputError, match="expected a positive parameter count"):
        training_items(0)
    with pytest.raises(InputError, match="need --layers, --hidden, --seq-len"):
        training_items(P7, seq_len=4096)
    with pytest.raises(InputError, match="optimizer 'lion'"):
        training_items(P7, optimizer="lion")


def test_budget_default_is_free_memory_minus_reserve():
    plan = latency_first([Item("m", GIB, 1)], dram_node=0, dram_free=100 * GIB, dram_total=400 * GIB)
    assert plan.dram_budget == 80 * GIB  # reserve: 5% of the node (20 GiB), at least 2 GiB
    assert "free memory of node 0 (100.00 GiB) minus a 20.00 GiB reserve" in plan.dram_source
    assert latency_first([Item("m", GIB, 1)], dram_node=0, dram_free=10 * GIB, dram_reserve=GIB).dram_budget == 9 * GIB


def test_live_figures_come_from_the_gpus_node_through_the_topology():
    """handmade 2-socket: GPU 2 (0000:86:00.0) is on node 1 (62.5 GiB free of 125), CXL nodes 2 and 3
    (32 GiB free each, HMAT 30000 MB/s)."""
    items = training_items(P7, layers=L7, hidden=H7, seq_len=4096)
    plan = latency_first(items, context=context_of(HM), gpu=2, strict=False)
    assert plan.dram_node == 1
    assert plan.dram_budget == int(62.5 * GIB) - int(6.25 * GIB)
    assert plan.cxl_shares == ((2, 0.5), (3, 0.5)) and plan.cxl_budget == 2 * (32 * GIB - (256 << 20))
    assert plan.reasons[0].startswith("local DRAM: node 1 (GPU 0000:86:00.0")
    assert not plan.fits  # 126.5 GiB asked, 56.25 + 63.5 available
    assert sum(n for _, n in plan.unplaced) == sum(i.nbytes for i in items) - plan.dram_budget - plan.cxl_budget
