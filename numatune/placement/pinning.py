"""Pinning placed memory for fast GPU copies (cudaHostRegister), and proving it stayed placed.

Register *after* placement, never before: a pinned page cannot be migrated. And long-term pinning
(FOLL_LONGTERM: cudaHostRegister, RDMA registration) first migrates every page it pins out of
ZONE_MOVABLE, because movable memory must stay unpluggable. CXL memory onlined by daxctl is
ZONE_MOVABLE by default, so a pinned CXL buffer silently moves to DRAM: pin() reads the zones of the
nodes involved (/proc/zoneinfo), registers, reads every page's node again, and reports what moved.

Memory registered here cannot be seen as pinned from outside the process: it stays an ordinary private
mapping (no VmFlags, Locked, VmPin or VmLck change). The CUDA host allocator's chunks (cudaHostAlloc,
pin_memory()) are shared anonymous mappings (`/dev/zero (deleted)`), which `audit` calls likely pinned in a CUDA
process; the /dev/nvidiactl mappings are the driver's own (driver 580). numatune.pinned_host_memory() asks the
CUDA driver from inside for the allocations (registered memory inside a bigger mapping: pass its address), and
numatune.pinned_host_chunks() for the chunks audit counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from numatune.errors import NumatuneError, Unsupported
from numatune.placement.pages import count, page_status, span_of

ADVICE = ("online the CXL memory as a normal zone (daxctl reconfigure-device --mode=system-ram --no-movable, or "
          "write online_kernel to its memory blocks' state), or do not pin this buffer (copy through a small "
          "pinned staging buffer instead)")


class PinReport(NamedTuple):
    label: str
    api: str  # what registered the memory ("torch.cuda.cudart().cudaHostRegister", ...)
    before: dict[int, int]
    after: dict[int, int]
    moved: dict[tuple[int, int], int]  # (from node, to node) -> pages
    movable: dict[int, float]  # node -> share of its memory in ZONE_MOVABLE (nodes the buffer was on)
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.moved


def movable_nodes(nodes: Sequence[int], zones: Mapping[int, Mapping[str, int]]) -> dict[int, float]:
    """{node: movable share} for the nodes whose memory is (partly) ZONE_MOVABLE."""
    from numatune.readers.zones import movable_share

    out = {}
    for n in nodes:
        share = movable_share(dict(zones), n)  # type: ignore[arg-type]
        if share:
            out[n] = share
    return out


def pin_outcome(before: Sequence[int], after: Sequence[int]) -> dict[tuple[int, int], int]:
    """(from, to) -> pages whose node changed between two move_pages status lists of the same range."""
    moved: dict[tuple[int, int], int] = {}
    for a, b in zip(before, after, strict=True):
        if a >= 0 and b >= 0 and a != b:
            moved[(a, b)] = moved.get((a, b), 0) + 1
    return moved


def pin_warnings(label: str, moved: Mapping[tuple[int, int], int], movable: Mapping[int, float],
                 registered: bool) -> list[str]:
    out = []
    if moved:
        shown = ", ".join(f"{p} page(s) node {a} -> {b}" for (a, b), p in sorted(moved.items()))
        cause = (f"node(s) {','.join(str(n) for n in sorted(movable))} are ZONE_MOVABLE and long-term pinning "
                 "migrates pages out of it" if movable else "the kernel migrated them while pinning")
        out.append(f"{label}: pinning moved pages off their placement ({shown}): {cause}; {ADVICE}")
    elif movable and not registered:
        shown = ", ".join(f"node {n} {s:.0%}" for n, s in sorted(movable.items()))
        out.append(f"{label} is on ZONE_MOVABLE memory ({shown}): pinning it (cudaHostRegister) would migrate "
                   f"it to a normal zone, usually DRAM; {ADVICE}")
    return out


def cuda_register() -> tuple[str, Callable[[int, int], None]]:
    """(name, register(addr, nbytes)) through torch or cuda-python; Unsupported saying why not."""
    why = []
    try:
        import torch

        if torch.version.cuda is None:
            why.append(f"torch {torch.__version__} is built without CUDA")
        elif not torch.cuda.is_available():
            why.append("torch.cuda.is_available() is False (no NVIDIA GPU or driver)")
        else:
            rt = torch.cuda.cudart()

            def reg(addr: int, nbytes: int) -> None:
                err = rt.cudaHostRegister(addr, nbytes, 0)
                if int(err) != 0:
                    raise NumatuneError(f"cudaHostRegister({addr:#x}, {nbytes}) failed: CUDA error {int(err)}")

            return "torch.cuda.cudart().cudaHostRegister", reg
    except ImportError:
        why.append("torch is not installed")
    try:
        from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
    except ImportError:
        try:
            from cuda import cudart  # type: ignore[no-redef]  # older cuda-python
        except ImportError:
            cudart = None
            why.append("cuda-python is not installed")
    if cudart is not None:
        # torch's CUDA builds bring cuda-python along: on a machine without a GPU or driver it imports, and
        # only the runtime says that there is nothing to pin for
        err, count = cudart.cudaGetDeviceCount()
        if int(err) != 0 or not count:
            why.append(f"cuda-python finds no CUDA device ({getattr(err, 'name', err)})")
            cudart = None
    if cudart is not None:
        def reg2(addr: int, nbytes: int) -> None:
            (err,) = cudart.cudaHostRegister(addr, nbytes, 0)
            if int(err) != 0:
                raise NumatuneError(f"cudaHostRegister({addr:#x}, {nbytes}) failed: {err}")

        return "cuda-python cudaHostRegister", reg2
    raise Unsupported("cannot pin: CUDA is not available on this machine (" + "; ".join(why) + "); nothing was "
                      "pinned and the placement is unchanged",
                      hint="pinning needs an NVIDIA GPU with its driver and a CUDA build of torch (or cuda-python)")


def pin(obj: Any, *, register: Callable[[int, int], None] | None = None, zones: Mapping | None = None) -> PinReport:
    """Register `obj` (an Arena, tensor, array) with CUDA, then verify its pages did not move.

    `register` replaces the CUDA call (tests, other runtimes); `zones` replaces /proc/zoneinfo.
    """
    span = span_of(obj)
    from numatune.system import memsys

    ps = memsys.page_size()
    start, end = span.pages(ps)
    if register is None:
        api, register = cuda_register()
    else:
        api = getattr(register, "__name__", "register")
    if zones is None:
        from numatune.readers.zones import read_zones
        from numatune.system.host import Host

        zones = read_zones(Host.open("/"))
    before = page_status(start, end, ps=ps)
    nodes = sorted({s for s in before if s >= 0})
    movable = movable_nodes(nodes, zones)
    register(span.addr, span.nbytes)
    after = page_status(start, end, ps=ps)
    moved = pin_outcome(before, after)
    warnings = pin_warnings(span.label, moved, movable, registered=True)
    return PinReport(span.label, api, dict(count(before, ps)), dict(count(after, ps)), moved, movable,
                     tuple(warnings))
