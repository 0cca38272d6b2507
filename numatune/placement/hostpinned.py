"""The pinned host memory of this process, from the CUDA runtime itself: `numatune.pinned_host_memory()`.

From outside, numatune can only infer pinned buffers (a CUDA process's shared anonymous mappings, which is
how cudaHostAlloc and torch's pin_memory() allocate them) and cannot see memory pinned in place with
cudaHostRegister at all. Inside the process the CUDA driver knows: this asks it (cuPointerGetAttribute,
through ctypes on the libcuda.so the process already loaded) about the start of every shared anonymous
mapping and every private anonymous one, follows each pinned range it reports, and reads the node of every
page of those ranges (move_pages). It never loads CUDA into a process that has not, and never creates a
context: a process without CUDA loaded gets Unsupported ("no CUDA runtime"), one that loaded but never
initialised it an empty list. Registered memory that starts inside a bigger mapping (the malloc heap) is
found when its address is passed: `pinned_host_memory(tensor.data_ptr())`.
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


def pinned_host_memory(*addresses: int, query: Query | None = None, maps_text: str | None = None,
                       ) -> list[PinnedRange]:
    """Every pinned host range of this process, by address: its size and the nodes its pages are on.

    The CUDA driver is asked about the start of each shared anonymous mapping (cudaHostAlloc, torch's
    pin_memory(), CUDA's own staging buffers), each private anonymous one (cudaHostRegister of a whole mapping:
    an Arena, an mmap) and each of `addresses` (registered memory inside the malloc heap), and each pinned
    range it reports is followed to the next. [] when CUDA is loaded but was never initialised here.

    Raises Unsupported ("no CUDA runtime in this process: ...") when CUDA is not loaded (torch's CPU build, a
    process that never used a GPU). `query` replaces the CUDA driver (tests, other runtimes); `maps_text`
    replaces /proc/self/maps."""
    from numatune.readers.procs import parse_maps
    from numatune.system import memsys

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
            while lo <= addr < hi:
                got = query(addr)
                if got is None:
                    break
                start, size = got
                end = start + size if size else hi
                if start not in found:
                    first = start - start % ps
                    pages = count(page_status(first, end + (-end % ps), ps=ps), ps)
                    kind = "host-allocated" if path == SHARED_ANON else "registered"
                    found[start] = PinnedRange(start, end - start, pages, kind, path)
                addr = max(end, addr + ps)
    except _NotInitialized:
        return []
    return [found[s] for s in sorted(found)]
