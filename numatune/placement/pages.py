"""Which pages an object covers, and where they are (move_pages, query only).

`span_of(obj)` knows torch CPU tensors, numpy arrays, Arenas, objects with the buffer protocol and
an explicit (address, nbytes) pair. `where(obj)` asks the kernel for the node of every page without
faulting anything in: the answer is a dict {node: pages} with the pages that are not there (never
touched, swapped out) or could not be asked about counted apart.
"""

from __future__ import annotations

import errno
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from numatune.errors import InputError
from numatune.system import memsys

BATCH = 1 << 16  # pages per move_pages call (bounds the arrays: 64 Ki pages = 256 MiB of 4 KiB pages)


class Span(NamedTuple):
    addr: int
    nbytes: int
    label: str  # for messages: "torch.float32 tensor (1024, 1024)"

    def pages(self, ps: int) -> tuple[int, int]:
        """(first page address, end address rounded up to a page)."""
        start = self.addr - self.addr % ps
        end = self.addr + self.nbytes
        return start, end + (-end % ps)


class PageCounts(dict):
    """{node: pages} for the pages that are present, with what was not counted:
    `absent` (not present: never touched or swapped out), `unmapped`, `other` ({reason: pages})."""

    def __init__(self, nodes: dict[int, int], *, absent: int = 0, unmapped: int = 0,
                 other: dict[str, int] | None = None, page_size: int = 0) -> None:
        super().__init__(sorted(nodes.items()))
        self.absent = absent
        self.unmapped = unmapped
        self.other = other or {}
        self.page_size = page_size

    @property
    def present(self) -> int:
        return sum(self.values())

    def bytes_by_node(self) -> dict[int, int]:
        return {n: p * self.page_size for n, p in self.items()}

    def describe(self) -> str:
        parts = [f"node {n}: {p} pages" for n, p in self.items()] or ["no page present"]
        if self.absent:
            parts.append(f"{self.absent} not present")
        if self.unmapped:
            parts.append(f"{self.unmapped} not mapped")
        parts += [f"{p} {why}" for why, p in self.other.items()]
        return ", ".join(parts)


def span_of(obj: Any) -> Span:
    """(address, bytes) of a torch CPU tensor, numpy array, Arena, buffer, or (addr, nbytes)."""
    if isinstance(obj, Span):
        return obj
    if isinstance(obj, tuple) and len(obj) == 2 and all(isinstance(x, int) for x in obj):
        if obj[1] <= 0:
            raise InputError(f"span {obj}: nbytes must be positive")
        return Span(obj[0], obj[1], f"buffer of {obj[1]} bytes")
    span = getattr(obj, "span", None)  # Arena
    if isinstance(span, Span):
        return span
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        return _torch_span(obj)
    if mod == "numpy":
        return _numpy_span(obj)
    try:
        view = memoryview(obj)
    except TypeError:
        raise InputError(f"cannot place a {type(obj).__name__}: expected a torch CPU tensor, a numpy array, "
                         "an Arena, a buffer or (address, nbytes)") from None
    with view:
        if view.nbytes == 0:
            raise InputError(f"{type(obj).__name__} is empty: no pages to place")
        if not view.c_contiguous:
            raise InputError(f"{type(obj).__name__} buffer is not contiguous")
        import ctypes

        if view.readonly:
            raise InputError(f"read-only {type(obj).__name__} buffer: pass a writable buffer or (address, nbytes)")
        c = ctypes.c_char.from_buffer(view)
        addr = ctypes.addressof(c)
        del c
        return Span(addr, view.nbytes, f"{type(obj).__name__} of {view.nbytes} bytes")


