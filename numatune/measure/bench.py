"""The live engine of `numatune probe`: buffers placed on a node, verified, then timed from pinned threads.

Placement: each buffer is an anonymous mapping, mbind(MPOL_BIND, MPOL_MF_STRICT) to the target node,
then first-touched by the thread that will use it (pinned to a CPU of the initiator node), then
checked page by page with move_pages before any timing. A buffer whose pages are not all on the
target is reported as failed, never timed.

Latency: the compiled chase helper (helper.py) follows a random cycle, one dependent load per cache
line; each sample continues from the pointer the last one ended on, so together they walk the whole
cycle and no sample re-reads what an earlier one left in the caches; the first sample is dropped,
the median and minimum of the rest are kept.
Bandwidth: one thread per core of the initiator; `copy` is ctypes.memmove (glibc memcpy; ctypes drops
the GIL during the call), counted as bytes read + bytes written (write-allocate traffic not counted);
`read` is the helper's 8-byte load loop, counted as bytes read.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from numatune.system import memsys

LINE = 64
GROUP = 2 << 20  # chase locality group: one transparent huge page


class Placement(NamedTuple):
    ok: bool
    pages: int
    on_target: int
    elsewhere: dict[int, int]  # node or -errno -> pages
    huge_share: float | None  # share of the mapping in transparent huge pages (None: unknown)


class OutOfTime(Exception):
    """A buffer's set-up would run past the time budget: `done` bytes written in `seconds` (by the set-up before
    it stopped, or by the node's trial write when it was never begun), so the caller can say why and how fast."""

    def __init__(self, done: int, total: int, seconds: float, why: str | None = None) -> None:
        super().__init__(why or f"{done >> 20} of {total >> 20} MiB set up in {seconds:.1f} s")
        self.done, self.total, self.seconds = done, total, seconds

    @classmethod
    def foreseen(cls, total: int, rate: float) -> OutOfTime:
        """Not started: the node's trial write (first_touch_rate, bytes/s) says the set-up cannot fit."""
        return cls(TRIAL_BYTES, total, TRIAL_BYTES / max(rate, 1e-9),
                   f"{total >> 20} MiB not set up: first touch at {rate / 1e6:.3g} MB/s would not fit")

    @property
    def rate_mbps(self) -> float:
        """First-touch write rate seen (MB/s, 1 MB = 1e6 bytes)."""
        return self.done / max(self.seconds, 1e-9) / 1e6


TOUCH_CHUNK = 16 << 20  # the deadline is checked between chunks: 16 MiB takes milliseconds even on slow memory
# The first chunk is one transparent huge page (its fault zeroes 2 MiB: a smaller chunk would overstate the
# time per byte) and they double from there: memory served as MMIO (QEMU's CXL under TCG) writes at a few MB/s,
# and one 4 MiB memset there ran past a pair's whole share of the budget.
FIRST_TOUCH_CHUNK = 2 << 20
TRIAL_BYTES = 64 << 10  # first_touch_rate's trial: microseconds on DRAM, about a fifth of a second on emulated CXL
MIN_CHASE_STEPS = 1024  # the shortest latency sample: 1024 dependent loads, far above the timer's resolution


