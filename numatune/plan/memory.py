"""The latency-first memory plan for CPU-offloaded fine-tuning: what goes to local DRAM, what to CXL.

Liaw & Chen (arXiv 2507.03305) measured the CPU Adam step at 1.08x its DRAM time with 1.8M elements
on CXL but 3.8x at 68M and 4.2x at 545M: the optimizer's data is latency-bound and belongs in local
DRAM, while the buffers that are only streamed (bf16 weights to the GPU, checkpointed activations,
bf16 gradients) tolerate CXL. So items are taken in priority-class order and local DRAM is filled
first, and what does not fit is striped across the CXL nodes of the caller's socket by bandwidth
seen from the caller's node (numatune.plan.cxl). Pure: budgets, nodes and bandwidths come in.

Classes, in the order of the authors' published allocator (CXL-Aware-LLM-Finetuning,
utils/cxl_aware_allocator.py): 1 CPU-optimizer data (momentum, variance, fp32 master gradients, fp32
master weights), 2 bf16 weights sent to the GPU, 3 activation checkpoints, 4 bf16 gradients.

The item that straddles the DRAM budget (straddle="interleave", the default, as that allocator does):
one buffer interleaved page by page over the DRAM node and the n CXL nodes, DRAM charged
min(DRAM left, size // (1 + n)) and the CXL nodes the rest in equal parts. The allocator sets the
interleave mask and relies on the DRAM node being limited (memmap=) to its budget, so the kernel's
round robin moves on to CXL once DRAM is full; numatune places the same shares explicitly. Because
DRAM is charged at most size // (1 + n), DRAM can be left over after that item, and a later, smaller
item can still go to DRAM (or straddle again): the allocator's rule, kept. straddle="split" is
numatune's earlier rule: the straddling item is one contiguous buffer, its first bytes in DRAM up to
the budget and the rest on CXL; DRAM is then full and every later item goes to CXL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from numatune.errors import InputError, Unsupported, UsageError

GIB = 1 << 30
ALIGN = 4096  # item starts (the plan's arena is page-granular)
CLASS_NAMES = {1: "optimizer", 2: "bf16 weights", 3: "activations", 4: "bf16 gradients"}
# bytes per trainable parameter of class-1 items, per optimizer (fp32 master copy and fp32 gradients
# are what CPU Adam reads; the GPU side keeps bf16), in the published allocator's order
OPTIMIZER_STATE = {
    "adam": (("momentum (exp_avg)", 4), ("variance (exp_avg_sq)", 4), ("fp32 gradients", 4),
             ("fp32 master weights", 4)),
    "adamw": (("momentum (exp_avg)", 4), ("variance (exp_avg_sq)", 4), ("fp32 gradients", 4),
              ("fp32 master weights", 4)),
    "sgd": (("momentum buffer", 4), ("fp32 gradients", 4), ("fp32 master weights", 4)),
}
STRADDLE = ("interleave", "split")


class Item(NamedTuple):
    name: str
    nbytes: int
    cls: int  # 1 optimizer, 2 bf16 weights, 3 activations, 4 bf16 gradients (placement priority)


class Part(NamedTuple):
    item: str
    cls: int
    tier: str  # "dram" | "cxl"
    nbytes: int
    offset: int  # in the plan's single arena (items in plan order, each on pages of its own)
    nodes: tuple[int, ...]  # the DRAM node, or the CXL stripe's nodes
    interleaved: bool = False  # the straddling item: its DRAM and CXL parts share one interleaved range


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
        """Bytes each CXL node receives: the stripe's shares of the CXL parts, equal parts of an interleaved one."""
        out = dict.fromkeys((n for n, _ in self.cxl_shares), 0.0)
        for p in self.parts:
            if p.tier != "cxl":
                continue
            for n, s in (((n, 1 / len(self.cxl_shares)) for n, _ in self.cxl_shares) if p.interleaved
                         else self.cxl_shares):
                out[n] += p.nbytes * s
        return {n: round(b) for n, b in out.items()}

    def parts_of(self, item: str) -> list[Part]:
        return [p for p in self.parts if p.item == item]

    def nodes_of(self, item: str) -> tuple[int, ...]:
        """The nodes an item's pages go to (its node mask): DRAM node first, then CXL nodes."""
        out: list[int] = []
        for p in sorted(self.parts_of(item), key=lambda p: p.tier != "dram"):
            out += [n for n in p.nodes if n not in out]
        return tuple(out)


