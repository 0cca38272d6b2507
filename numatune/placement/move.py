"""place(obj, target): move the pages of an existing tensor, array or buffer, then prove where they are.

mbind(MPOL_BIND, MPOL_MF_MOVE) on the object's whole pages sets the range's policy (pages touched
later land there too) and migrates what is elsewhere. The kernel's rules, reported rather than
suffered in silence:
- MPOL_MF_MOVE leaves a page that is already on any node of the mask where it is: a bind over
  several nodes does not rebalance. Stripes bind each chunk to one node, so they always move.
- Pages mapped by other processes too (after fork: DataLoader workers) are skipped unless
  MPOL_MF_MOVE_ALL, which needs CAP_SYS_NICE.
- Pinned pages (cudaHostRegister, RDMA registrations, io_uring fixed buffers) cannot migrate.
- A node outside the cgroup's cpuset.mems makes mbind fail with EINVAL.
- Pages at the object's edges are shared with whatever sits next to it (small heap tensors): moving
  them moves the neighbours' bytes too, so that is refused unless allow_shared_pages=True.
Every page left behind is asked about once more with move_pages (which says why: -EACCES shared,
-EBUSY busy, or no status at all when the kernel could not migrate a batch), then the whole range is
read back with a query-only move_pages: the report is what the kernel says, not what was asked.
"""

from __future__ import annotations

import errno
from typing import Any, NamedTuple

from numatune.errors import ApplyError, InputError, NumatuneError, PermissionDenied, Unsupported
from numatune.placement import targets as _targets
from numatune.placement.arena import Check, expected_check, fmt_bytes
from numatune.placement.pages import Span, count, page_status, span_of
from numatune.placement.targets import LiveContext, Target
from numatune.system import memsys

CAP_SYS_NICE = 23


class PlaceReport(NamedTuple):
    label: str
    target: Target
    pages: int
    page_size: int
    before: dict[int, int]  # node -> pages before
    moved: int  # pages whose node changed
    check: Check  # after, against the target
    unmovable: dict[str, int]  # reason -> pages left off target
    edge_pages: int  # pages shared with neighbouring memory that were included (allow_shared_pages)
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.check.ok and not self.unmovable

    def describe(self) -> str:
        head = (f"{self.label}: {self.pages} page(s) to {self.target.describe()}: {self.moved} moved; now "
                f"{self.check.found.describe()}")
        if self.check.misplaced:
            head += f" ({self.check.misplaced} off target)"
        if self.unmovable:
            head += "; left behind: " + ", ".join(f"{n} {why}" for why, n in self.unmovable.items())
        return head


def own_mapping(start: int, end: int, maps_text: str) -> bool:
    """True when [start, end) is exactly one mapping of its own (glibc serves large allocations from
    their own mmap: the edge pages then hold only the allocator's header, no other object)."""
    from numatune.readers.procs import parse_maps

    for lo, hi, _, _ in parse_maps(maps_text):
        if lo <= start < hi:
            return lo == start and hi == end
    return False


def glibc_mmapped_chunk(addr: int, ps: int) -> tuple[int, int] | None:
    """(start, end) of the glibc mmap()ed chunk that `addr` (a malloc result) heads, or None.

    glibc serves allocations above M_MMAP_THRESHOLD from a mapping of their own: the 16-byte header
    before the data holds the padding before the chunk (prev_size) and the chunk size with
    IS_MMAPPED (2). Only read when the header is on the object's first page (so it is mapped), and
    only believed when both ends fall on page boundaries around the object.
    """
    if addr % ps < 16:
        return None
    import ctypes

    size_field = ctypes.c_size_t.from_address(addr - 8).value
    if not size_field & 2 or size_field & 1:  # IS_MMAPPED, and not PREV_INUSE (never set on mmapped chunks)
        return None
    pad = ctypes.c_size_t.from_address(addr - 16).value
    start = addr - 16 - pad
    end = start + pad + (size_field & ~7)
    if start % ps or end % ps or not start <= addr - 16 < end:
        return None
    return start, end


def has_cap_sys_nice(status_text: str) -> bool:
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_NICE & 1)
    return False


