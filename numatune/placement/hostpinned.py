"""The pinned host memory of this process, from the CUDA runtime itself: `numatune.pinned_host_memory()` (the
allocations) and `numatune.pinned_host_chunks()` (the chunks audit counts from outside, each with the allocations
the driver reports in it).

From outside, numatune can only infer pinned memory: a CUDA process's shared anonymous mappings, which is how the
CUDA host allocator maps its chunks (cudaHostAlloc, torch's pin_memory()), and which a plain
mmap(MAP_SHARED|MAP_ANONYMOUS) resembles exactly ("likely pinned"); memory pinned in place with cudaHostRegister
it cannot see at all. Inside the process the CUDA driver knows: this asks it (cuPointerGetAttribute, through
ctypes on the libcuda.so the process already loaded) about the start of every shared anonymous mapping and every
private anonymous one, follows each pinned range it reports to the next one up to the first address it does not
know, and reads the node of every page of those ranges (move_pages). A chunk is not an allocation: the driver
sub-allocates small pinned allocations in one chunk (2 KiB ones side by side in a 2 MiB chunk on an H100 with
driver 580), and a shared anonymous mapping the driver reports nothing in is not pinned memory at all (on the
real job of fixtures/h100-gpucheck-2026-11-28, six mappings, 18 MiB of the 280 MiB audit counted). What this
does not find: a pinned range that starts inside a bigger mapping past a gap (registered memory in the malloc
heap: pass its address, `pinned_host_memory(tensor.data_ptr())`), and allocations of a chunk after the first
address the driver does not know. It never loads CUDA into a process that has not, and never creates a context:
a process without CUDA loaded gets Unsupported ("no CUDA runtime"), one that loaded but never initialised it an
empty list (and chunks without allocations).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NamedTuple

from numatune.errors import Unsupported
from numatune.placement.pages import PageCounts, count, page_status

# cuda.h: CUpointer_attribute, CUmemorytype, CUresult
_MEMORY_TYPE, _IS_MANAGED, _RANGE_START, _RANGE_SIZE = 2, 8, 11, 12
_HOST = 1
_NOT_INITIALIZED, _DEINITIALIZED = 3, 4
SHARED_ANON = "/dev/zero (deleted)"  # /proc/PID/maps' name for MAP_SHARED|MAP_ANONYMOUS memory

# query(address) -> (range start, range size) of the pinned host allocation holding it; None when it holds none.
Query = Callable[[int], "tuple[int, int] | None"]


class PinnedRange(NamedTuple):
    """One pinned host range: where it starts, its size, and its pages per node."""

    start: int
    size: int  # bytes, as the runtime reports the range
    pages: PageCounts  # node -> resident pages (move_pages), with `absent` pages never touched
    kind: str  # "host-allocated" (cudaHostAlloc, pin_memory: a shared anonymous mapping) | "registered"
    mapping: str  # the /proc/self/maps name of the mapping it is in ("/dev/zero (deleted)", "" anonymous)
    chunk: int | None = None  # the start of that mapping: for a host-allocated range, the chunk it is served from

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(n for n, p in self.pages.items() if p)


class _NotInitialized(Exception):
    """CUDA is loaded but was never initialised here: it has pinned nothing."""


def _loaded_libcuda(maps: list[tuple[int, int, str, str]]) -> str | None:
    return next((path for *_, path in maps if path.rpartition("/")[2].startswith("libcuda.so")), None)


def _no_cuda() -> str:
    torch = sys.modules.get("torch")
    version = getattr(torch, "version", None)
    if torch is not None and getattr(version, "cuda", "") is None:
        return f"torch {getattr(torch, '__version__', '?')} is built without CUDA (its CPU build)"
    return "libcuda.so is not loaded: CUDA was never used in this process"


def cuda_query(path: str) -> Query:
    """cuPointerGetAttribute of the libcuda at `path` (already loaded: RTLD_NOLOAD) as a Query."""
    import ctypes
    import os

    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        get = lib.cuPointerGetAttribute
    except (OSError, AttributeError) as exc:
        raise Unsupported(f"no CUDA runtime in this process: {path} cannot be used ({exc})") from None
    get.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_ulonglong]
    get.restype = ctypes.c_int

    def query(addr: int) -> tuple[int, int] | None:
        kind, managed = ctypes.c_uint(0), ctypes.c_int(0)
        err = get(ctypes.byref(kind), _MEMORY_TYPE, addr)
        if err in (_NOT_INITIALIZED, _DEINITIALIZED):
            raise _NotInitialized
        if err != 0 or kind.value != _HOST:
            return None  # pageable memory (CUDA_ERROR_INVALID_VALUE) or device memory
        if get(ctypes.byref(managed), _IS_MANAGED, addr) == 0 and managed.value:
            return None  # managed memory migrates: not pinned
        start, size = ctypes.c_ulonglong(0), ctypes.c_size_t(0)
        if get(ctypes.byref(start), _RANGE_START, addr) or get(ctypes.byref(size), _RANGE_SIZE, addr):
            return addr, 0  # the range is not reported: the caller closes it at the mapping's end
        return start.value, size.value

    return query


def _follow(query: Query, lo: int, hi: int, path: str, addr: int, ps: int, found: dict[int, PinnedRange]) -> None:
    """The pinned ranges the driver reports from `addr` on in the mapping [lo, hi), range after range up to the first
    address it does not know, into `found` (by start)."""
    while lo <= addr < hi:
        got = query(addr)
        if got is None:
            return
        start, size = got
        end = start + size if size else hi
        if start not in found:
            first = start - start % ps
            pages = count(page_status(first, end + (-end % ps), ps=ps), ps)
            kind = "host-allocated" if path == SHARED_ANON else "registered"
            found[start] = PinnedRange(start, end - start, pages, kind, path, lo)
        addr = max(end, addr + ps)


def _maps_and_query(query: Query | None, maps_text: str | None) -> tuple[list[tuple[int, int, str, str]], Query]:
    from numatune.readers.procs import parse_maps

    if maps_text is None:
        from numatune.system.host import Host

        maps_text = Host.open("/").read_optional("/proc/self/maps") or ""
    maps = parse_maps(maps_text)
    if query is None:
        path = _loaded_libcuda(maps)
        if path is None:
            raise Unsupported(f"no CUDA runtime in this process: {_no_cuda()}",
                              hint="call it in the process that pins memory, after CUDA is in use there")
        query = cuda_query(path)
    return maps, query


def pinned_host_memory(*addresses: int, query: Query | None = None, maps_text: str | None = None,
                       ) -> list[PinnedRange]:
    """The pinned host ranges (allocations) the CUDA driver reports in this process, by address: each one's size,
    the nodes its pages are on and the chunk (mapping) it is in.

    The driver is asked about the start of each shared anonymous mapping (cudaHostAlloc, torch's pin_memory(),
    CUDA's own staging buffers), each private anonymous one (cudaHostRegister of a whole mapping: an Arena, an mmap)
    and each of `addresses` (registered memory inside the malloc heap), and each pinned range it reports is followed
    to the next up to the first address it does not know: a range starting past such a gap is not listed unless its
    address is given. [] when CUDA is loaded but was never initialised here.

    Raises Unsupported ("no CUDA runtime in this process: ...") when CUDA is not loaded (torch's CPU build, a
    process that never used a GPU). `query` replaces the CUDA driver (tests, other runtimes); `maps_text`
    replaces /proc/self/maps."""
    from numatune.system import memsys

    maps, query = _maps_and_query(query, maps_text)
    ps = memsys.page_size()
    wanted = [(lo, hi, path, lo) for lo, hi, perms, path in maps
              if (path == SHARED_ANON and perms[3:4] == "s") or (path in ("", "[heap]") and perms[:2] == "rw")]
    for addr in addresses:
        hit = next(((lo, hi, path) for lo, hi, _, path in maps if lo <= addr < hi), None)
        if hit is not None:
            wanted.append((*hit, addr))
    found: dict[int, PinnedRange] = {}
    try:
        for lo, hi, path, addr in wanted:
            _follow(query, lo, hi, path, addr, ps, found)
    except _NotInitialized:
        return []
    return [found[s] for s in sorted(found)]


class PinnedChunk(NamedTuple):
    """One shared anonymous mapping of this process: what `audit` counts from outside as a likely pinned chunk, with
    the pinned allocations the CUDA driver reports in it. None reported: the driver does not know it as pinned (a
    plain mmap(MAP_SHARED|MAP_ANONYMOUS), another library's shared memory)."""

    start: int
    size: int  # bytes of the mapping
    pages: PageCounts  # node -> resident pages of the whole mapping (move_pages)
    allocations: tuple[PinnedRange, ...]  # the ranges the driver reports in it, by address

    @property
    def pinned(self) -> bool:
        return bool(self.allocations)

    @property
    def allocated(self) -> int:
        return sum(r.size for r in self.allocations)


def pinned_host_chunks(*, query: Query | None = None, maps_text: str | None = None) -> list[PinnedChunk]:
    """Every shared anonymous mapping of this process (the chunks `audit` calls likely pinned from outside), by
    address, each with its resident pages per node and the pinned allocations the CUDA driver reports in it,
    followed from its start as pinned_host_memory() follows them: the inside view of what audit counts, chunk for
    chunk, so that the two reconcile (`describe_chunks`). Chunks without allocations when CUDA is loaded but was never
    initialised here; Unsupported without CUDA, as pinned_host_memory()."""
    from numatune.system import memsys

    maps, query = _maps_and_query(query, maps_text)
    ps = memsys.page_size()
    out = []
    initialised = True
    for lo, hi, perms, path in maps:
        if path != SHARED_ANON or perms[3:4] != "s":
            continue
        found: dict[int, PinnedRange] = {}
        if initialised:
            try:
                _follow(query, lo, hi, path, lo, ps, found)
            except _NotInitialized:
                initialised = False
        pages = count(page_status(lo, hi + (-hi % ps), ps=ps), ps)
        out.append(PinnedChunk(lo, hi - lo, pages, tuple(found[s] for s in sorted(found))))
    return out


def _mib(b: int) -> str:
    return f"{b / 1048576:.1f} MiB"


def describe_chunks(chunks: list[PinnedChunk]) -> str:
    """One sentence reconciling the outside view with the inside one: the chunks audit counts, those the driver
    pinned and the allocations they serve, and those it does not know (the difference)."""
    pinned = [c for c in chunks if c.pinned]
    other = [c for c in chunks if not c.pinned]
    allocations = sum(len(c.allocations) for c in pinned)
    text = (f"{len(chunks)} shared anonymous chunk(s), {_mib(sum(c.size for c in chunks))} (what audit counts from "
            f"outside as likely pinned): {len(pinned)} pinned by the CUDA driver, {_mib(sum(c.size for c in pinned))}, "
            f"serving {allocations} allocation(s) of {_mib(sum(c.allocated for c in pinned))}")
    if other:
        text += (f"; {len(other)} the driver reports nothing in, {_mib(sum(c.size for c in other))}: shared "
                 "anonymous memory that is not pinned (" + ", ".join(f"{c.start:x}" for c in other[:8])
                 + (f" and {len(other) - 8} more" if len(other) > 8 else "") + ")")
    return text