class Buffer:
    """An anonymous, page-aligned mapping bound to one node (bind happens before any page exists)."""

    def __init__(self, size: int, node: int, huge: bool = True) -> None:
        self.size = size
        self.node = node
        self.map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        advice = "MADV_HUGEPAGE" if huge else "MADV_NOHUGEPAGE"
        if hasattr(self.map, "madvise") and hasattr(mmap, advice):
            with contextlib.suppress(OSError):  # THP "never": 4 KiB pages, reported as such
                self.map.madvise(getattr(mmap, advice))
        self._view = ctypes.c_char.from_buffer(self.map)
        self.addr = ctypes.addressof(self._view)
        memsys.mbind(self.addr, size, memsys.MPOL_BIND, [node], memsys.MPOL_MF_STRICT)

    def touch(self, deadline: float | None = None, share: float = 1.0) -> None:
        """Fault every page in from the calling thread (first touch decides nothing under MPOL_BIND, but the
        thread's CPU decides which node's allocator runs, as for a real workload).

        With a deadline (time.perf_counter()), the pages are touched a chunk at a time and OutOfTime is raised
        as soon as finishing would pass it, after `share` of the time left (slow or emulated memory: an
        emulated CXL node touches at a few MB/s, and 128 MiB there took minutes)."""
        if deadline is None:
            ctypes.memset(self.addr, 1, self.size)
            return
        start = time.perf_counter()
        limit = start + max(deadline - start, 0.0) * share
        done = 0
        chunk = FIRST_TOUCH_CHUNK
        while done < self.size:
            n = min(chunk, self.size - done)
            ctypes.memset(self.addr + done, 1, n)
            done += n
            chunk = min(chunk * 2, TOUCH_CHUNK)
            now = time.perf_counter()
            if done < self.size and start + (now - start) * self.size / done > limit:
                raise OutOfTime(done, self.size, now - start)

    def verify(self, smaps: str | None = None) -> Placement:
        status, _ = memsys.move_pages(memsys.page_addresses(self.addr, self.size))
        counts = memsys.count_status(status)
        on = counts.pop(self.node, 0)
        return Placement(on == len(status) and not counts, len(status), on, counts, thp_of(smaps, self.addr))

    def close(self) -> None:
        del self._view
        self.map.close()


def first_touch_rate(node: int) -> float:
    """Bytes per second `node`'s memory takes writes at, from a 64 KiB trial: an upper bound on its first touch.

    Known before a measurement's buffers exist, so a set-up that cannot fit its share of the budget is not
    started: on memory served as MMIO (QEMU's emulated CXL under TCG, about 0.6 MB/s) one huge page's fault
    alone ran for 3 s, past the deadline checks between chunks. The trial's pages are faulted in first and
    the second pass is timed: page faults cost milliseconds each under TCG (a timed first pass in small
    pages read 1.9 MB/s on the emulated DRAM that huge pages touch far faster), and on DRAM the second pass
    runs at cache speed, so only memory slow to every write (MMIO) is ever foreseen not to fit."""
    trial = Buffer(TRIAL_BYTES, node, huge=False)
    try:
        ctypes.memset(trial.addr, 1, TRIAL_BYTES)  # the faults
        start = time.perf_counter()
        ctypes.memset(trial.addr, 2, TRIAL_BYTES)  # the writes
        return TRIAL_BYTES / max(time.perf_counter() - start, 1e-9)
    finally:
        trial.close()


def _must_fit(nbytes: int, rate: float | None, deadline: float | None, share: float) -> None:
    """Raise OutOfTime.foreseen when writing `nbytes` at `rate` would pass `share` of the time to `deadline`."""
    if rate is not None and deadline is not None and nbytes / rate > (deadline - time.perf_counter()) * share:
        raise OutOfTime.foreseen(nbytes, rate)


def thp_of(smaps: str | None, addr: int) -> float | None:
    """Share (0-1) of the mapping holding `addr` that is in transparent huge pages (AnonHugePages /
    Rss, from a /proc/self/smaps text); None when unknown."""
    if not smaps:
        return None
    inside = False
    rss = None
    for line in smaps.splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and not head.endswith(":"):
            if inside:
                return None
            lo, _, hi = head.partition("-")
            try:
                inside = int(lo, 16) <= addr < int(hi, 16)
            except ValueError:
                inside = False
            continue
        if not inside:
            continue
        parts = line.split()
        if len(parts) > 1 and parts[1].isdigit():
            if parts[0] == "Rss:":
                rss = int(parts[1])
            elif parts[0] == "AnonHugePages:":
                return int(parts[1]) / rss if rss else None
    return None


def _pinned(cpu: int, fn: Callable[[], object]) -> object:
    """Run fn in a new thread pinned to `cpu` (sched_setaffinity(0) pins the calling thread only)."""
    box: dict[str, object] = {}

    def body() -> None:
        try:
            os.sched_setaffinity(0, {cpu})
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=body, name=f"numatune-probe-cpu{cpu}")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


