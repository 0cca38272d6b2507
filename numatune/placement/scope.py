"""Allocation-time placement: a scope in which the calling thread, and the threads it starts, allocate on
a target. For frameworks that allocate and pin their own CPU buffers.

DeepSpeed ZeRO-3 with CPU offload makes its flat fp32 partitions, its optimizer state and its pinned
bf16 buffers inside `deepspeed.initialize`, and pins them there (cudaHostAlloc / pin_memory): a pinned
page cannot be migrated, so `place()` afterwards fails. The paper's authors (Liaw & Chen) set the
memory policy at allocation time instead, by forking DeepSpeed. `allocating(target)` does that without a
fork, around the framework's own allocation:

    with allocating(("local", 0)) as scope:          # GPU 0's DRAM
        engine, optimizer, _, _ = deepspeed.initialize(model=model, config=ds_config)
    scope.verify(*optimizer.fp32_partitioned_groups_flat)   # every page, move_pages; raises if some are off

How: set_mempolicy(2) on the calling thread (MPOL_BIND to the target's nodes; a stripe becomes
MPOL_INTERLEAVE over its nodes, equal page shares). The kernel copies a thread's policy into every thread
it creates, so threads started inside the scope (a framework's pinning or swap threads, a thread pool
first used there) allocate on the target too, for their whole life. Threads that existed before the scope
keep their own policy, and memory faulted before it (glibc hands freed heap memory out again) keeps its
node: that is why `verify` reads every page afterwards. On exit the calling thread's previous policy is
restored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from numatune.errors import BindingError, InputError, Unsupported
from numatune.placement import targets as _targets
from numatune.placement.arena import _needs_devices
from numatune.placement.pages import PageCounts, span_of, where
from numatune.system import memsys


class Verified(NamedTuple):
    label: str
    pages: PageCounts
    off_target: dict[int, int]  # node -> pages not on the target's nodes

    @property
    def ok(self) -> bool:
        return not self.off_target


def judge(label: str, pages: PageCounts, nodes: Sequence[int]) -> Verified:
    """Which present pages lie outside `nodes` (absent pages are reported by PageCounts, not judged)."""
    return Verified(label, pages, {n: p for n, p in pages.items() if n not in nodes})


class Allocation:
    """The scope's target and what it set; `verify(*objs)` checks objects made inside it."""

    def __init__(self, target: _targets.Target, mode: int) -> None:
        self.target = target
        self.mode = mode
        self.threads_started: list[str] = []

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.target.nodes

    def describe(self) -> str:
        return f"{memsys.mode_name(self.mode)} over node(s) {','.join(map(str, self.nodes))} " \
               f"({self.target.describe()})"

    def verify(self, *objs: Any, strict: bool = True) -> list[Verified]:
        """Every page of each object (torch tensor, numpy array, buffer, (addr, nbytes)) read with move_pages;
        strict: BindingError naming the objects with pages off the target's nodes."""
        out = [judge(span_of(o).label, where(o), self.nodes) for o in objs]
        bad = [v for v in out if not v.ok]
        if strict and bad:
            shown = "; ".join(f"{v.label}: " + ", ".join(f"{p} page(s) on node {n}" for n, p in v.off_target.items())
                              for v in bad)
            raise BindingError(f"allocated off node(s) {','.join(map(str, self.nodes))}: {shown}",
                               hint="memory made before the scope (a reused heap chunk) or by a thread started "
                                    "before it keeps its node: start the framework's threads inside the scope, "
                                    "or place() what is not pinned")
        return out


def mode_for(target: _targets.Target) -> int:
    """MPOL_BIND for a node set; MPOL_INTERLEAVE for a stripe (a thread policy has no bandwidth shares)."""
    return memsys.MPOL_INTERLEAVE if target.striped and len(target.nodes) > 1 else memsys.MPOL_BIND


@contextmanager
def allocating(target: Any = "local", *, context: _targets.LiveContext | None = None) -> Iterator[Allocation]:
    """Within the block the calling thread, and every thread it starts, allocates on `target` (the specs
    of Arena and place: "local", ("local", gpu), "dram", "cxl", node lists, Stripe). See the module."""
    if not memsys.supported():
        raise Unsupported("this kernel or architecture has no NUMA memory-policy system calls: allocation-time "
                          "placement cannot work here")
    ctx = context or _targets.live_context(devices=_needs_devices(target))
    tgt = _targets.resolve(target, ctx)
    _targets.check_allowed(tgt, ctx)
    mode = mode_for(tgt)
    owner = threading.get_ident()
    before_mode, before_nodes = memsys.get_mempolicy()
    memsys.set_mempolicy(mode, tgt.nodes)
    try:
        yield Allocation(tgt, mode)
    finally:
        if threading.get_ident() != owner:  # a generator resumed on another thread: nothing sane to restore
            raise InputError("allocating() must be left on the thread that entered it")
        memsys.set_mempolicy(before_mode, before_nodes)