# -- sizes --------------------------------------------------------------------------------------------------
def training_items(params: float, *, optimizer: str = "adam", layers: int | None = None, hidden: int | None = None,
                   seq_len: int | None = None, batch: int = 1, checkpoint_bytes: int = 2) -> list[Item]:
    """What CPU-offloaded fine-tuning keeps in host memory, from the model's shape.

    Per trainable parameter: the optimizer's fp32 state (16 B for Adam: momentum, variance, master
    weights, gradients), the bf16 weights streamed to the GPU (2 B) and the bf16 gradients streamed
    back (2 B). Activation checkpoints: one bf16 [batch, seq_len, hidden] tensor per layer (the layer
    input that checkpointing keeps and offloads); left out when the shape is not given.
    """
    if not 0 < params < 1e30:  # "inf" and "nan" are floats too; no model has 1e30 parameters
        raise UsageError(f"--params {params:g}: expected a positive parameter count (7e9)")
    opt = optimizer.lower()
    if opt not in OPTIMIZER_STATE:
        raise UsageError(f"optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZER_STATE)}")
    n = int(params)
    items = [Item(name, n * size, 1) for name, size in OPTIMIZER_STATE[opt]]
    items.append(Item("bf16 weights", n * 2, 2))
    shape = (layers, hidden, seq_len)
    if any(v is not None for v in shape):
        if any(v is None or v <= 0 for v in shape) or batch <= 0:
            raise UsageError("activation checkpoints need --layers, --hidden, --seq-len (and --batch) all positive")
        items.append(Item("activation checkpoints", layers * batch * seq_len * hidden * checkpoint_bytes, 3))
    items.append(Item("bf16 gradients", n * 2, 4))
    return items


