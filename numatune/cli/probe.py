"""numatune probe: measured latency and bandwidth from every initiator node to every memory node."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import MAX_COUNT, Count, Size, format_option, seconds

MAX_BUDGET = 3600.0  # an hour: longer is a mistyped figure, not a measurement plan


def _nodes(text: str | None, flag: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    from numatune.cpulist import parse_cpulist
    from numatune.errors import UsageError

    try:
        nodes = tuple(sorted(parse_cpulist(text)))
    except ValueError as exc:
        raise UsageError(f"{flag} {text!r}: expected a node list like 0,2 or 0-3") from exc
    if not nodes:
        raise UsageError(f"{flag} is empty")
    return nodes


@click.command("probe")
@click.option("--nodes", metavar="LIST", help="Initiator nodes (rows; nodes with CPUs). Default: all.")
@click.option("--targets", metavar="LIST", help="Memory nodes (columns; CPU-less nodes included). Default: all.")
@click.option("--size", type=Size(min=1), metavar="SIZE",
              help="Buffer size (256M, 1.5G: as every size option). Default: 4x the last-level and memory-side "
                   "caches, at least 64M.")
@click.option("--time-budget", type=seconds(0.1, MAX_BUDGET), metavar="SECONDS",
              help="Time for the whole matrix, set-up included (a pair that cannot be set up in its share is "
                   "skipped, saying why). Default: 5 s per pair, at most 30 s.")
@click.option("--threads", type=Count(1, MAX_COUNT), help="Bandwidth threads per initiator (default: one per core).")
@click.option("--samples", type=Count(2, 100), default=5, show_default=True,
              help="Latency samples kept per pair (one more is run first and dropped).")
@click.option("--gpu", is_flag=True, help="Also measure host↔GPU copy bandwidth per node (needs a CUDA runtime).")
@format_option("text", "json")
@click.pass_obj
def probe_cmd(app: App, **kw) -> None:  # noqa: ANN003 - click passes the options
    """Measure idle latency and read/copy bandwidth from each node's CPUs to each memory node.

    Every buffer is bound to its node with mbind, first-touched by the pinned thread that uses it and
    checked page by page (move_pages) before it is timed. SLIT and HMAT figures are shown beside the
    measurement. Unprivileged: hardware prefetchers stay on, so the chase uses random order.
    """
    from numatune.commands.probe import probe_command
    from numatune.model.probe import ProbeOptions

    opts = ProbeOptions(
        initiators=_nodes(kw["nodes"], "--nodes"),
        targets=_nodes(kw["targets"], "--targets"),
        size=kw["size"],
        time_budget=kw["time_budget"],
        threads=kw["threads"],
        samples=kw["samples"],
    )
    host = app.host
    if not host.is_live:
        from numatune.errors import UsageError

        raise UsageError(f"probe measures the live node, not a saved root ({app.root})",
                         hint="run numatune probe on the machine itself")
    probe_command(app, opts, kw["gpu"], kw["fmt"])
