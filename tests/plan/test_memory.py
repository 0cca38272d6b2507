"""The latency-first plan on the study's sizes (arXiv 2507.03305: 7B and 12B models, 4K-32K contexts).

Model shapes are the public configs of a 7B and a 12B model of the kind studied: Llama-2-7B
(6,738,415,616 parameters, 32 layers, hidden 4096) and Mistral-NeMo-12B (12,247,782,400 parameters,
40 layers, hidden 5120). Sizes follow from them: Adam keeps 16 B per parameter in host memory
(momentum, variance, fp32 master weights, fp32 gradients), bf16 weights and gradients 2 B each, and
activation checkpoints one bf16 [batch, seq, hidden] tensor per layer.
"""

from __future__ import annotations

import pytest

from numatune.errors import InputError, Unsupported, UsageError
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


def test_7b_4k_interleaves_the_straddling_item_and_dram_left_over_takes_later_items():
    """The published allocator's rule: the straddling item is interleaved over DRAM and both CXL nodes,
    DRAM charged a third of it; what DRAM has left then takes the (smaller) checkpoints, and the bf16
    gradients straddle again."""
    items = training_items(P7, layers=L7, hidden=H7, seq_len=4096)
    plan = latency_first(items, dram_budget=110 * GIB, dram_node=0, cxl_free=TWO_CXL, cxl_bandwidth=EQUAL_BW)
    dram = {p.item: p.nbytes for p in plan.parts if p.tier == "dram"}
    cxl = {p.item: p.nbytes for p in plan.parts if p.tier == "cxl"}
    assert dram["bf16 weights"] == 2 * P7 // 3 and cxl["bf16 weights"] == 2 * P7 - 2 * P7 // 3
    assert dram["activation checkpoints"] == GIB and "activation checkpoints" not in cxl
    assert dram["bf16 gradients"] == 2 * P7 // 3  # still DRAM left (5.4 GiB - 1 GiB > 4.2 GiB)
    w = plan.parts_of("bf16 weights")
    assert all(p.interleaved for p in w) and w[0].offset == w[1].offset and w[1].nodes == (2, 3)
    assert plan.fits and plan.dram_bytes <= 110 * GIB
    assert plan.cxl_by_node() == {2: plan.cxl_bytes // 2, 3: plan.cxl_bytes // 2}
    assert sum(1 for r in plan.reasons if "interleaved over DRAM node 0 and CXL node(s) 2,3" in r) == 2


def test_7b_4k_split_keeps_the_straddling_item_contiguous():
    items = training_items(P7, layers=L7, hidden=H7, seq_len=4096)
    plan = latency_first(items, dram_budget=110 * GIB, dram_node=0, cxl_free=TWO_CXL, cxl_bandwidth=EQUAL_BW,
                         straddle="split")
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
    assert [p.item for p in spilled] == ["fp32 master weights"]  # the last of class 1, as the allocator orders it
    assert spilled[0].interleaved and spilled[0].nbytes == 4 * P12 - 4 * P12 // 2  # half on the one CXL node
    assert plan.fits and plan.cxl_bytes + plan.dram_bytes == sum(i.nbytes for i in items)
    assert any("fp32 master weights (optimizer data" in w and "latency-bound" in w for w in plan.warnings)


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
    with pytest.raises(UsageError, match="expected a positive parameter count"):
        training_items(0)
    with pytest.raises(UsageError, match="need --layers, --hidden, --seq-len"):
        training_items(P7, seq_len=4096)
    with pytest.raises(UsageError, match="optimizer 'lion'"):
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
    # node 1's socket has CXL node 3 (SLIT 14); CXL node 2 is behind socket 0 (SLIT 24) and left out
    assert plan.cxl_shares == ((3, 1.0),) and plan.cxl_budget == 32 * GIB - (256 << 20)
    assert plan.reasons[0].startswith("local DRAM: node 1 (GPU 0000:86:00.0")
    assert "CXL: CXL node(s) on node 1's socket; far-socket CXL node(s) 2 left out" in plan.reasons[0]
    assert "HMAT read bandwidth from node 1: node 3 30000 MB/s" in plan.cxl_source
    assert not plan.fits  # 126.5 GiB asked, 56.25 + 31.75 available
    assert not plan.warnings or not any("far-socket" in w for w in plan.warnings)
    assert sum(n for _, n in plan.unplaced) == sum(i.nbytes for i in items) - plan.dram_budget - plan.cxl_budget


def test_the_published_allocators_worked_example():
    """The usage tutorial of CXL-Aware-LLM-Finetuning (the paper's code): LFM2.5-8B-A1B (8,474,147,584
    parameters, 24 layers, hidden 2048), batch 1, sequence 4096, DeepSpeed CPU Adam, local DRAM node 0 with a
    100 GiB budget, one CXL node (1) with 256 GiB. Its table: momentum, variance and master gradients [0],
    master weights [0, 1], compute (bf16) weights, activations and compute gradients [1]."""
    p = 8_474_147_584
    items = training_items(p, layers=24, hidden=2048, seq_len=4096)
    plan = latency_first(items, dram_budget=100 * GIB, cxl_budget=256 * GIB, dram_node=0,
                         cxl_free={1: 512 * GIB}, cxl_bandwidth={1: 1})
    masks = {i.name: list(plan.nodes_of(i.name)) for i in plan.items}
    assert masks == {"momentum (exp_avg)": [0], "variance (exp_avg_sq)": [0], "fp32 gradients": [0],
                     "fp32 master weights": [0, 1], "bf16 weights": [1], "activation checkpoints": [1],
                     "bf16 gradients": [1]}
    # the allocator's arithmetic: 3 x 31.57 GiB local, 5.29 GiB left; the master weights (31.57 GiB) straddle,
    # local charged min(5.29 GiB, size // 2) = what is left (less numatune's page padding), CXL the rest
    w = {p_.tier: p_ for p_ in plan.parts_of("fp32 master weights")}
    assert w["dram"].interleaved and w["cxl"].interleaved
    assert 0 <= 100 * GIB - 12 * p - w["dram"].nbytes < 3 * 4096
    assert w["dram"].nbytes + w["cxl"].nbytes == 4 * p
    assert plan.fits and plan.cxl_bytes == 4 * p - w["dram"].nbytes + 2 * p + 24 * 4096 * 2048 * 2 + 2 * p
    # the old rule (split) puts the same bytes on the same tiers here, as one contiguous buffer
    split = latency_first(items, dram_budget=100 * GIB, cxl_budget=256 * GIB, dram_node=0,
                          cxl_free={1: 512 * GIB}, cxl_bandwidth={1: 1}, straddle="split")
    assert {i.name: list(split.nodes_of(i.name)) for i in split.items} == masks
    assert not any(p_.interleaved for p_ in split.parts)
    with pytest.raises(UsageError, match="straddle 'half'"):
        latency_first(items, dram_budget=GIB, dram_node=0, straddle="half")


def reference_latency_first(local: int, cxl: int, n_cxl: int, levels: dict[int, list[int]]
                            ) -> tuple[list[tuple[str, int, int]], bool]:
    """The published allocator as the paper and its repository describe it, written here independently of
    numatune: levels in order 1..4, items in order within a level; an item that fits in what is left of the
    local budget goes local; else, while some local budget is left, it is interleaved over local and every CXL
    device with local charged min(left, size // (1 + n)) and CXL the rest; else it goes to CXL. The CXL budget
    is checked once at the end. Returns ([(kind, local bytes, cxl bytes)] in order, whether CXL sufficed)."""
    out = []
    for level in sorted(levels):
        for size in levels[level]:
            if size <= local:
                out.append(("local", size, 0))
                local -= size
            elif local > 0:
                here = min(local, size // (1 + n_cxl))
                out.append(("local+cxl", here, size - here))
                local -= here
                cxl -= size - here
            else:
                out.append(("cxl", 0, size))
                cxl -= size
    return out, cxl >= 0


def _kind(plan, name: str) -> tuple[str, int, int]:  # noqa: ANN001
    parts = plan.parts_of(name)
    d = sum(p.nbytes for p in parts if p.tier == "dram")
    c = sum(p.nbytes for p in parts if p.tier == "cxl")
    kind = "local+cxl" if any(p.interleaved for p in parts) else ("local" if not c else "cxl" if not d else "split")
    return kind, d, c


@pytest.mark.parametrize("seed", range(40))
def test_latency_first_matches_an_independent_reference_of_the_published_allocator(seed):
    """Random item sizes (whole pages, so numatune's page padding is zero), budgets and 1-3 CXL nodes: every item
    gets the same kind, the same local bytes and the same CXL bytes as the reference; the plan fits exactly when
    the reference's CXL budget holds."""
    import random

    rng = random.Random(seed)
    page = 4096
    n_cxl = rng.randint(1, 3)
    names = {1: ["momentum", "variance", "master gradients", "master weights"], 2: ["bf16 weights"],
             3: ["activations"], 4: ["bf16 gradients"]}
    sizes = {lv: [rng.randint(1, 1 << 20) * page for _ in ns] for lv, ns in names.items()}
    total = sum(sum(v) for v in sizes.values())
    local = rng.randint(0, total // page) * page
    cxl = rng.randint(0, total // page) * page
    items = [Item(n, s, lv) for lv in (4, 3, 2, 1) for n, s in zip(names[lv], sizes[lv], strict=True)]  # any order
    nodes = range(2, 2 + n_cxl)
    plan = latency_first(items, dram_budget=local, cxl_budget=cxl, dram_node=0,
                         cxl_free={n: total + GIB for n in nodes}, cxl_bandwidth=dict.fromkeys(nodes, 1.0),
                         strict=False)
    ref, fits = reference_latency_first(local, cxl, n_cxl, sizes)
    order = [n for lv in sorted(names) for n in names[lv]]
    assert [i.name for i in plan.items] == order
    if fits:
        assert [_kind(plan, n) for n in order] == ref
        assert plan.fits
    else:  # the reference runs out of CXL: numatune says what does not fit instead
        assert not plan.fits
        assert sum(b for _, b in plan.unplaced) == sum(c for _, _, c in ref) - cxl
