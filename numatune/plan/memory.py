"""The latency-first memory plan for CPU-offloaded fine-tuning: what goes to local DRAM, what to CXL.

Liaw & Chen (arXiv 2507.03305) measured the CPU Adam step at 1.08x its DRAM time with 1.8M elements
on CXL but 3.8x at 68M and 4.2x at 545M: the optimizer's data is latency-bound and belongs in local
DRAM, while the buffers that are only streamed (bf16 weights to the GPU, checkpointed activations,
bf16 gradients) tolerate CXL. So items are taken in priority-class order and local DRAM is filled
first; an item that straddles the DRAM budget is split (one contiguous buffer, DRAM then CXL), and
the rest is striped across the CXL nodes by bandwidth. Pure: budgets, nodes and bandwidths come in.

Classes: 1 CPU-optimizer data (momentum, variance, fp32 master weights and gradients), 2 bf16 weights
sent to the GPU, 3 activation checkpoints, 4 bf16 gradients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from numatune.errors import InputError, Unsupported

GIB = 1 << 30
ALIGN = 4096  # item starts (the plan's arena is page-granular)
CLASS_NAMES = {1: "optimizer", 2: "bf16 weights", 3: "activations", 4: "bf16 gradients"}
# bytes per trainable parameter of class-1 items, per optimizer (fp32 master copy and fp32 gradients
# are what CPU Adam reads; the GPU side keeps bf16)
OPTIMIZER_STATE = {
    "adam": (("momentum (exp_avg)", 4), ("variance (exp_avg_sq)", 4), ("fp32 master weights", 4),
             ("fp32 gradients", 4)),
    "adamw": (("momentum (exp_avg)", 4), ("variance (exp_avg_sq)", 4), ("fp32 master weights", 4),
              ("fp32 gradients", 4)),
    "sgd": (("momentum buffer", 4), ("fp32 master weights", 4), ("fp32 gradients", 4)),
}


class Item(NamedTuple):
    name: str
    nbytes: int
    cls: int  # 1 optimizer, 2 bf16 weights, 3 activations, 4 bf16 gradients (placement priority)


class Part(NamedTuple):
    item: str
    cls: int
    tier: str  # "dram" | "cxl"
    nbytes: int
    offset: int  # in the plan's single arena: DRAM region first, then the CXL region
    nodes: tuple[int, ...]  # the DRAM node, or the CXL stripe's nodes


class MemoryPlan(NamedTuple):
    items: tuple[Item, ...]
    dram_node: int | None
    dram_budget: int
    dram_source: str  # how the budget was found
    cxl_shares: tuple[tuple[int, float], ...]  # (node, fraction) of the CXL stripe
    cxl_budget: int
    cxl_source: str
    parts: tuple[Part, ...]
    unplaced: tuple[tuple[str, int], ...]  # (item, bytes) that fit nowhere
    reasons: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def dram_bytes(self) -> int:
        return sum(p.nbytes for p in self.parts if p.tier == "dram")

    @property
    def cxl_bytes(self) -> int:
        return sum(p.nbytes for p in self.parts if p.tier == "cxl")

    @property
    def fits(self) -> bool:
        return not self.unplaced

    def cxl_by_node(self) -> dict[int, int]:
        """Bytes each CXL node receives (the stripe's shares of the CXL region)."""
        total = self.cxl_bytes
        return {n: round(total * s) for n, s in self.cxl_shares}

    def parts_of(self, item: str) -> list[Part]:
        return [p for p in self.parts if p.item == item]


# -- sizes --------------------------------------------------------------------------------------------------
def training_items(params: float, *, optimizer: str = "adam", layers: int | None = None, hidden: int | None = None,
                   seq_len: int | None = None, batch: int = 1, checkpoint_bytes: int = 2) -> list[Item]:
    """What CPU-offloaded fine-tuning keeps in host memory, from the model's shape.

    Per trainable parameter: the optimizer's fp32 state (16 B for Adam: momentum, variance, master
    weights, gradients), the bf16 weights streamed to the GPU (2 B) and the bf16 gradients streamed
    back (2 B). Activation checkpoints: one bf16 [batch, seq_len, hidden] tensor per layer (the layer
    input that checkpointing keeps and offloads); left out when the shape is not given.
    """
    if params <= 0:
        raise InputError(f"--params {params:g}: expected a positive parameter count (7e9)")
    opt = optimizer.lower()
    if opt not in OPTIMIZER_STATE:
        raise InputError(f"optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZER_STATE)}")
    n = int(params)
    items = [Item(name, n * size, 1) for name, size in OPTIMIZER_STATE[opt]]
    items.append(Item("bf16 weights", n * 2, 2))
    shape = (layers, hidden, seq_len)
    if any(v is not None for v in shape):
        if any(v is None or v <= 0 for v in shape) or batch <= 0:
            raise InputError("activation checkpoints need --layers, --hidden, --seq-len (and --batch) all positive")
        items.append(Item("activation checkpoints", layers * batch * seq_len * hidden * checkpoint_bytes, 3))
    items.append(Item("bf16 gradients", n * 2, 4))
    return items


# -- the plan -----------------------------------------------------------------------------------------------
def latency_first(items: Sequence[Item | tuple], dram_budget: int | None = None, cxl_budget: int | None = None, *,
                  dram_node: int | None = None, dram_free: int | None = None, dram_reserve: int | None = None,
                  dram_total: int | None = None, cxl_free: Mapping[int, int] | None = None,
                  cxl_bandwidth: Mapping[int, float] | None = None, strict: bool = True,
                  context: Any = None, gpu: Any = None,
                  bandwidths: Mapping[int, float] | None = None) -> MemoryPlan:
    """Fill local DRAM in class order, split the straddling item, stripe the rest over CXL.

    Either give the figures (dram_free, cxl_free {node: bytes}, cxl_bandwidth {node: MB/s}) or let
    them be read from the live node (`context`, a placement LiveContext; `gpu` picks the GPU whose
    node's DRAM is "local"; `bandwidths` {node: MB/s}, e.g. from `numatune probe`, replace HMAT's
    figures for the CXL shares). Budgets default to what is free minus the reserve (DRAM: max(2 GiB, 5%
    of the node), CXL: 256 MiB per node). strict: raise when something fits nowhere.
    """
    its = sorted((_item(i) for i in items), key=lambda i: i.cls)  # stable: the caller's order within a class
    reasons: list[str] = []
    warnings: list[str] = []
    if dram_free is None and cxl_free is None and context is not None:
        dram_node, dram_free, dram_total, cxl_free, cxl_bandwidth, why = _live_figures(context, gpu)
        reasons.append(why)
        if bandwidths and all(bandwidths.get(n) for n in cxl_free):
            cxl_bandwidth = {n: float(bandwidths[n]) for n in cxl_free}
    # DRAM budget
    if dram_budget is not None:
        if dram_budget < 0:
            raise InputError(f"dram_budget {dram_budget} is negative")
        d_budget, d_source = dram_budget, "given"
    elif dram_free is not None:
        reserve = dram_reserve if dram_reserve is not None else max(2 * GIB, (dram_total or 0) // 20)
        d_budget = max(0, dram_free - reserve)
        d_source = f"free memory of node {dram_node} ({_gib(dram_free)}) minus a {_gib(reserve)} reserve"
    else:
        raise InputError("no DRAM budget: give dram_budget, or the node's free memory")
    # CXL budget and stripe shares
    cxl_free = dict(cxl_free or {})
    shares: tuple[tuple[int, float], ...] = ()
    if cxl_free:
        bws = dict(cxl_bandwidth or {})
        if all(bws.get(n) for n in cxl_free):
            weights = {n: float(bws[n]) for n in cxl_free}
            how = "by bandwidth " + ", ".join(f"node {n} {bws[n]:g} MB/s" for n in sorted(cxl_free))
        else:
            weights = dict.fromkeys(cxl_free, 1.0)
            how = "equal shares (no bandwidth figures)"
        total_w = sum(weights.values())
        shares = tuple((n, weights[n] / total_w) for n in sorted(cxl_free))
        usable = {n: max(0, f - (256 << 20)) for n, f in cxl_free.items()}
        # the stripe fills every node in its share: the tightest node bounds the total
        stripe_cap = int(min(usable[n] / s for n, s in shares if s > 0)) if shares else 0
        if cxl_budget is not None:
            c_budget, c_source = min(cxl_budget, stripe_cap), "given"
            if cxl_budget > stripe_cap:
                warnings.append(f"cxl_budget {_gib(cxl_budget)} exceeds what the stripe can hold "
                                f"({_gib(stripe_cap)}): capped")
        else:
            c_budget = stripe_cap
            c_source = (f"free memory of CXL node(s) {_nodes(cxl_free)} minus 256 MiB each, striped {how}")
    else:
        c_budget, c_source = 0, "no CXL node"
        if cxl_budget:
            raise Unsupported(f"cxl_budget {_gib(cxl_budget)} given but this node has no CXL memory node")
    reasons.append(f"DRAM budget {_gib(d_budget)}: {d_source}")
    reasons.append(f"CXL budget {_gib(c_budget)}: {c_source}")

    parts: list[Part] = []
    unplaced: list[tuple[str, int]] = []
    d_left, c_left = d_budget, c_budget
    offset = 0
    cxl_nodes = tuple(n for n, _ in shares)
    for it in its:
        need = it.nbytes
        if need <= 0:
            continue
        pad = -offset % ALIGN  # every item starts on a page of its own: where() then counts only its pages
        if pad:
            if d_left >= pad:
                d_left -= pad
            else:
                c_left -= min(c_left, pad - d_left)
                d_left = 0
            offset += pad
        in_dram = min(need, d_left)
        if in_dram:
            parts.append(Part(it.name, it.cls, "dram", in_dram, offset, (dram_node,) if dram_node is not None else ()))
            d_left -= in_dram
            offset += in_dram
            need -= in_dram
        in_cxl = min(need, c_left)
        if in_cxl:
            parts.append(Part(it.name, it.cls, "cxl", in_cxl, offset, cxl_nodes))
            c_left -= in_cxl
            offset += in_cxl
            need -= in_cxl
        if in_dram and in_cxl:
            reasons.append(f"{it.name} straddles the DRAM budget: {_gib(in_dram)} in DRAM, {_gib(in_cxl)} on CXL "
                           "(one contiguous buffer)")
        if need:
            unplaced.append((it.name, need))
    for p in parts:
        if p.tier == "cxl" and p.cls == 1:
            warnings.append(f"{p.item} ({CLASS_NAMES[1]} data, {_gib(p.nbytes)}) is on CXL: the CPU optimizer step "
                            "is latency-bound (up to ~4x slower there, arXiv 2507.03305); add DRAM or offload less")
    plan = MemoryPlan(tuple(its), dram_node, d_budget, d_source, shares, c_budget, c_source, tuple(parts),
                      tuple(unplaced), tuple(reasons), tuple(warnings))
    if strict and unplaced:
        raise not_fitting(plan)
    return plan


def not_fitting(plan: MemoryPlan) -> Unsupported:
    short = sum(n for _, n in plan.unplaced)
    what = ", ".join(f"{name} {_gib(n)}" for name, n in plan.unplaced)
    where = "local DRAM" + (" and CXL" if plan.cxl_shares else " (no CXL node)")
    return Unsupported(f"{_gib(short)} does not fit in {where}: {what} (budgets: DRAM {_gib(plan.dram_budget)}, "
                       f"CXL {_gib(plan.cxl_budget)})",
                       hint="lower the reserve, shorten the context or batch, offload less, or add memory")


def _item(i: Item | tuple) -> Item:
    if isinstance(i, Item):
        it = i
    else:
        try:
            name, nbytes, cls = i
            it = Item(str(name), int(nbytes), int(cls))
        except (TypeError, ValueError):
            raise InputError(f"plan item {i!r}: expected (name, nbytes, class)") from None
    if it.cls not in CLASS_NAMES:
        raise InputError(f"plan item {it.name!r}: class {it.cls} is not 1-4 ({CLASS_NAMES})")
    if it.nbytes < 0:
        raise InputError(f"plan item {it.name!r}: negative size")
    return it


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def _nodes(nodes: Mapping[int, Any]) -> str:
    return ",".join(str(n) for n in sorted(nodes))


def _live_figures(ctx: Any, gpu: Any) -> tuple[int, int | None, int | None, dict[int, int], dict[int, float], str]:
    """(dram node, its free bytes, its total, {cxl node: free}, {cxl node: MB/s}, why) from a LiveContext."""
    from numatune.plan.launch import hmat_bandwidth

    tgt = ctx.local(gpu)  # the placement layer resolves; planning only reads the figures
    node = tgt.nodes[0]
    topo = ctx.topology
    n = topo.node(node)
    free = (n.memory_free_kib or 0) * 1024 if n else None
    total = (n.memory_total_kib or 0) * 1024 if n else None
    cxl = {m.id: (m.memory_free_kib or 0) * 1024 for m in topo.nodes if m.kind == "cxl" and m.memory_total_kib}
    bws = {m: hmat_bandwidth(topo.node(m)) or 0 for m in cxl}
    return node, free, total, cxl, bws, f"local DRAM: node {node} ({tgt.reason})"
