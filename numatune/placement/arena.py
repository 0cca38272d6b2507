"""Arena: anonymous memory whose pages are on the asked nodes before anything is put in it.

The policy is set on the range with mbind, not on the thread: PyTorch's intra-op threads and
DataLoader workers fault pages in, and glibc hands freed heap memory back without new faults, so a
thread policy (set_mempolicy, numactl) decides nothing about a tensor. The range is then populated
(first touch, MADV_POPULATE_WRITE where the kernel has it) and every page's node is read back with
move_pages. Many tensors share one arena (a bump allocator, 64-byte aligned): each mbind on a
sub-range splits a mapping, and a process has vm.max_map_count (65,530) of them.
"""

from __future__ import annotations

import errno
import mmap
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from numatune.errors import ApplyError, InputError, NumatuneError, Unsupported
from numatune.placement import targets as _targets
from numatune.placement.pages import PageCounts, Span, count, page_status
from numatune.placement.targets import LiveContext, Target
from numatune.system import memsys

MADV_HUGEPAGE = 14
MADV_POPULATE_WRITE = 23  # Linux 5.14


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


class Check(NamedTuple):
    """Pages expected on each node against what move_pages says."""

    expected: dict[int, int]  # node -> pages, for the runs bound to a single node
    found: PageCounts
    misplaced: int  # present pages not where the layout puts them
    misplaced_on: dict[int, int]  # node -> misplaced pages found there
    anywhere: tuple[int, ...] = ()  # nodes of the runs bound to several nodes (any of them is right)

    @property
    def ok(self) -> bool:
        return self.misplaced == 0 and not self.found.unmapped and not self.found.other


class ArenaReport(NamedTuple):
    target: Target
    nbytes: int
    page_size: int
    runs: int  # mbind calls (mappings the arena became)
    populated: bool
    check: Check
    seconds: float

    def describe(self) -> str:
        c = self.check
        state = "verified" if c.ok else f"{c.misplaced} page(s) misplaced"
        return (f"arena {fmt_bytes(self.nbytes)} for {self.target.describe()} -> {c.found.describe()} ({state}; "
                f"{self.runs} mbind range(s), {self.seconds * 1000:.1f} ms)")


Layout = Sequence[tuple[int, int, tuple[int, ...]]]  # (offset, length, nodes any of which is right)


def expected_check(status: Sequence[int], layout: Layout, ps: int) -> Check:
    """Compare a status list (pages from the start of the range) with the layout."""
    found = count(status, ps)
    misplaced_on: dict[int, int] = {}
    expected: dict[int, int] = {}
    anywhere: set[int] = set()
    for off, length, nodes in layout:
        first, last = off // ps, -(-(off + length) // ps)
        if len(nodes) == 1:
            expected[nodes[0]] = expected.get(nodes[0], 0) + (last - first)
        else:
            anywhere.update(nodes)
        allowed = set(nodes)
        for s, n in Counter(status[first:last]).items():  # counted in C, run by run
            if s >= 0 and s not in allowed:
                misplaced_on[s] = misplaced_on.get(s, 0) + n
    return Check(expected, found, sum(misplaced_on.values()), misplaced_on, tuple(sorted(anywhere)))


