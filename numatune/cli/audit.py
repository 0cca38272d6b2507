"""numatune audit."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import MAX_COUNT, MAX_SAMPLE, PID, Count, Number, Size, format_option, seconds
from numatune.commands.audit import AuditRun, load_probe_h2d, make_thresholds, prefetch_numa_maps, run_audit


def _fraction(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Accept 0.2 or 20 (percent)."""
    if value < 0:
        raise click.BadParameter("must not be negative")
    return value / 100 if value > 1 else value


@click.command("audit")
@click.argument("pids", nargs=-1, type=PID, metavar="[PID]...")
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
@click.option("--interval", type=seconds(0.05, 3600.0), default=2.0, show_default=True, metavar="SECONDS",
              help="Refresh period of --watch.")
@click.option("--count", type=Count(0, MAX_COUNT), default=0, metavar="N",
              help="With --watch: stop after N refreshes (0: until Ctrl-C).")
@click.option("--sample", type=seconds(0.0, MAX_SAMPLE), default=0.0, metavar="SECONDS",
              help="Count local/remote DRAM loads (hardware counters) for this long (at most an hour); a "
                   "progress bar on a terminal's stderr.")
@click.option("--remote-warn", type=Number(0, 100), default=0.05, show_default=True, callback=_fraction,
              help="Remote share above which the verdict is 'warning' (fraction or percent).")
@click.option("--remote-misplaced", type=Number(0, 100), default=0.20, show_default=True, callback=_fraction,
              help="Remote share above which the verdict is 'misplaced'.")
@click.option("--slow-tier-warn", type=Number(0, 100), default=0.10, show_default=True, callback=_fraction,
              help="Share on CPU-less/CXL nodes, not asked for by a memory policy, that is a 'warning'.")
@click.option("--mappings", "per_mapping", is_flag=True,
              help="Also list each mapping: address, resident size, kind, policy, pages per node, and pages "
                   "off the nodes its policy names.")
@click.option("--min-size", type=Size(), default="1M", show_default=True, metavar="SIZE",
              help="With --mappings: fold mappings smaller than this into one line (0: list all).")
@click.option("--probe", "probe_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="A saved `numatune probe --gpu --json`: state what pinned chunks on the wrong node cost.")
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
    min_size: int,
    probe_file: str | None,
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
    min_bytes = min_size if per_mapping else 0
    try:
        thresholds = make_thresholds(remote_warn, remote_misplaced, slow_tier_warn)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    run_audit(app, AuditRun(app.host, pids, children, names, thresholds, mappings=per_mapping, ranks=ranks,
                               h2d=load_probe_h2d(probe_file) if probe_file else None), fmt,
              watch=watch, interval=interval, count=count, sample=sample, min_bytes=min_bytes, prefetch=prefetch)