def place(obj: Any, target: Any, *, allow_shared_pages: bool = False, move_shared: bool = False,
          strict: bool = True, bandwidths: dict[int, float] | None = None,
          context: LiveContext | None = None) -> PlaceReport:
    """Move `obj`'s pages to `target` and verify. strict (default): raise ApplyError, with the report as
    `.report`, when any present page is left off target; else return the report and let the caller look."""
    from numatune.system.host import Host

    span: Span = span_of(obj)
    ps = memsys.page_size()
    start, end = span.pages(ps)
    host = Host.open("/")
    notes: list[str] = []
    head, tail = span.addr % ps != 0, (span.addr + span.nbytes) % ps != 0
    edge = int(head) + int(tail and (end - start > ps or not head))
    chunk = glibc_mmapped_chunk(span.addr, ps) if head else None
    if edge and ((chunk is not None and chunk[0] <= start and end <= chunk[1])
                 or own_mapping(start, end, host.read_optional("/proc/self/maps") or "")):
        notes.append("the edge pages belong to the object's own mapping (only the allocator's header shares them)")
        edge = 0
    if edge and not allow_shared_pages:
        raise InputError(
            f"{span.label} at {span.addr:#x} ({fmt_bytes(span.nbytes)}) does not start and end on page boundaries: "
            f"{edge} edge page(s) hold other memory too (small heap objects), which would move with it",
            hint="pass allow_shared_pages=True to move whole pages anyway, or allocate it in an Arena",
        )
    ctx = context or _targets.live_context(devices=isinstance(target, tuple) and target[:1] == ("local",))
    tgt = _targets.resolve(target, ctx, bandwidths=bandwidths)
    _targets.check_allowed(tgt, ctx)
    layout = _targets.layout_for(tgt, end - start, ps)
    flags = memsys.MPOL_MF_MOVE
    if move_shared:
        if not has_cap_sys_nice(host.read_optional("/proc/self/status") or ""):
            raise PermissionDenied("move_shared=True moves pages other processes map too (MPOL_MF_MOVE_ALL): "
                                   "that needs CAP_SYS_NICE, which this process does not have",
                                   hint="run as root or with CAP_SYS_NICE, or leave move_shared off")
        flags = memsys.MPOL_MF_MOVE_ALL

    before_status = page_status(start, end, ps=ps)
    before = count(before_status, ps)
    if before.unmapped and not before.present and not before.absent:
        raise InputError(f"the memory of the {span.label} at {span.addr:#x} is no longer mapped (freed or unmapped)")
    for off, length, nodes in layout:
        try:
            memsys.mbind(start + off, length, memsys.MPOL_BIND, nodes, flags)
        except memsys.SyscallFailed as exc:
            done = "" if off == 0 else f" after {off // ps} of {(end - start) // ps} pages were bound"
            raise _explain(exc, span, tgt, ctx, done) from None

    after_status = page_status(start, end, ps=ps)
    check = expected_check(after_status, layout, ps)
    unmovable: dict[str, int] = {}
    if check.misplaced:
        unmovable = why_left(start, after_status, layout, ps, move_shared)
        after_status = page_status(start, end, ps=ps)  # the re-try may have moved some: ask again
        check = expected_check(after_status, layout, ps)
        if not check.misplaced:
            unmovable = {}
    moved = sum(1 for a, b in zip(before_status, after_status, strict=True) if a >= 0 and b >= 0 and a != b)
    if not tgt.striped and len(tgt.nodes) > 1:
        stayed = sum(p for n, p in before.items() if n in tgt.nodes)
        if stayed:
            notes.append(f"{stayed} page(s) already on node(s) of {_targets.nodes_in(tgt.nodes)} stayed where they "
                         "were: MPOL_MF_MOVE does not rebalance pages within the mask (use a Stripe to spread them)")
    if check.found.absent:
        notes.append(f"{check.found.absent} page(s) not present yet: the range policy places them when first touched")
    if edge:
        notes.append(f"{edge} edge page(s) shared with neighbouring memory moved too (allow_shared_pages=True)")
    report = PlaceReport(span.label, tgt, len(after_status), ps, dict(before), moved, check, unmovable, edge,
                         tuple(notes))
    if strict and not report.ok:
        err = ApplyError(f"{report.describe()}", hint=_hint(unmovable))
        err.report = report  # type: ignore[attr-defined]
        raise err
    return report


def why_left(start: int, status: list[int], layout: list, ps: int, move_shared: bool) -> dict[str, int]:
    """Ask move_pages to move each misplaced page to its node: its per-page status says why it stays."""
    pages, nodes = [], []
    for off, length, run_nodes in layout:
        want = run_nodes[0]
        allowed = set(run_nodes)
        for i in range(off // ps, -(-(off + length) // ps)):
            if status[i] >= 0 and status[i] not in allowed:
                pages.append(start + i * ps)
                nodes.append(want)
    flags = memsys.MPOL_MF_MOVE_ALL if move_shared else memsys.MPOL_MF_MOVE
    try:
        result, _ = memsys.move_pages(pages, nodes, flags=flags)
    except memsys.SyscallFailed as exc:
        return {f"not moved ({exc.message})": len(pages)}
    out: dict[str, int] = {}
    for s, want in zip(result, nodes, strict=True):
        if s == want:
            continue
        if s == memsys.STATUS_UNSET or s >= 0:
            why = "could not be migrated (pinned: cudaHostRegister/RDMA, or busy)"
        elif s == -errno.EACCES:
            why = "shared with other processes (forked workers): needs move_shared=True and CAP_SYS_NICE"
        else:
            why = memsys.status_reason(s)
        out[why] = out.get(why, 0) + 1
    return out


def _hint(unmovable: dict[str, int]) -> str | None:
    if any("pinned" in w for w in unmovable):
        return "unpin (cudaHostUnregister) before placing, then pin again; or place at allocation time with an Arena"
    if any("shared" in w for w in unmovable):
        return "place before forking workers, or pass move_shared=True with CAP_SYS_NICE"
    return None


def _explain(exc: memsys.SyscallFailed, span: Span, tgt: Target, ctx: LiveContext, done: str) -> NumatuneError:
    if exc.errno == errno.EINVAL:
        where = f"cgroup {ctx.cgroup}" if ctx.cgroup else "this task's cpuset"
        allowed = _targets.nodes_in(ctx.mems_allowed) if ctx.mems_allowed is not None else "unknown"
        return Unsupported(f"mbind to {tgt.describe()} refused (EINVAL){done}: the nodes must be online and in "
                           f"{where}'s cpuset.mems (allowed: {allowed})", hint=exc.hint)
    if exc.errno in (errno.EFAULT, errno.ENOMEM) and not done:
        return InputError(f"the memory of the {span.label} at {span.addr:#x} is not (or no longer) mapped: "
                          f"{exc.message}", hint=exc.hint)
    if exc.errno == errno.EPERM:
        return PermissionDenied(f"{exc.message}{done}", hint="MPOL_MF_MOVE_ALL needs CAP_SYS_NICE")
    exc.message += done
    return exc