class Arena:
    """`Arena(nbytes, target)`: placed, populated, verified memory that hands out tensors and arrays.

    target: see numatune.placement.targets ("local", ("local", gpu), "dram", "cxl", nodes, Stripe).
    populate: fault every page in now (default); False leaves the first touch to whoever writes,
    which the range policy still governs. reserve: bytes to leave free on the nodes (default 256 MiB
    per node, so the kernel and other jobs are not starved). bandwidths: {node: MB/s} for stripes
    (e.g. from `numatune probe`), else HMAT. layout: [(offset, length, nodes)] runs instead of the
    target's own (how `apply(plan)` makes one arena that is DRAM first, then striped CXL).
    """

    def __init__(self, nbytes: int, target: Any = "local", *, populate: bool = True, thp: bool = False,
                 reserve: int = 256 << 20, bandwidths: Mapping[int, float] | None = None,
                 context: LiveContext | None = None, layout: Layout | None = None) -> None:
        t0 = time.perf_counter()
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise InputError(f"Arena size {nbytes!r}: expected a positive number of bytes")
        self.page_size = ps = memsys.page_size()
        size = nbytes + (-nbytes % ps)
        ctx = context or _targets.live_context(devices=_needs_devices(target))
        self.target = tgt = _targets.resolve(target, ctx, bandwidths=bandwidths)
        _targets.check_allowed(tgt, ctx)
        self.layout = list(layout) if layout is not None else _targets.layout_for(tgt, size, ps)
        if self.layout[-1][0] + self.layout[-1][1] != size:
            raise InputError(f"arena layout covers {self.layout[-1][0] + self.layout[-1][1]} bytes, not {size}")
        check_free(tgt, self.layout, reserve)
        self._map: mmap.mmap | None = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.addr = _address(self._map)
        self.nbytes = size
        self._used = 0
        self._live = 0
        try:
            for off, length, nodes in self.layout:
                memsys.mbind(self.addr + off, length, memsys.MPOL_BIND, nodes)
            if thp:
                self._map.madvise(MADV_HUGEPAGE)
            if populate:
                _populate(self._map, self.addr, size)
            self.report = self._verify(time.perf_counter() - t0, populate)
            if populate and not self.report.check.ok:
                raise ApplyError(f"arena pages are not where asked: {self.report.describe()}",
                                 hint="memory may have been offlined or the cpuset changed; nothing was handed out")
        except BaseException:
            self._map.close()
            self._map = None
            raise

    # -- placement ------------------------------------------------------------------------------------
    @property
    def span(self) -> Span:
        return Span(self.addr, self.nbytes, f"arena on {self.target.spec}")

    def _verify(self, seconds: float, populated: bool) -> ArenaReport:
        status = page_status(self.addr, self.addr + self.nbytes, ps=self.page_size)
        return ArenaReport(self.target, self.nbytes, self.page_size, len(self.layout), populated,
                           expected_check(status, self.layout, self.page_size), seconds)

    def verify(self) -> ArenaReport:
        """Read every page's node again (query only) and compare with the layout."""
        self._open()
        return self._verify(0.0, self.report.populated)

    # -- handing out memory ------------------------------------------------------------------------------
    @property
    def used(self) -> int:
        return self._used

    @property
    def free(self) -> int:
        return self.nbytes - self._used

    def _take(self, nbytes: int, align: int) -> int:
        self._open()
        off = self._used + (-self._used % align)
        if off + nbytes > self.nbytes:
            raise NumatuneError(f"arena full: {fmt_bytes(nbytes)} asked, {fmt_bytes(self.nbytes - off)} left of "
                                f"{fmt_bytes(self.nbytes)}", hint="size the arena from the plan (latency_first)")
        self._used = off + nbytes
        return off

    def buffer(self, nbytes: int, *, align: int = 64) -> memoryview:
        off = self._take(nbytes, align)
        return memoryview(self._map)[off:off + nbytes]  # type: ignore[index]

    def empty(self, shape: Any, dtype: Any = None, *, align: int = 64) -> Any:
        """A torch tensor (dtype a torch.dtype) or numpy array (numpy dtype/str); dtype None: torch.float32 where
        torch is installed, else a numpy float32 array (neither installed: InputError; `buffer` needs none)."""
        shape, numel, itemsize, is_torch = _shape_dtype(shape, dtype)
        off = self._take(numel * itemsize, max(align, itemsize)) if numel else 0
        return self._make(off, shape, numel, dtype, is_torch)

    def at(self, offset: int, shape: Any, dtype: Any = None) -> Any:
        """A tensor/array over [offset, offset + its size) of the arena (no allocation: `apply(plan)` uses it
        to hand out each planned item where the plan put it)."""
        self._open()
        shape, numel, itemsize, is_torch = _shape_dtype(shape, dtype)
        if offset < 0 or offset % itemsize or offset + numel * itemsize > self.nbytes:
            raise InputError(f"{numel * itemsize} bytes at offset {offset} do not fit (aligned) in this arena "
                             f"of {self.nbytes}")
        return self._make(offset, shape, numel, dtype, is_torch)

    def _make(self, off: int, shape: tuple[int, ...], numel: int, dtype: Any, is_torch: bool) -> Any:
        if is_torch:
            import torch

            dtype = dtype or torch.float32
            if numel == 0:
                return torch.empty(shape, dtype=dtype)
            return torch.frombuffer(self._map, dtype=dtype, count=numel, offset=off).view(shape)
        import numpy as np

        dtype = "float32" if dtype is None else dtype  # no torch: its default dtype, as numpy
        if numel == 0:
            return np.empty(shape, dtype=dtype)
        return np.frombuffer(self._map, dtype=np.dtype(dtype), count=numel, offset=off).reshape(shape)

    def zeros(self, shape: Any, dtype: Any = None, *, align: int = 64) -> Any:
        out = self.empty(shape, dtype, align=align)
        if hasattr(out, "zero_"):
            out.zero_()
        else:
            out.fill(0)
        return out

    def copy_of(self, x: Any) -> Any:
        """A copy of a tensor or array in this arena (same shape and dtype, contiguous)."""
        out = self.empty(tuple(x.shape), x.dtype)
        if hasattr(out, "copy_"):
            out.copy_(x)
        else:
            out[...] = x
        return out

    # -- lifetime -------------------------------------------------------------------------------------------
    def _open(self) -> None:
        if self._map is None:
            raise InputError("this arena is closed")

    def close(self) -> None:
        """Unmap; refused while tensors or arrays made from it are alive (they would point at nothing)."""
        if self._map is None:
            return
        try:
            self._map.close()
        except BufferError:
            raise InputError("arena still has live tensors or arrays: delete them before closing it") from None
        self._map = None

    @property
    def closed(self) -> bool:
        return self._map is None

    def __enter__(self) -> Arena:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._map is None else f"{fmt_bytes(self._used)} used"
        return f"<Arena {fmt_bytes(self.nbytes)} {self.target.describe()} {state}>"


