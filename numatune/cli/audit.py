"""numatune audit."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import format_option, resolve_format


def _fraction(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Accept 0.2 or 20 (percent)."""
    if value < 0:
        raise click.BadParameter("must not be negative")
    return value / 100 if value > 1 else value


def prefetch_numa_maps(app: App, pids: tuple[int, ...]) -> tuple[object, dict[int, str]]:
    """Start reading the PIDs' numa_maps in a thread: the kernel builds it (the slowest part of a
    big process's audit) while this thread imports modules and reads the topology. Errors are left
    for the normal read to report."""
    import threading

    out: dict[int, str] = {}
    host = app.host

    def work() -> None:
        for pid in pids:
            try:
                out[pid] = host.read_text(f"/proc/{pid}/numa_maps")
            except Exception:  # noqa: BLE001 - read_process reads it again and reports the error
                return

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, out


class AuditRun:
    """One audit pass: which PIDs, read them, optionally count accesses, judge them."""

    def __init__(self, app: App, pids: tuple[int, ...], children: bool, names: tuple[str, ...], thresholds) -> None:  # noqa: ANN001
        from numatune.readers.topology import read_topology

        self.app, self.pids, self.children, self.names, self.thresholds = app, pids, children, names, thresholds
        self.host = app.host
        self.topo = read_topology(self.host, pci_ids=None)
        self.balancing = self.host.read_int("/proc/sys/kernel/numa_balancing")

    def targets(self) -> tuple[list[int], set[int], dict[str, object] | None]:
        """(PIDs to read, PIDs whose loss is an error, job description)."""
        import os

        from numatune.errors import ProcessGone
        from numatune.readers.procs import descendants, list_processes, match_name, pid_exists

        for pid in self.pids:
            if not pid_exists(self.host, pid):
                raise ProcessGone(f"no process with PID {pid}", hint="check the PID with `ps -p PID`")
        strict = set(self.pids)
        wanted: list[int] = []
        job = None
        table = list_processes(self.host) if (self.children or self.names) else {}
        if self.children:
            job = {"launchers": list(self.pids), "ranks": []}
            for pid in self.pids:
                wanted += [p for p in descendants(table, pid) if p not in wanted]
            strict = set()
        else:
            wanted = list(self.pids)
        me = os.getpid() if self.host.is_live else None
        for pattern in self.names:
            matched = match_name(table, pattern, exclude=me)
            if not matched:
                raise ProcessGone(f"no process matches --name {pattern!r}")
            wanted += [p for p in matched if p not in wanted]
        return wanted, strict, job

    def read(
        self, pids: list[int], strict: set[int], notes: list[str], prefetched: dict[int, str] | None = None
    ) -> list:
        from numatune.errors import PermissionDenied, ProcessGone
        from numatune.readers.procs import read_process

        procs, denied = [], 0
        for pid in pids:
            try:
                maps = (prefetched or {}).get(pid)
                procs.append(read_process(self.host, pid, self.topo, numa_maps=maps))
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
        self, sample: float, progress: bool, prefetched: dict[int, str] | None = None
    ) -> tuple[list, dict | None, list[str], dict[int, int]]:
        from numatune.analysis.locality import job_ranks, judge

        pids, strict, job = self.targets()
        notes: list[str] = []
        procs = self.read(pids, strict, notes, None if sample > 0 else prefetched)
        pmu_counts: dict[int, tuple[int, int]] | None = None
        pmu_note = "hardware counters not sampled: pass --sample SECONDS to count local/remote DRAM loads"
        events: tuple[str, ...] = ()
        if sample > 0:
            pmu_counts, events, pmu_note, vm = self._sample(procs, sample, progress)
            if vm:
                notes.append(vm)
            procs = self.read([p.pid for p in procs], strict, notes)  # fresh placement and hinting faults
        helpers: dict[int, int] = {}
        if job is not None:
            rows = job_ranks(procs)
            procs = [p for p, _ in rows]
            helpers = {p.pid: n for p, n in rows}
            job["ranks"] = [{"rank": p.rank, "pid": p.pid, "helper_processes": n} for p, n in rows]
        audits = []
        for p in procs:
            pmu = None
            if pmu_counts is not None and p.pid in pmu_counts:
                local, remote = pmu_counts[p.pid]
                pmu = (local, remote, events, sample)
            audits.append(judge(p, self.topo, self.thresholds, balancing_mode=self.balancing, pmu=pmu,
                                pmu_note=None if pmu else pmu_note))
        return audits, job, notes, helpers

    def _sample(self, procs: list, seconds: float, progress: bool):  # noqa: ANN202
        import time

        from numatune.readers.perf import PmuUnavailable, open_pmu
        from numatune.readers.procs import parse_vmstat

        session = None
        note = None
        try:
            session = open_pmu(self.host, {p.pid: [t.tid for t in p.threads] or [p.pid] for p in procs})
        except PmuUnavailable as exc:
            note = str(exc)
        vm0 = parse_vmstat(self.host.read_optional("/proc/vmstat") or "")
        if session is not None:
            session.start()
        if progress:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            what = "counting DRAM loads" if session else "sampling NUMA-balancing faults"
            with Progress(TextColumn(what), BarColumn(), TimeRemainingColumn(), console=self.app.console(stderr=True),
                          transient=True) as bar:
                task = bar.add_task(what, total=seconds)
                start = time.monotonic()
                while (elapsed := time.monotonic() - start) < seconds:
                    bar.update(task, completed=elapsed)
                    time.sleep(min(0.1, seconds - elapsed))
        else:
            time.sleep(seconds)
        counts = session.stop() if session is not None else None
        vm1 = parse_vmstat(self.host.read_optional("/proc/vmstat") or "")
        vm_note = None
        faults = vm1.get("numa_hint_faults", 0) - vm0.get("numa_hint_faults", 0)
        if faults > 0:
            local = vm1.get("numa_hint_faults_local", 0) - vm0.get("numa_hint_faults_local", 0)
            vm_note = (f"system-wide in {seconds:g}s: {faults} NUMA hinting faults, "
                       f"{100 * (faults - local) / faults:.1f}% remote (/proc/vmstat)")
        events = tuple(e.name for e in session.events) if session is not None else ()
        return counts, events, note, vm_note


