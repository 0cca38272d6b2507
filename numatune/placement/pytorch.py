"""PyTorch helpers: allocate a latency-first plan, move an optimizer's state, size a plan from a model.

torch is imported by the functions that make tensors, never at import time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from numatune.errors import InputError
from numatune.placement import targets as _targets
from numatune.placement.arena import Arena, ArenaReport, fmt_bytes
from numatune.placement.targets import LiveContext, Target
from numatune.plan.memory import MemoryPlan, latency_first, training_items
from numatune.system import memsys


class PlannedMemory(NamedTuple):
    """One arena laid out as the plan says (local DRAM first, then the CXL stripe) and its items."""

    plan: MemoryPlan
    arena: Arena
    regions: dict[str, tuple[int, int]]  # item -> (offset, bytes) in the arena

    def tensor(self, item: str, shape: Any = None, dtype: Any = None) -> Any:
        """The planned buffer of `item` as a tensor (default: 1-D of the item's size in dtype)."""
        if item not in self.regions:
            raise InputError(f"no item {item!r} in the plan (items: {', '.join(self.regions)})")
        off, nbytes = self.regions[item]
        if shape is None:
            import torch

            size = torch.empty((), dtype=dtype or torch.float32).element_size()
            shape = (nbytes // size,)
        t = self.arena.at(off, shape, dtype)
        if t.numel() * t.element_size() > nbytes:
            raise InputError(f"{item}: {t.numel() * t.element_size()} bytes asked, the plan gave it {nbytes}")
        return t

    def report(self) -> ArenaReport:
        return self.arena.verify()


def apply(plan: MemoryPlan, *, populate: bool = True, context: LiveContext | None = None) -> PlannedMemory:
    """Allocate the plan: one arena, each item at its planned offset on pages of its own, bound to the DRAM
    node, striped over the CXL nodes, or (the straddling item) interleaved over both in the plan's shares
    (a split one: DRAM pages then CXL pages). Populated and verified page by page (Arena)."""
    if not plan.fits:
        from numatune.plan.memory import not_fitting

        raise not_fitting(plan)
    ps = memsys.page_size()
    if not plan.parts:
        raise InputError("the plan places nothing")
    dram = plan.dram_bytes
    if dram and plan.dram_node is None:
        raise InputError("the plan has DRAM parts but no DRAM node")
    # each item starts on a page of its own (the plan pads), so it owns [its offset, the next item's)
    starts = sorted({p.offset for p in plan.parts if p.offset % ps == 0})
    total = max(p.offset + p.nbytes for p in plan.parts)
    size = total + (-total % ps)
    layout: list[tuple[int, int, tuple[int, ...]]] = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else size
        here = [p for p in plan.parts if start <= p.offset < end]
        layout += _item_layout(plan, here, start, end, ps)
    nodes = tuple(sorted({n for _, _, ns in layout for n in ns}))
    shown = f"DRAM node {plan.dram_node} {fmt_bytes(dram)}" + (
        f", CXL {', '.join(f'node {n} {s:.0%}' for n, s in plan.cxl_shares)} {fmt_bytes(plan.cxl_bytes)}"
        if plan.cxl_bytes else "")
    target = Target("latency-first plan", nodes, shown)
    arena = Arena(size, target, populate=populate, reserve=0, context=context, layout=layout)
    regions: dict[str, tuple[int, int]] = {}
    for p in plan.parts:
        off, n = regions.get(p.item, (p.offset, 0))
        regions[p.item] = (off, n + p.nbytes)
    return PlannedMemory(plan, arena, regions)


def _item_layout(plan: MemoryPlan, parts: list, start: int, end: int, ps: int
                 ) -> list[tuple[int, int, tuple[int, ...]]]:
    """The mbind runs of one item's pages [start, end): DRAM, the CXL stripe, DRAM then CXL (split), or
    interleaved: DRAM's charged share and the CXL nodes' equal parts of the rest, page-granular stripes."""
    dram = sum(p.nbytes for p in parts if p.tier == "dram")
    cxl = sum(p.nbytes for p in parts if p.tier == "cxl")
    length = end - start
    if any(p.interleaved for p in parts):
        cxl_nodes = [n for n, _ in plan.cxl_shares]
        shares = [(plan.dram_node, dram / (dram + cxl))] + [(n, cxl / (dram + cxl) / len(cxl_nodes)) for n in cxl_nodes]
        runs = _targets.stripe_layout(length, [(n, s) for n, s in shares if s > 0], _targets.stripe_chunk(length, ps))
        return [(start + o, ln, (n,)) for o, ln, n in runs]
    if not cxl:
        return [(start, length, (plan.dram_node,))]
    dram_end = dram + (-dram % ps) if dram else 0
    out = [(start, dram_end, (plan.dram_node,))] if dram_end else []
    if length > dram_end:
        runs = _targets.stripe_layout(length - dram_end, plan.cxl_shares, _targets.stripe_chunk(length - dram_end, ps))
        out += [(start + dram_end + o, ln, (n,)) for o, ln, n in runs]
    return out


def plan_for(model: Any, optimizer: str = "adam", *, seq_len: int | None = None, batch: int = 1,
             layers: int | None = None, hidden: int | None = None, **kw: Any) -> MemoryPlan:
    """latency_first for a PyTorch model: its trainable parameters counted, layers/hidden from
    `model.config` (Hugging Face names) unless given; other keywords go to latency_first (budgets, gpu)."""
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    cfg = getattr(model, "config", None)
    if layers is None and cfg is not None:
        layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", None)
    if hidden is None and cfg is not None:
        hidden = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", None)
    if seq_len is None:
        layers = hidden = None
    elif layers is None or hidden is None:
        raise InputError("seq_len given but the model has no config with num_hidden_layers/hidden_size: "
                         "pass layers= and hidden=")
    items = training_items(params, optimizer=optimizer, layers=layers, hidden=hidden, seq_len=seq_len, batch=batch)
    if "context" not in kw and not any(k in kw for k in ("dram_budget", "dram_free")):
        kw["context"] = _targets.live_context(devices=kw.get("gpu") is not None)
    return latency_first(items, **kw)


def _init_adam_state(optimizer: Any, p: Any, group: dict) -> None:
    """The state torch.optim.Adam/AdamW create on their first step, made now (so it can be placed first)."""
    import torch

    try:
        from torch.optim.optimizer import _get_scalar_dtype

        scalar = _get_scalar_dtype()
    except ImportError:  # pragma: no cover - older torch
        scalar = torch.float32
    state = optimizer.state[p]
    state["step"] = torch.tensor(0.0, dtype=scalar)
    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    if group.get("amsgrad"):
        state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def place_optimizer_state(optimizer: Any, target: Any = "local", *, init: bool = True,
                          context: LiveContext | None = None, **arena_kw: Any) -> tuple[Arena, int]:
    """Move every state tensor of a torch optimizer (exp_avg, exp_avg_sq, momentum_buffer ...) into one
    Arena on `target`; returns (arena, tensors moved). `init`: for Adam/AdamW without state yet, create
    it first (as their first step would), so the state never lives anywhere else."""
    import torch

    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InputError(f"{type(optimizer).__name__} is not a torch.optim.Optimizer")
    adam = isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW))
    tensors: list[tuple[Any, str, Any]] = []
    for group in optimizer.param_groups:
        if group.get("fused") or group.get("capturable"):
            raise InputError("fused/capturable optimizers keep their state on the GPU: nothing to place in host memory")
        for p in group["params"]:
            if p.device.type != "cpu":
                raise InputError(f"a parameter is on {p.device}: place_optimizer_state is for CPU-offloaded optimizers")
            state = optimizer.state[p]
            if not state and init and adam and p.requires_grad:
                _init_adam_state(optimizer, p, group)
            for key, value in state.items():
                if torch.is_tensor(value) and value.dim() > 0 and value.device.type == "cpu":
                    tensors.append((p, key, value))
    if not tensors:
        raise InputError("the optimizer has no state tensors yet: call after its first step, or use Adam/AdamW "
                         "with init=True")
    need = sum(t.numel() * t.element_size() + 64 for _, _, t in tensors)
    arena = Arena(need, target, context=context, **arena_kw)
    for p, key, value in tensors:
        optimizer.state[p][key] = arena.copy_of(value)
    return arena, len(tensors)