def _shape_dtype(shape: Any, dtype: Any) -> tuple[tuple[int, ...], int, int, bool]:
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    numel = 1
    for d in shape:
        if d < 0:
            raise InputError(f"negative dimension in shape {shape}")
        numel *= d
    if dtype is None or type(dtype).__module__ == "torch":
        try:
            import torch
        except ImportError:
            if dtype is not None:
                raise
            torch = None
        if torch is not None:
            return shape, numel, torch.empty((), dtype=dtype or torch.float32).element_size(), True
        dtype = "float32"  # no torch: the same default dtype, as a numpy array
    try:
        import numpy as np
    except ImportError:
        raise InputError("Arena.empty/zeros/at need torch or numpy to make a tensor or array, and neither is "
                         "installed", hint="pip install numpy (or torch), or use Arena.buffer(nbytes) for a "
                         "memoryview") from None
    return shape, numel, np.dtype(dtype).itemsize, False


def _needs_devices(target: Any) -> bool:
    return isinstance(target, tuple) and len(target) == 2 and target[0] == "local"


def _address(m: mmap.mmap) -> int:
    import ctypes

    c = ctypes.c_char.from_buffer(m)
    addr = ctypes.addressof(c)
    del c  # releases the buffer export, so the map can be closed later
    return addr


def _populate(m: mmap.mmap, addr: int, size: int) -> None:
    """Fault every page in (the range policy decides where): MADV_POPULATE_WRITE, else a memset."""
    try:
        m.madvise(MADV_POPULATE_WRITE)
        return
    except OSError as exc:
        if exc.errno == errno.ENOMEM:
            raise Unsupported(f"the target nodes ran out of memory while populating {fmt_bytes(size)}",
                              hint="the free memory changed since it was checked: make a smaller arena") from None
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise NumatuneError(f"populating the arena failed: {exc.strerror}") from None
    import ctypes

    ctypes.memset(addr, 0, size)


def node_free_bytes(node: int) -> int | None:
    """MemFree of a node, read now (the topology read earlier may be stale)."""
    from numatune.readers.nodes import parse_node_meminfo
    from numatune.system.host import Host

    text = Host.open("/").read_optional(f"/sys/devices/system/node/node{node}/meminfo")
    if text is None:
        return None
    free = parse_node_meminfo(text).get("MemFree")
    return free * 1024 if free is not None else None


def check_free(target: Target, layout: Layout, reserve: int, free_of: Any = node_free_bytes) -> None:
    """Refuse before faulting: under MPOL_BIND a full node means the OOM killer, not a fallback."""
    need: dict[tuple[int, ...], int] = {}
    for _, length, nodes in layout:
        need[nodes] = need.get(nodes, 0) + length
    for nodes, nbytes in need.items():
        frees = [free_of(n) for n in nodes]
        if any(f is None for f in frees):
            continue
        have = sum(frees) - reserve * len(nodes)
        if nbytes > have:
            where = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {_targets.nodes_in(nodes)}"
            raise Unsupported(
                f"{fmt_bytes(nbytes)} does not fit on {where} ({target.spec}): {fmt_bytes(sum(frees))} free, "
                f"{fmt_bytes(reserve * len(nodes))} kept in reserve",
                hint="under a bind policy a full node ends in the OOM killer: make the arena smaller, lower "
                     "reserve=, or plan with latency_first to split across DRAM and CXL",
            )