def _extent(addr: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """(lowest byte, bytes) an array view reaches; strides in bytes, possibly negative."""
    if any(s == 0 for s in shape):
        return addr, 0
    low = addr + sum((n - 1) * st for n, st in zip(shape, strides, strict=True) if st < 0)
    high = addr + sum((n - 1) * st for n, st in zip(shape, strides, strict=True) if st > 0) + itemsize
    return low, high - low


def _torch_span(t: Any) -> Span:
    if not hasattr(t, "data_ptr"):
        t = getattr(t, "data", t)
    dev = getattr(t, "device", None)
    if dev is None or dev.type != "cpu":
        raise InputError(f"a tensor on {dev}: only CPU tensors live in host memory (placement is for CPU offload)")
    if str(t.layout) != "torch.strided":
        raise InputError(f"a {t.layout} tensor: only strided (dense) CPU tensors can be placed")
    size = t.element_size()
    addr, nbytes = _extent(t.data_ptr(), tuple(t.shape), tuple(s * size for s in t.stride()), size)
    if nbytes == 0:
        raise InputError("an empty tensor has no pages to place")
    return Span(addr, nbytes, f"{str(t.dtype).replace('torch.', '')} tensor {tuple(t.shape)}")


def _numpy_span(a: Any) -> Span:
    if not hasattr(a, "__array_interface__"):
        raise InputError(f"a numpy {type(a).__name__} is not an array")
    addr = a.__array_interface__["data"][0]
    addr, nbytes = _extent(addr, tuple(a.shape), tuple(a.strides), a.itemsize)
    if nbytes == 0:
        raise InputError("an empty array has no pages to place")
    return Span(addr, nbytes, f"numpy {a.dtype} array {tuple(a.shape)}")


# -- where ----------------------------------------------------------------------------------------------------
def iter_status(start: int, end: int, *, pid: int = 0, ps: int | None = None):  # noqa: ANN201 - generator
    """move_pages status (query only) of the pages in [start, end), one batch (a list) at a time; a
    page the kernel left unreported in a batch is asked again on its own."""
    ps = ps or memsys.page_size()
    for lo in range(start, end, BATCH * ps):
        pages = memsys.page_addresses(lo, min(end, lo + BATCH * ps) - lo, ps)
        status, _ = memsys.move_pages(pages, pid=pid)
        if memsys.STATUS_UNSET in status:
            for i, s in enumerate(status):
                if s == memsys.STATUS_UNSET:
                    status[i] = memsys.move_pages([pages[i]], pid=pid)[0][0]
        yield status


def page_status(start: int, end: int, *, pid: int = 0, ps: int | None = None) -> array:
    """Every page's status in one array('i') (4 bytes a page: 100 MB for 100 GiB of 4 KiB pages)."""
    out = array("i")
    for status in iter_status(start, end, pid=pid, ps=ps):
        out.extend(status)
    return out


def count(status: Iterable[int] | Counter, ps: int) -> PageCounts:
    """PageCounts from statuses (or a Counter of them)."""
    nodes: dict[int, int] = {}
    absent = unmapped = 0
    other: dict[str, int] = {}
    counted = status if isinstance(status, Counter) else Counter(status)
    for s, n in counted.items():
        if s >= 0:
            nodes[s] = n
        elif s == -errno.ENOENT:
            absent += n
        elif s == -errno.EFAULT:
            unmapped += n
        else:
            why = memsys.status_reason(s)
            other[why] = other.get(why, 0) + n
    return PageCounts(nodes, absent=absent, unmapped=unmapped, other=other, page_size=ps)


def where(obj: Any, *, pid: int = 0) -> PageCounts:
    """{node: pages} of the pages under `obj` (query only: nothing is faulted in or moved).

    Raises InputError when none of its pages is mapped any more (freed, unmapped).
    """
    span = span_of(obj)
    ps = memsys.page_size()
    start, end = span.pages(ps)
    total: Counter = Counter()
    for status in iter_status(start, end, pid=pid, ps=ps):
        total.update(status)
    counts = count(total, ps)
    if counts.unmapped and not counts.present and not counts.absent:
        raise InputError(f"the memory of the {span.label} at {span.addr:#x} is no longer mapped (freed or unmapped)")
    return counts