class LatencyResult(NamedTuple):
    samples_ns: tuple[float, ...]  # per-load latency of each kept sample (the first is dropped)
    loads: int  # dependent loads per sample
    placement: Placement
    cycle: int = 0  # cache lines in the cycle (the samples continue one another around it)


def measure_latency(lib, cpu: int, node: int, size: int, seconds: float, samples: int = 5,
                    smaps: Callable[[], str | None] = lambda: None,
                    deadline: float | None = None, rate: float | None = None) -> LatencyResult | Placement:
    """Per-load latency of a chase over `size` bytes on `node` from `cpu`; the Placement when it failed.

    The samples take about `seconds`. With a `deadline` (time.perf_counter()), everything, set-up included,
    ends by it: the first touch may take 60% of the time left (OutOfTime when the memory is too slow for
    that), and the samples share what is left of it, at most `seconds`. With the node's first-touch `rate`
    (bytes/s), a set-up foreseen not to fit (the touch, then the chase's own write of every line) is not begun."""

    def work() -> LatencyResult | Placement:
        _must_fit(2 * size, rate, deadline, 0.6)
        buf = Buffer(size, node)
        try:
            if deadline is not None:
                buf.touch(deadline, share=0.6)  # the chase then writes every line again: a fifth of the first touch
            lines = lib.nt_chase_init(buf.addr, size, LINE, min(GROUP, size), 0x5EED)  # writes every line
            if not lines:
                raise MemoryError("the chase helper could not build its cycle (out of memory)")
            placed = buf.verify(smaps())
            if not placed.ok:
                return placed
            # Every call continues from the pointer the previous one ended on: across samples the chase walks
            # the whole cycle, so a sample never re-reads lines an earlier one left in the caches (restarting
            # at the buffer's start made a short sample measure the last-level cache, not memory).
            end = ctypes.c_void_p(buf.addr)
            per = _load_time_ns(lib, end, lines)
            left = seconds if deadline is None else min(seconds, max(deadline - time.perf_counter(), 0.0))
            # One warm-up sample, then `samples`; on memory too slow for that many in the time left, fewer
            # (never under one) of at least MIN_CHASE_STEPS loads, so the deadline holds within one short sample.
            fit = int(left * 1e9 / per / MIN_CHASE_STEPS) - 1
            taken = max(1, min(samples, fit))
            steps = max(int(left / (taken + 1) * 1e9 / per), MIN_CHASE_STEPS)
            out = []
            for _ in range(taken + 1):
                ns = lib.nt_chase(end, steps, ctypes.byref(end))
                out.append(ns / (((steps + 15) // 16) * 16))
            return LatencyResult(tuple(out[1:]), steps, placed, lines)
        finally:
            buf.close()

    return _pinned(cpu, work)  # type: ignore[return-value]


def _load_time_ns(lib, end: ctypes.c_void_p, lines: int) -> float:  # noqa: ANN001 - the helper's CDLL
    """ns per dependent load, from chase runs that double from MIN_CHASE_STEPS until one lasts 10 ms (or walks
    the cycle, at most 200,000 loads): fast memory gets a long, stable run, slow memory a short one."""
    longest = min(lines, 200_000)
    steps = min(MIN_CHASE_STEPS, longest)
    while True:
        ns = lib.nt_chase(end, steps, ctypes.byref(end))
        if ns >= 10_000_000 or steps >= longest:
            return max(ns / steps, 0.1)
        steps = min(steps * 2, longest)


class BandwidthResult(NamedTuple):
    gbps: tuple[float, ...]  # 1 GB = 1e9 bytes, one figure per sample (all threads together)
    bytes_per_sample: int  # bytes counted in one sample (all threads)
    threads: int
    placement: Placement  # the worst buffer's


def measure_bandwidth(kind: str, lib, cpus: Sequence[int], node: int, size: int, seconds: float,
                      samples: int = 3, smaps: Callable[[], str | None] = lambda: None,
                      deadline: float | None = None, rate: float | None = None) -> BandwidthResult | Placement:
    """`copy` (memmove src→dst) or `read` (helper) bandwidth of len(cpus) pinned threads, each with its own
    buffers of `size // len(cpus)` bytes on `node`, sampled for about `seconds`. With a `deadline`, all of it
    ends by then, the buffers' first touch included (OutOfTime when that alone would take half of it; with the
    node's first-touch `rate`, before any buffer exists when a thread's touch and one pass would not fit)."""
    n = len(cpus)
    per = max((size // n) // mmap.PAGESIZE * mmap.PAGESIZE, mmap.PAGESIZE * 16)
    _must_fit(2 * per * (2 if kind == "copy" else 1), rate, deadline, 1.0)
    bufs: list[list[Buffer]] = [[] for _ in cpus]
    errors: list[BaseException] = []
    ready = threading.Barrier(n + 1)
    go = threading.Barrier(n + 1)
    done = threading.Barrier(n + 1)
    reps = [1]
    stop = [False]
    spans: list[list[tuple[float, float]]] = [[] for _ in cpus]

    def run(i: int) -> None:
        ok = True
        try:
            os.sched_setaffinity(0, {cpus[i]})
            mine = [Buffer(per, node)] + ([Buffer(per, node)] if kind == "copy" else [])
            bufs[i] = mine
            for b in mine:
                b.touch(deadline, share=0.5)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)
            ok = False
        try:
            _run_samples(i, ok)
        except threading.BrokenBarrierError:  # the caller stopped (Ctrl-C, an error): this thread ends too
            return

    def _run_samples(i: int, ok: bool) -> None:
        ready.wait()
        while True:
            go.wait()
            if stop[0] or not ok:
                done.wait()
                if stop[0]:
                    return
                continue
            sink = ctypes.c_uint64()
            t0 = time.perf_counter()
            if kind == "copy":
                src, dst = bufs[i][0].addr, bufs[i][1].addr
                for _ in range(reps[0]):
                    ctypes.memmove(dst, src, per)
            else:
                lib.nt_read(bufs[i][0].addr, per, reps[0], ctypes.byref(sink))
            spans[i].append((t0, time.perf_counter()))
            done.wait()

    threads = [threading.Thread(target=run, args=(i,), name=f"numatune-bw-cpu{c}") for i, c in enumerate(cpus)]
    for t in threads:
        t.start()
    try:
        ready.wait()
        if errors:
            raise errors[0]
        text = smaps()
        worst = None
        for mine in bufs:
            for b in mine:
                p = b.verify(text)
                if worst is None or p.on_target / max(p.pages, 1) < worst.on_target / max(worst.pages, 1):
                    worst = p
        assert worst is not None
        if not worst.ok:
            return worst
        factor = 2 if kind == "copy" else 1

        def one() -> float:
            for s in spans:
                s.clear()
            go.wait()
            done.wait()
            start = min(s[-1][0] for s in spans)
            end = max(s[-1][1] for s in spans)
            return end - start

        reps[0] = 1
        elapsed = one()  # warm-up and calibration
        left = seconds if deadline is None else min(seconds, max(deadline - time.perf_counter(), 0.0))
        # As many samples as fit in the time left, at most `samples`; where not one more pass fits (memory
        # served as MMIO, a loaded host), the calibration pass is the one sample: the deadline holds.
        fit = min(samples, int(left / max(elapsed, 1e-6)))
        if fit < 1:
            counted = per * factor * n
            return BandwidthResult((counted / max(elapsed, 1e-9) / 1e9,), counted, n, worst)
        reps[0] = max(1, int(left / fit / max(elapsed, 1e-6)))
        out = []
        counted = per * factor * reps[0] * n
        for _ in range(fit):
            out.append(counted / one() / 1e9)
        return BandwidthResult(tuple(out), counted, n, worst)
    finally:
        # Every thread is released wherever it waits, and ends (they are not daemons: the interpreter would
        # wait for them for ever after a Ctrl-C left them at a barrier the main thread never reached)
        stop[0] = True
        for barrier in (ready, go, done):
            barrier.abort()
        for t in threads:
            t.join(timeout=30)
        for mine in bufs:
            for b in mine:
                b.close()
