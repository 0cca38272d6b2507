"""One audit pass over running processes, without the command line.

Chooses the target PIDs (a launcher's tree with ``children``, ``names`` globs), reads each process through
the Host, optionally counts local/remote DRAM loads for ``sample`` seconds, and judges every process.
`numatune audit` is a thin layer over this; other tools can call it with a Host and plain values.
Imports are kept inside the functions so the audit path stays fast (the numa_maps prefetch starts
before the readers are imported).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from numatune.analysis.locality import Thresholds
    from numatune.model.process import JobPlace, ProcessAudit, ProcessInfo
    from numatune.system.host import Host

PMU_NOT_SAMPLED = "hardware counters not sampled: pass --sample SECONDS to count local/remote DRAM loads"


def prefetch_numa_maps(host: Host, pids: tuple[int, ...]) -> tuple[threading.Thread, dict[int, str]]:
    """Start reading the PIDs' numa_maps in a thread: the kernel builds it (the slowest part of a
    big process's audit) while this thread imports modules and reads the topology. Errors are left
    for the normal read to report. Join the thread before using the dict."""
    import threading

    out: dict[int, str] = {}

    def work() -> None:
        for pid in pids:
            try:
                out[pid] = host.read_text(f"/proc/{pid}/numa_maps")
            except Exception:  # noqa: BLE001 - read_process reads it again and reports the error
                return

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, out


def probe_h2d(doc: Any, where: str) -> dict[str, dict[int, float]]:
    """GPU BDF -> node -> host-to-GPU GB/s (median at the largest copy size) from a saved `probe --gpu --json`
    document: what a pinned buffer on each node costs that GPU's copies. Every field is read through
    model.document (a wrong type, a size that is not a number, a figure that is not a finite number of at most
    MAX_GBPS: InputError naming WHERE and the field); InputError when it is not one."""
    from numatune.errors import InputError
    from numatune.model.document import MAX_ID, Doc
    from numatune.numbers import maybe_int
    from numatune.placement.targets import MAX_GBPS

    view = Doc(doc, where)
    gpu = view.mapping("gpu") if isinstance(doc, dict) and view.text("schema").startswith("numatune.probe/") \
        else None
    if gpu is None or not gpu.scalar("measured"):
        raise InputError(f"{where}: no measured host-to-GPU figures (write it with `numatune probe --gpu --json`)")
    bdf = {g.int("index", 0, MAX_ID): g.text("bdf").lower() for g in gpu.list("gpus") if g.text("bdf")}
    out: dict[str, dict[int, float]] = {}
    for p in gpu.list("pairs"):
        figs = p.items("h2d_gbps")
        if p.text("status") != "ok" or p.int("gpu", 0, MAX_ID) not in bdf or not figs:
            continue
        sizes = []
        for size, fig in figs:
            number = maybe_int(str(size), fig.where()) if isinstance(size, str) and len(size) <= 40 else None
            if number is None:
                fig.fail("expected a copy size in bytes as the key")
            sizes.append((number, fig))
        best = max(sizes, key=lambda s: s[0])[1]
        node = p.int("node", 0, MAX_ID, required=True)
        out.setdefault(bdf[p.int("gpu", 0, MAX_ID)], {})[node] = best.number("median", 0.0, MAX_GBPS, required=True)
    return out


def no_job_hint(host: Host) -> str:
    """What `audit --ranks` looked for when it found no job, and how to point it at one."""
    from numatune.model.jobshape import LAUNCHERS
    from numatune.model.resolve import RANK_VARS

    where = "this node" if host.is_live else host.label
    return (f"no training job found on {where}: looked for processes whose environment or command line names a local "
            f"rank ({', '.join(k for k, _ in RANK_VARS[:4])}, ..., --local-rank) and for the launchers above them "
            f"({', '.join(n for n in ('torchrun', 'srun', 'mpirun', 'deepspeed') if n in LAUNCHERS)}, ...); "
            "point audit at a job with `numatune audit --children "
            "LAUNCHER_PID`, `numatune audit PID`, or a capture: `numatune --root "
            "fixtures/h100-job-2026-11-28.tar.gz audit --ranks` (run as the job's user or as root to read its "
            "environment)")


def load_probe_h2d(path: str) -> dict[str, dict[int, float]]:
    """`audit --probe FILE`: probe_h2d of the file, read as plan-memory's --probe is (system.infile: a regular
    file, bounded, its nesting and size checked before parsing); InputError, exit 3, when it cannot be read or
    is not one."""
    from numatune.system.infile import MAX_REPORT_BYTES, load_document, read_text

    text = read_text(path, "--probe file", MAX_REPORT_BYTES)
    return probe_h2d(load_document(text, f"--probe {path}"), f"--probe {path}")


class AuditRun:
    """One audit setup (host, targets, thresholds, topology read once); `run()` is one pass, repeatable."""

    def __init__(
        self, host: Host, pids: tuple[int, ...], children: bool, names: tuple[str, ...], thresholds: Thresholds,
        *, mappings: bool = False, ranks: bool = False, h2d: Mapping[str, Mapping[int, float]] | None = None,
    ) -> None:
        """`mappings`: keep each process's placement per mapping (`audit --mappings`); `ranks`: also every
        process whose environment names a local rank (`audit --ranks`); `h2d`: a saved probe's host-to-GPU
        bandwidth per GPU and node (`audit --probe`, see load_probe_h2d)."""
        from numatune.readers.topology import read_topology

        self.host, self.pids, self.children, self.names, self.thresholds = host, pids, children, names, thresholds
        self.ranks = ranks
        self.mappings = mappings
        self.h2d = h2d
        self.places: dict[int, JobPlace] | None = None  # the root's job tree (targets(): --ranks, --children)
        self.topo = read_topology(self.host, pci_ids=None)
        self.balancing = self.host.read_int("/proc/sys/kernel/numa_balancing")

    def targets(self) -> tuple[list[int], set[int], dict[str, object] | None]:
        """(PIDs to read, PIDs whose loss is an error, job description). With `ranks` or `children` the job tree of
        the whole root is placed first (`self.places`): `--ranks` reads the processes that belong to a job."""
        import os

        from numatune.analysis.jobtree import job_places
        from numatune.errors import ProcessGone
        from numatune.readers.procs import (
            as_listing,
            descendants,
            list_processes,
            match_name,
            no_such_process,
            pid_exists,
            process_table,
        )

        for pid in self.pids:
            if not pid_exists(self.host, pid):
                raise no_such_process(self.host, pid)
        strict = set(self.pids)
        wanted: dict[int, None] = {}  # an ordered set: each PID read once, in the order found
        job = None
        self.places = None
        if self.children or self.ranks:
            entries = process_table(self.host)
            table = as_listing(entries)
            self.places = job_places(entries)
        else:
            table = list_processes(self.host) if self.names else {}
        if self.children:
            job = {"launchers": list(self.pids), "ranks": []}
            for pid in self.pids:
                wanted.update(dict.fromkeys(descendants(table, pid)))
            strict = set()
        else:
            wanted.update(dict.fromkeys(self.pids))
        me = os.getpid() if self.host.is_live else None
        for pattern in self.names:
            matched = match_name(table, pattern, exclude=me)
            if not matched:
                raise ProcessGone(f"no process matches --name {pattern!r}")
            wanted.update(dict.fromkeys(matched))
        if self.ranks:  # none running is an empty report (with a hint): a timer audits whatever trains right now
            assert self.places is not None
            wanted.update(dict.fromkeys(p for p in sorted(self.places) if p != me))
            job = job or {"launchers": [], "ranks": []}
        return list(wanted), strict, job

    def read(
        self, pids: list[int], strict: set[int], notes: list[str], prefetched: dict[int, str] | None = None
    ) -> list[ProcessInfo]:
        """Read the processes; one in `strict` that is gone or denied is an error, others become notes."""
        from numatune.errors import PermissionDenied, ProcessGone
        from numatune.readers.procs import read_process

        procs, denied = [], 0
        for pid in pids:
            try:
                maps = (prefetched or {}).get(pid)
                procs.append(read_process(self.host, pid, self.topo, numa_maps=maps, mappings=self.mappings))
            except ProcessGone:
                if pid in strict:
                    raise
                notes.append(f"process {pid} exited while being read; skipped")
            except PermissionDenied as exc:
                if pid in strict:
                    raise
                denied += 1
                notes.append(f"skipped: {exc.message}")
        if pids and not procs:
            if denied:
                raise PermissionDenied("permission denied reading every matched process", hint="run as root")
            raise ProcessGone("every matched process exited while being read")
        return procs

    def run(
        self,
        sample: float = 0.0,
        progress: Callable[[str, float, float], None] | None = None,
        prefetched: dict[int, str] | None = None,
    ) -> tuple[list[ProcessAudit], dict[str, object] | None, list[str], dict[int, int]]:
        """One pass: targets, read, count for `sample` seconds, judge. Returns (audits: in a job view each rank
        followed by its workers, else in PID order; the job with `children` or `ranks` else None; notes for stderr;
        worker count per rank PID).

        Every process gets its role (rank, worker, launcher, process): a worker is judged against its rank's
        binding and owns no GPU unless it holds a context.

        progress(what, elapsed, total) reports the --sample wait: called about every 0.1 s, then once with
        elapsed == total when the wait is over (a progress bar can close there). None: wait silently."""
        from numatune.analysis import jobtree
        from numatune.analysis.locality import judge
        from numatune.model.process import JobPlace, charge_driver_memory
        from numatune.readers.procs import rank_ancestors

        pids, strict, job = self.targets()
        notes: list[str] = []
        procs = self.read(pids, strict, notes, None if sample > 0 else prefetched)
        pmu_counts: dict[int, tuple[int, int]] | None = None
        pmu_note: str | None = PMU_NOT_SAMPLED
        events: tuple[str, ...] = ()
        if sample > 0:
            pmu_counts, events, pmu_note, vm = self.sample(procs, sample, progress)
            notes += vm
            procs = self.read([p.pid for p in procs], strict, notes)  # fresh placement and hinting faults
        if self.places is not None:  # the whole root's tree was placed; a worker's rank is among the read
            known: dict[int, ProcessInfo] = {}
            places = {p.pid: self.places.get(p.pid) or JobPlace("process") for p in procs}
        else:
            known = rank_ancestors(self.host, procs, self.topo)
            places = jobtree.places(procs, known)
        if self.children and any(p.rank is not None for p in procs):  # the launcher's tree: its job's processes
            procs = [p for p in procs if places[p.pid].role != "process"]
        by_pid = {**known, **{p.pid: p for p in procs}}
        audits = []
        for p in procs:
            place = places[p.pid]
            role, rank_pid = place.role, place.rank_pid if place.role in ("worker", "helper") else None
            if place.role == "rank" and place.inferred:  # its rank variables are seen in its children only
                p = p._replace(rank=place.rank, rank_source=place.rank_source)
            if rank_pid is not None:  # the rank's driver memory: charged there
                p = charge_driver_memory(jobtree.as_worker(p, rank_pid))
            pmu = None
            if pmu_counts is not None and p.pid in pmu_counts:
                local, remote = pmu_counts[p.pid]
                pmu = (local, remote, events, sample)
            a = judge(p, self.topo, self.thresholds, balancing_mode=self.balancing, pmu=pmu,
                      pmu_note=None if pmu else pmu_note, h2d=self.h2d)._replace(role=role, rank_pid=rank_pid,
                                                                                 place=place)
            if role == "worker" and rank_pid is not None and rank_pid in by_pid:
                a = jobtree.with_worker_check(a, jobtree.check_worker(p, by_pid[rank_pid], self.topo))
            audits.append(a)
        helpers: dict[int, int] = {}
        if job is not None:
            audits = jobtree.job_order(audits)
            workers: dict[int, list[int]] = {}
            for a in audits:
                if a.role in ("worker", "helper") and a.rank_pid is not None:
                    workers.setdefault(a.rank_pid, []).append(a.process.pid)
            helpers = {a.process.pid: len(workers.get(a.process.pid, [])) for a in audits if a.role == "rank"}
            job["ranks"] = [{"rank": a.process.rank, "pid": a.process.pid, "helper_processes": helpers[a.process.pid],
                             "workers": workers.get(a.process.pid, [])} for a in audits if a.role == "rank"]
            jobs: dict[int, dict[str, list[int]]] = {}
            for a in audits:
                if a.place is not None and a.place.job is not None and a.role in ("launcher", "rank"):
                    jobs.setdefault(a.place.job, {"launchers": [], "ranks": []})[f"{a.role}s"].append(a.process.pid)
            job["jobs"] = [{"job": j, **v} for j, v in sorted(jobs.items())]
            if not audits and self.ranks:
                notes.append(no_job_hint(self.host))
        notes += [f"cannot read {path}: {reason}" for path, reason in self.host.notes]
        return audits, job, notes, helpers

    def sample(
        self, procs: list[ProcessInfo], seconds: float, progress: Callable[[str, float, float], None] | None = None
    ) -> tuple[dict[int, tuple[int, int]] | None, tuple[str, ...], str | None, list[str]]:
        """Count local/remote DRAM loads of the processes' threads for `seconds` (hardware counters, when
        they open), the system-wide NUMA hinting faults in /proc/vmstat and, on a node with CXL memory,
        each CXL device's read/write traffic (its CXL PMU) over the same time.
        Returns (counts per PID or None, event names, why there are no counts, notes: vmstat, CXL traffic)."""
        import time

        from numatune.errors import PmuUnavailable
        from numatune.readers.perf import open_pmu
        from numatune.readers.procs import parse_vmstat

        session = None
        note = None
        try:
            session = open_pmu(self.host, {p.pid: [t.tid for t in p.threads] or [p.pid] for p in procs})
        except PmuUnavailable as exc:
            note = str(exc)
        cxl, cxl_note = None, None
        if self.topo.cxl.memdevs:
            from numatune.readers.perf import open_cxl_traffic

            try:
                cxl = open_cxl_traffic(self.host, self.topo.cxl.pmus)
            except PmuUnavailable as exc:
                cxl_note = f"CXL traffic per device: not measured — {exc}"
        vm0 = parse_vmstat(self.host.read_optional("/proc/vmstat") or "")
        if session is not None:
            session.start()
        if cxl is not None:
            cxl.start()
        if progress is not None:
            what = "counting DRAM loads" if session else "sampling NUMA-balancing faults"
            start = time.monotonic()
            while (elapsed := time.monotonic() - start) < seconds:
                progress(what, elapsed, seconds)
                time.sleep(min(0.1, seconds - elapsed))
            progress(what, seconds, seconds)
        else:
            time.sleep(seconds)
        counts = session.stop() if session is not None else None
        traffic = cxl.stop() if cxl is not None else ()
        vm1 = parse_vmstat(self.host.read_optional("/proc/vmstat") or "")
        vm_note = None
        faults = vm1.get("numa_hint_faults", 0) - vm0.get("numa_hint_faults", 0)
        if faults > 0:
            local = vm1.get("numa_hint_faults_local", 0) - vm0.get("numa_hint_faults_local", 0)
            vm_note = (f"system-wide in {seconds:g}s: {faults} NUMA hinting faults, "
                       f"{100 * (faults - local) / faults:.1f}% remote (/proc/vmstat)")
        events = tuple(e.name for e in session.events) if session is not None else ()
        extra = [vm_note] if vm_note else []
        if traffic:
            from numatune.render.probe_out import cxl_traffic_lines

            extra.append("; ".join(line.strip() for line in cxl_traffic_lines(traffic, None)))
        elif cxl_note:
            extra.append(cxl_note)
        return counts, events, note, extra


def audit_json(host: Host, pids: Sequence[int]) -> str:
    """`audit PID... --json` with the default thresholds (the common, scripted case)."""
    thread, prefetched = prefetch_numa_maps(host, tuple(pids))  # first: the kernel builds numa_maps meanwhile
    from numatune.analysis.locality import Thresholds

    run = AuditRun(host, tuple(pids), False, (), Thresholds())
    thread.join()
    audits, job, notes, _helpers = run.run(0, progress=None, prefetched=prefetched)
    from numatune.render.envelope import dumps

    return dumps(audit_doc(run, audits, job, notes, Thresholds()))


def audit_doc(run, audits, job, notes, thresholds, min_size: int = 0) -> dict[str, Any]:  # noqa: ANN001
    from numatune.render.audit_json import audit_document

    return audit_document(
        audits, source=run.topo.source, live=run.topo.live, job=job, notes=notes, min_size=min_size,
        thresholds={"remote_warning": thresholds.remote_warning, "remote_misplaced": thresholds.remote_misplaced,
                    "slow_tier_warning": thresholds.slow_tier_warning},
    )


def make_thresholds(remote_warn: float, remote_misplaced: float, slow_tier_warn: float) -> Thresholds:
    """The verdict's thresholds (ValueError when they contradict each other: the caller's usage error)."""
    from numatune.analysis.locality import Thresholds

    return Thresholds(remote_warn, remote_misplaced, slow_tier_warn)


def run_audit(app, run: AuditRun,  # noqa: ANN001 - the CLI's App, handed down
              fmt: str, *, watch: bool, interval: float, count: int, sample: float,
              min_bytes: int, prefetch: tuple[threading.Thread, dict[int, str]] | None) -> None:
    """`numatune audit`: read, judge and render the processes once (text, JSON or Prometheus), or watch them."""
    if watch:
        _watch(app, run, interval, count, sample)
        return
    prefetched = None
    if prefetch is not None:
        prefetch[0].join()
        prefetched = prefetch[1]
    bar = _SampleBar(app)  # on a terminal's stderr only, whatever the format of stdout
    try:
        audits, job, notes, helpers = run.run(sample, progress=bar, prefetched=prefetched)
    finally:
        if bar is not None:
            bar.close()
    if fmt in ("json", "prometheus"):
        doc = audit_doc(run, audits, job, notes, run.thresholds, min_size=min_bytes)
        if fmt == "json":
            app.echo_json(doc)
        else:
            from numatune.render.printable import echo
            from numatune.render.prometheus import audit_metrics

            echo(audit_metrics(doc))
        return
    from numatune.render.audit_text import render_audit

    console = app.console()
    console.print(render_audit(audits, run.topo, job=job is not None, helpers=helpers, min_size=min_bytes,
                               terminal=console.is_terminal))
    for note in notes:
        app.note(note)


class _SampleBar:
    """The --sample progress bar on stderr, drawn from the library's progress(what, elapsed, total) calls:
    opened on the first call, closed when elapsed reaches total (or by close() on an error)."""

    def __init__(self, app) -> None:  # noqa: ANN001 - the CLI's App
        self.app = app
        self.bar = None
        self.task = None

    def __call__(self, what: str, elapsed: float, total: float) -> None:
        import sys

        if not sys.stderr.isatty():  # a file or a pipe: no bar (rich left a blank line there), no note
            return
        if self.app.plain:  # no bar (its redraws are escape codes): one line when the sampling starts
            if self.task is None:
                self.task = what
                self.app.note(f"{what}: {total:g} s")
            return
        if self.bar is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn(what), BarColumn(), TimeRemainingColumn(),
                                console=self.app.console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(what, total=total)
        if elapsed >= total:
            self.close()
        else:
            self.bar.update(self.task, completed=elapsed)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _watch(app, run: AuditRun,  # noqa: ANN001
            interval: float, count: int, sample: float) -> None:
    import time

    from rich.live import Live
    from rich.text import Text

    from numatune.errors import ProcessGone
    from numatune.render.audit_text import job_table

    console = app.console()
    if not console.is_terminal or app.plain:  # a file, a pipe, or --no-color: frames, never redrawn in place
        _watch_frames(console, run, interval, count, sample)
        return
    n = 0
    with Live(Text("reading…"), console=console, auto_refresh=False) as live:
        while True:
            try:
                audits, job, notes, helpers = run.run(sample)
            except ProcessGone as exc:
                live.update(Text(f"{exc.message}; stopped watching"), refresh=True)
                break
            stamp = time.strftime("%H:%M:%S")
            table = job_table(audits, run.topo, helpers, f"numatune audit — {stamp} — every {interval:g}s")
            cxl = [n for n in notes if n.startswith("CXL traffic")]  # per-device CXL PMU counts (with --sample)
            if cxl:
                table.caption, table.caption_justify = "\n".join(cxl), "left"
            live.update(table, refresh=True)
            n += 1
            if count and n >= count:
                break
            time.sleep(interval)


def _watch_frames(console, run: AuditRun, interval: float, count: int, sample: float) -> None:  # noqa: ANN001
    """--watch into a file or pipe, or with --no-color: one whole frame per interval (a title line with the
    time, the table), flushed as it is written and never redrawn in place (no escape code), so that
    `--count 3 > f` holds three frames and a watch stopped by a signal leaves every frame it wrote."""
    import time

    from numatune.errors import ProcessGone
    from numatune.render.audit_text import job_table

    n = 0
    while True:
        try:
            audits, _job, notes, helpers = run.run(sample)
        except ProcessGone as exc:
            console.print(f"{exc.message}; stopped watching")
            console.file.flush()
            return
        stamp = time.strftime("%H:%M:%S")
        table = job_table(audits, run.topo, helpers, f"numatune audit — {stamp} — every {interval:g}s",
                          terminal=False)
        cxl = [line for line in notes if line.startswith("CXL traffic")]
        if cxl:
            table.caption, table.caption_justify = "\n".join(cxl), "left"
        if n:
            console.print()
        console.print(table)
        console.file.flush()
        n += 1
        if count and n >= count:
            return
        time.sleep(interval)
