"""allocating(target): the calling thread's policy and its new threads', restored on exit, verified per page;
the README's DeepSpeed ZeRO-3 recipe run against a stand-in that allocates and pins like ZeRO-3 offload does."""

from __future__ import annotations

import ctypes
import threading

import pytest

from numatune.errors import BindingError
from numatune.placement import allocating, where
from numatune.placement.pages import PageCounts
from numatune.placement.scope import judge, mode_for
from numatune.placement.targets import Target
from numatune.system import memsys

MIB = 1 << 20


def _policy_in_new_thread() -> tuple[int, frozenset[int]]:
    got: list[tuple[int, frozenset[int]]] = []
    t = threading.Thread(target=lambda: got.append(memsys.get_mempolicy()))
    t.start()
    t.join()
    return got[0]


def test_the_scope_binds_this_thread_and_the_threads_it_starts_then_restores():
    before = memsys.get_mempolicy()
    seen: list[tuple[int, frozenset[int]]] = []
    ready, go = threading.Event(), threading.Event()

    def older() -> None:  # started before the scope: keeps its own policy
        ready.set()
        go.wait()
        seen.append(memsys.get_mempolicy())

    t = threading.Thread(target=older)
    t.start()
    ready.wait()
    with allocating(0) as scope:
        assert memsys.get_mempolicy() == (memsys.MPOL_BIND, frozenset({0}))
        assert _policy_in_new_thread() == (memsys.MPOL_BIND, frozenset({0}))
        go.set()
        t.join()
        assert scope.describe().startswith("bind over node(s) 0")
    assert seen == [before]
    assert memsys.get_mempolicy() == before and _policy_in_new_thread() == before
    # restored on an exception too
    with pytest.raises(RuntimeError), allocating(0):
        raise RuntimeError("framework failed")
    assert memsys.get_mempolicy() == before


def test_verify_reads_every_page_and_names_what_is_off_target():
    with allocating(0) as scope:
        buf = bytearray(4 * MIB)
        buf[::4096] = b"x" * len(buf[::4096])
    (v,) = scope.verify(buf)
    assert v.ok and v.pages.get(0, 0) >= 4 * MIB // 4096  # every page touched, all on node 0
    # the judgement itself, on counts as move_pages gives them: pages on node 0 against a target of node 1
    bad = judge("fp32 partition", PageCounts({0: 10, 1: 90}, page_size=4096), (1,))
    assert not bad.ok and bad.off_target == {0: 10}
    assert mode_for(Target("stripe 2,3", (2, 3), "given", ((2, 0.5), (3, 0.5)))) == memsys.MPOL_INTERLEAVE
    assert mode_for(Target("nodes 2,3", (2, 3), "given")) == memsys.MPOL_BIND


def test_verify_strict_raises_with_the_objects_named(monkeypatch):
    from numatune.placement import scope as scope_mod

    with allocating(0) as scope:
        buf = bytearray(MIB)
        buf[::4096] = b"y" * len(buf[::4096])
    monkeypatch.setattr(scope_mod, "where", lambda obj: PageCounts({0: 200, 5: 56}, page_size=4096))
    with pytest.raises(BindingError, match=r"allocated off node\(s\) 0: bytearray of 1048576 bytes: 56 page\(s\) on "
                                           r"node 5"):
        scope.verify(buf)
    assert not scope.verify(buf, strict=False)[0].ok


class ZeroOffloadStandin:
    """What ZeRO-3 CPU offload does inside deepspeed.initialize, reduced: flat fp32 partitions of the
    parameters, the CPU optimizer's state (momentum, variance) and a flat bf16 buffer, made by a helper thread
    the engine starts, each one pinned: `pin_memory()` where CUDA is available (a new page-locked allocation and
    a copy), else the same copy into a fresh allocation locked with mlock where the limit allows."""

    def __init__(self, numel: int, torch) -> None:  # noqa: ANN001
        self.torch = torch
        self.helper_policy: tuple[int, frozenset[int]] | None = None
        self.fp32_partitioned_groups_flat: list = []
        self.state: dict[str, object] = {}
        self.locked = 0
        t = threading.Thread(target=self._init, args=(numel,), name="zero-init")
        t.start()
        t.join()

    def _pin(self, t):  # noqa: ANN001, ANN202
        torch = self.torch
        if torch.cuda.is_available():
            return t.pin_memory()
        out = torch.empty_like(t)
        out.copy_(t)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mlock(ctypes.c_void_p(out.data_ptr()), ctypes.c_size_t(out.numel() * out.element_size())) == 0:
            self.locked += 1
        return out

    def _init(self, numel: int) -> None:
        torch = self.torch
        self.helper_policy = memsys.get_mempolicy()
        self.fp32_partitioned_groups_flat = [self._pin(torch.zeros(numel, dtype=torch.float32))]
        self.state = {"exp_avg": self._pin(torch.zeros(numel, dtype=torch.float32)),
                      "exp_avg_sq": self._pin(torch.zeros(numel, dtype=torch.float32))}
        self.param_groups_fp16_flat_cpu_memory = [self._pin(torch.zeros(numel, dtype=torch.bfloat16))]


def test_the_deepspeed_recipe_places_what_the_framework_allocates_and_pins(torch):
    numel = 48 * MIB // 4  # 48 MiB fp32 buffers: above glibc's largest mmap threshold, fresh pages every time
    with allocating("local") as scope:
        engine = ZeroOffloadStandin(numel, torch)
    assert engine.helper_policy == (memsys.MPOL_BIND, frozenset(scope.nodes))  # the engine's own thread, inherited
    buffers = [*engine.fp32_partitioned_groups_flat, *engine.state.values(), *engine.param_groups_fp16_flat_cpu_memory]
    report = scope.verify(*buffers)
    assert all(v.ok for v in report)
    for v, b in zip(report, buffers, strict=True):
        assert v.pages.present >= b.numel() * b.element_size() // 4096  # every page present and judged
    assert where(buffers[0]).absent == 0
