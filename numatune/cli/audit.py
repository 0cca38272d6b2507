"""numatune audit."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import format_option
from numatune.commands.audit import AuditRun, prefetch_numa_maps
from numatune.render.printable import echo


def _fraction(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Accept 0.2 or 20 (percent)."""
    if value < 0:
        raise click.BadParameter("must not be negative")
    return value / 100 if value > 1 else value


class _SampleBar:
    """The --sample progress bar on stderr, drawn from the library's progress(what, elapsed, total) calls:
    opened on the first call, closed when elapsed reaches total (or by close() on an error)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.bar = None
        self.task = None

    def __call__(self, what: str, elapsed: float, total: float) -> None:
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


@click.command("audit")
@click.argument("pids", nargs=-1, type=click.IntRange(min=1), metavar="[PID]...")
@click.option("--children", is_flag=True, help="Audit the whole tree under each PID (a launcher: torchrun, srun, "
              "mpirun): one row per rank.")
@click.option("--name", "names", multiple=True, metavar="PATTERN",
              help="Processes whose command name matches (shell glob; a plain word matches as a substring). "
                   "Repeatable.")
@click.option("--ranks", is_flag=True,
              help="Every process whose environment names a local rank (LOCAL_RANK, SLURM_LOCALID, "
                   "OMPI_COMM_WORLD_LOCAL_RANK...): this machine's training ranks; none running is an empty report.")
@format_option("text", "json", "prometheus")
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
@click.option("--mappings", "per_mapping", is_flag=True,
              help="Also list each mapping: address, resident size, kind, policy, pages per node, and pages "
                   "off the nodes its policy names.")
@click.option("--min-size", default="1M", show_default=True, metavar="SIZE",
              help="With --mappings: fold mappings smaller than this into one line (0: list all).")
@click.pass_obj
def audit_cmd(
    app: App,
    pids: tuple[int, ...],
    children: bool,
    names: tuple[str, ...],
    ranks: bool,
    fmt: str,
    watch: bool,
    interval: float,
    count: int,
    sample: float,
    remote_warn: float,
    remote_misplaced: float,
    slow_tier_warn: float,
    per_mapping: bool,
    min_size: str,
) -> None:
    """Show where running processes really are: threads and CPUs, memory per NUMA node (anon, file,
    heap, stack, shm, hugetlb), memory policies, the GPU they use, the remote and slow-tier shares,
    a verdict (ok / warning / misplaced) and the exact fix (numatune launch, numactl, migratepages,
    taskset).

    With --mappings, each mapping's placement against its own memory policy (after mbind/set_mempolicy
    from inside the process, e.g. numatune.placement arenas).

    With --children on a launcher (torchrun, srun, mpirun), one row per local rank.
    """
    prefetch = prefetch_numa_maps(app.host, pids) if pids and not children and not watch and not sample else None
    from numatune.analysis.locality import Thresholds

    if not pids and not names and not ranks:
        raise click.UsageError("give at least one PID, --name PATTERN or --ranks")
    if children and not pids:
        raise click.UsageError("--children needs the launcher's PID")
    if watch and fmt != "text":
        raise click.UsageError("--watch is a live table; it cannot be combined with --json/--format")
    if per_mapping and watch:
        raise click.UsageError("--mappings cannot be combined with --watch")
    if per_mapping and fmt == "prometheus":
        raise click.UsageError("--mappings has no prometheus form; use --json")
    min_bytes = 0
    if per_mapping:
        from numatune.commands.plan_memory import parse_size

        min_bytes = parse_size(min_size, "--min-size")
    try:
        thresholds = Thresholds(remote_warn, remote_misplaced, slow_tier_warn)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    run = AuditRun(app.host, pids, children, names, thresholds, mappings=per_mapping, ranks=ranks)
    if watch:
        _watch(app, run, interval, count, sample)
        return
    prefetched = None
    if prefetch is not None:
        prefetch[0].join()
        prefetched = prefetch[1]
    bar = _SampleBar(app) if fmt == "text" else None
    try:
        audits, job, notes, helpers = run.run(sample, progress=bar, prefetched=prefetched)
    finally:
        if bar is not None:
            bar.close()
    if fmt in ("json", "prometheus"):
        from numatune.commands.inspect import audit_doc

        doc = audit_doc(run, audits, job, notes, thresholds, min_size=min_bytes)
        if fmt == "json":
            app.echo_json(doc)
        else:
            from numatune.render.prometheus import audit_metrics

            echo(audit_metrics(doc))
        return
    from numatune.render.audit_text import render_audit

    console = app.console()
    console.print(render_audit(audits, run.topo, job=job is not None, helpers=helpers, min_size=min_bytes,
                               terminal=console.is_terminal))
    for note in notes:
        app.note(note)


def _watch(app: App, run: AuditRun, interval: float, count: int, sample: float) -> None:
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