# -- the plan -----------------------------------------------------------------------------------------------
def latency_first(items: Sequence[Item | tuple], dram_budget: int | None = None, cxl_budget: int | None = None, *,
                  dram_node: int | None = None, dram_free: int | None = None, dram_reserve: int | None = None,
                  dram_total: int | None = None, cxl_free: Mapping[int, int] | None = None,
                  cxl_bandwidth: Mapping[int, float] | None = None, strict: bool = True,
                  context: Any = None, gpu: Any = None, bandwidths: Mapping[int, float] | None = None,
                  cxl_nodes: Sequence[int] | None = None, straddle: str = "interleave") -> MemoryPlan:
    """Fill local DRAM in class order, interleave (or split) the straddling item, stripe the rest over CXL.

    Either give the figures (dram_free, cxl_free {node: bytes}, cxl_bandwidth {node: MB/s}) or let
    them be read from the live node (`context`, a placement LiveContext; `gpu` picks the GPU whose
    node's DRAM is "local"; the CXL nodes are those of that node's socket unless `cxl_nodes` names
    others, and a far-socket one is warned about; `bandwidths` {node: MB/s} measured from that node,
    e.g. by `numatune probe`, replace HMAT's figures for the CXL shares). Budgets default to what is
    free minus the reserve (DRAM: max(2 GiB, 5% of the node), CXL: 256 MiB per node); a budget above
    what is free is warned about. straddle: "interleave" (the published allocator) or "split" (see the
    module). strict: raise when something fits nowhere.
    """
    if straddle not in STRADDLE:
        raise UsageError(f"straddle {straddle!r}: expected one of {', '.join(STRADDLE)}")
    its = sorted((_item(i) for i in items), key=lambda i: i.cls)  # stable: the caller's order within a class
    reasons: list[str] = []
    warnings: list[str] = []
    if dram_free is None and cxl_free is None and context is not None:
        dram_node, dram_free, dram_total, cxl_free, cxl_bandwidth, why, far, share_source = _live_figures(
            context, gpu, cxl_nodes, bandwidths)
        reasons.append(why)
        warnings += far
    else:
        share_source = None
    chosen_how, share_how = share_source or ("", None)
    # DRAM budget
    if dram_budget is not None:
        if dram_budget < 0:
            raise UsageError(f"dram_budget {dram_budget} is negative")
        d_budget, d_source = dram_budget, "given"
        if dram_free is not None and dram_budget > dram_free:
            warnings.append(f"the DRAM budget {_gib(dram_budget)} is above node {dram_node}'s free memory "
                            f"({_gib(dram_free)}): under a bind policy the rest ends in the OOM killer or in swap")
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
            how = share_how or "by bandwidth " + ", ".join(f"node {n} {bws[n]:g} MB/s" for n in sorted(cxl_free))
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
                c_source = "given, capped to what the CXL nodes have free"
            if cxl_budget > stripe_cap:
                warnings.append(f"cxl_budget {_gib(cxl_budget)} exceeds what the stripe can hold "
                                f"({_gib(stripe_cap)}): capped")
        else:
            c_budget = stripe_cap
            c_source = (f"free memory of CXL node(s) {_nodes(cxl_free)} minus 256 MiB each, striped {how}")
        if chosen_how:
            c_source = f"{chosen_how}; {c_source}"
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
    cxl_nodes_ = tuple(n for n, _ in shares)
    dram_nodes = (dram_node,) if dram_node is not None else ()
    for it in its:
        need = it.nbytes
        if need <= 0:
            continue
        pad = -offset % ALIGN  # every item starts on a page of its own: where() then counts only its pages
        if pad:  # the padding is memory too: charged to DRAM while there is some, then to CXL
            if d_left >= pad:
                d_left -= pad
            else:
                c_left -= min(c_left, pad - d_left)
                d_left = 0
            offset += pad
        if need <= d_left:  # all of it in DRAM
            parts.append(Part(it.name, it.cls, "dram", need, offset, dram_nodes))
            d_left -= need
        elif d_left > 0 and straddle == "interleave" and cxl_nodes_:
            # one buffer interleaved over DRAM and every CXL node; DRAM charged at most an equal part
            in_dram = min(d_left, need // (1 + len(cxl_nodes_)))
            in_cxl = min(need - in_dram, c_left)
            parts.append(Part(it.name, it.cls, "dram", in_dram, offset, dram_nodes, True))
            if in_cxl:
                parts.append(Part(it.name, it.cls, "cxl", in_cxl, offset, cxl_nodes_, True))
            d_left -= in_dram
            c_left -= in_cxl
            if need - in_dram - in_cxl:
                unplaced.append((it.name, need - in_dram - in_cxl))
            reasons.append(f"{it.name} straddles the DRAM budget: interleaved over DRAM node {dram_node} and CXL "
                           f"node(s) {_nodes(dict.fromkeys(cxl_nodes_))}, {_gib(in_dram)} in DRAM (at most "
                           f"1/{1 + len(cxl_nodes_)} of it), {_gib(in_cxl)} on CXL")
        else:  # split: DRAM up to the budget, then CXL (one contiguous buffer); or no DRAM left
            in_dram = min(need, d_left)
            in_cxl = min(need - in_dram, c_left)
            if in_dram:
                parts.append(Part(it.name, it.cls, "dram", in_dram, offset, dram_nodes))
            if in_cxl:
                parts.append(Part(it.name, it.cls, "cxl", in_cxl, offset + in_dram, cxl_nodes_))
            d_left -= in_dram
            c_left -= in_cxl
            if in_dram and in_cxl:
                reasons.append(f"{it.name} straddles the DRAM budget: {_gib(in_dram)} in DRAM, {_gib(in_cxl)} on "
                               "CXL (one contiguous buffer)")
            if need - in_dram - in_cxl:
                unplaced.append((it.name, need - in_dram - in_cxl))
        offset += need
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


def _live_figures(ctx: Any, gpu: Any, chosen: Sequence[int] | None, measured: Mapping[int, float] | None
                  ) -> tuple[int, int | None, int | None, dict[int, int], dict[int, float], str, list[str],
                             tuple[str, str]]:
    """(dram node, its free bytes, its total, {cxl node: free}, {cxl node: weight}, why, warnings) from a
    LiveContext: the CXL nodes of the DRAM node's socket (or `chosen`), weighted from that node's row."""
    from numatune.plan import cxl as _cxl

    tgt = ctx.local(gpu)  # the placement layer resolves; planning only reads the figures
    node = tgt.nodes[0]
    topo = ctx.topology
    n = topo.node(node)
    free = (n.memory_free_kib or 0) * 1024 if n else None
    total = (n.memory_total_kib or 0) * 1024 if n else None
    warnings: list[str] = []
    if chosen is not None:
        every = set(_cxl.all_cxl(topo))
        wrong = [c for c in chosen if c not in every]
        if wrong:
            raise UsageError(f"CXL node(s) {_nodes(dict.fromkeys(wrong))} are not CXL memory nodes of this root "
                             f"(CXL nodes: {_nodes(dict.fromkeys(every)) or 'none'})")
        nodes, how = tuple(sorted(set(chosen))), "given"
        far = _cxl.far_of(topo, node, nodes)
    else:
        pick = _cxl.default_cxl(topo, node)
        nodes, how, far = pick.nodes, pick.reason, pick.far
    if far:
        warnings.append(f"far-socket CXL node(s) {_nodes(dict.fromkeys(far))} used for node {node}: every access "
                        "crosses the inter-socket link (slower than the same socket's CXL)")
    cxl = {m: (topo.node(m).memory_free_kib or 0) * 1024 for m in nodes}
    weights, source = _cxl.caller_weights(topo, node, nodes, measured)
    why = f"local DRAM: node {node} ({tgt.reason}); CXL: {how}"
    return node, free, total, cxl, weights, why, warnings, (how, f"by {source}")
