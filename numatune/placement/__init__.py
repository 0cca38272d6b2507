"""Placement inside the process: put each tensor's pages on DRAM or CXL nodes, and prove where they are.

    from numatune.placement import Arena, place, where, Stripe
    dram = Arena(8 << 30, ("local", 0))         # the DRAM of GPU 0's node
    cxl = Arena(24 << 30, Stripe("cxl"))         # every CXL node, shares by bandwidth
    exp_avg = dram.zeros((n,), torch.float32)   # optimizer state in local DRAM
    w16 = cxl.empty((n,), torch.bfloat16)       # bf16 weights streamed to the GPU from CXL
    place(existing_tensor, "cxl")               # move pages; raises when some cannot move
    where(w16)                                  # {3: 1024, 4: 512}: pages per node (move_pages)
    with allocating(("local", 0)) as scope:     # a framework's own allocations (and its threads') placed
        engine, *_ = deepspeed.initialize(...)  # as they are made and pinned; then scope.verify(*buffers)

The latency-first plan (`latency_first`, `apply`) decides what goes where for CPU-offloaded
fine-tuning; `numatune plan-memory` prints it. Importable without click or rich; torch and numpy are
imported only when a tensor or array is made.
"""

from __future__ import annotations

__all__ = [
    "Allocation",
    "Arena",
    "ArenaReport",
    "Item",
    "MemoryPlan",
    "PlannedMemory",
    "PageCounts",
    "PinnedChunk",
    "PinnedRange",
    "PlaceReport",
    "Span",
    "Stripe",
    "Target",
    "allocating",
    "apply",
    "describe_chunks",
    "latency_first",
    "live_context",
    "place",
    "place_optimizer_state",
    "plan_for",
    "pin",
    "pinned_host_chunks",
    "pinned_host_memory",
    "resolve",
    "span_of",
    "training_items",
    "where",
]


# name -> the module that defines it. Nothing is imported with the package: `numatune.bind` (placement.binding)
# loads only what binding needs, and each name below loads its own module on first use.
_LAZY = {
    "Arena": "arena", "ArenaReport": "arena", "PlaceReport": "move", "place": "move", "PageCounts": "pages",
    "Span": "pages", "span_of": "pages", "where": "pages", "Stripe": "targets", "Target": "targets",
    "live_context": "targets", "resolve": "targets", "allocating": "scope", "Allocation": "scope",
    "pin": "pinning", "apply": "pytorch", "place_optimizer_state": "pytorch", "plan_for": "pytorch",
    "PlannedMemory": "pytorch", "pinned_host_memory": "hostpinned", "PinnedRange": "hostpinned",
    "pinned_host_chunks": "hostpinned", "PinnedChunk": "hostpinned", "describe_chunks": "hostpinned",
}


def __getattr__(name: str):  # noqa: ANN202 - lazy: each name loads its module on first use
    if name in ("latency_first", "training_items", "Item", "MemoryPlan"):
        from numatune.plan import memory

        return getattr(memory, name)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"numatune.placement.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'numatune.placement' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