@click.command("audit")
@click.argument("pids", nargs=-1, type=click.IntRange(min=1), metavar="[PID]...")
@click.option("--children", is_flag=True, help="Audit the whole tree under each PID (a launcher: torchrun, srun, "
              "mpirun): one row per rank.")
@click.option("--name", "names", multiple=True, metavar="PATTERN",
              help="Processes whose command name matches (shell glob; a plain word matches as a substring). "
                   "Repeatable.")
@format_option("table", "json", "prometheus")
@click.option("--watch", is_flag=True, help="Live view, refreshed every --interval seconds (Ctrl-C to stop).")
@click.option("--interval", type=click.FloatRange(min=0.05), default=2.0, show_default=True, metavar="SECONDS",
              help="Refresh period of --watch.")
@click.option("--count", type=click.IntRange(min=0), default=0, metavar="N",
              help="With --watch: stop after N refreshes (0: until Ctrl-C).")
@click.option("--sample", type=click.FloatRange(min=0), default=0.0, metavar="SECONDS",
              help="Count local/remote DRAM loads (hardware counters) for this long; progress bar on stderr.")
@click.option("--remote-warn", type=float, default=0.05, show_default=True, callback=_fraction,
              help="Remote share above which the verdict is 'warning' (fraction or percent).")
@click.option("--remote-misplaced", type=float, default=0.20, show_default=True, callback=_fraction,
              help="Remote share above which the verdict is 'misplaced'.")
@click.option("--slow-tier-warn", type=float, default=0.10, show_default=True, callback=_fraction,
              help="Share on CPU-less/CXL nodes, not asked for by a memory policy, that is a 'warning'.")
@click.pass_obj
def audit_cmd(
    app: App,
    pids: tuple[int, ...],
    children: bool,
    names: tuple[str, ...],
    fmt: str,
    as_json: bool,
    watch: bool,
    interval: float,
    count: int,
    sample: float,
    remote_warn: float,
    remote_misplaced: float,
    slow_tier_warn: float,
) -> None:
    """Show where running processes really are: threads and CPUs, memory per NUMA node (anon, file,
    heap, stack, shm, hugetlb), memory policies, the GPU they use, the remote and slow-tier shares,
    a verdict (ok / warning / misplaced) and the exact fix (numatune launch, numactl, migratepages,
    taskset).

    With --children on a launcher (torchrun, srun, mpirun), one row per local rank.
    """
    fmt = resolve_format(fmt, as_json)
    prefetch = prefetch_numa_maps(app, pids) if pids and not children and not watch and not sample else None
    from numatune.analysis.locality import Thresholds

    if not pids and not names:
        raise click.UsageError("give at least one PID or --name PATTERN")
    if children and not pids:
        raise click.UsageError("--children needs the launcher's PID")
    if watch and fmt != "table":
        raise click.UsageError("--watch is a live table; it cannot be combined with --json/--format")
    try:
        thresholds = Thresholds(remote_warn, remote_misplaced, slow_tier_warn)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    run = AuditRun(app, pids, children, names, thresholds)
    if watch:
        _watch(app, run, interval, count, sample)
        return
    prefetched = None
    if prefetch is not None:
        prefetch[0].join()  # type: ignore[attr-defined]
        prefetched = prefetch[1]
    audits, job, notes, helpers = run.run(sample, progress=fmt == "table", prefetched=prefetched)
    if fmt in ("json", "prometheus"):
        from numatune.render.audit_json import audit_document

        doc = audit_document(
            audits, source=run.topo.source, live=run.topo.live, job=job, notes=notes,
            thresholds={"remote_warning": remote_warn, "remote_misplaced": remote_misplaced,
                        "slow_tier_warning": slow_tier_warn},
        )
        if fmt == "json":
            app.echo_json(doc)
        else:
            from numatune.render.prometheus import audit_metrics

            click.echo(audit_metrics(doc), nl=False)
        return
    from numatune.render.audit_text import render_audit

    app.console().print(render_audit(audits, run.topo, job=job is not None, helpers=helpers))
    for note in notes:
        app.note(note)


def _watch(app: App, run: AuditRun, interval: float, count: int, sample: float) -> None:
    import time

    from rich.live import Live
    from rich.text import Text

    from numatune.errors import ProcessGone
    from numatune.render.audit_text import job_table

    console = app.console()
    n = 0
    with Live(Text("reading…"), console=console, auto_refresh=False) as live:
        while True:
            try:
                audits, job, notes, helpers = run.run(sample, progress=False)
            except ProcessGone as exc:
                live.update(Text(f"{exc.message}; stopped watching"), refresh=True)
                break
            stamp = time.strftime("%H:%M:%S")
            live.update(job_table(audits, run.topo, helpers, f"numatune audit — {stamp} — every {interval:g}s"),
                        refresh=True)
            n += 1
            if count and n >= count:
                break
            time.sleep(interval)
