"""numatune compare: run a command under each memory placement, interleaved, with statistics and page proof."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import MAX_NODES, Count, format_option, seconds


@click.command("compare", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--placements", "-p", default=None, metavar="LIST",
              help="Comma-separated: local, remote, interleave, cxl, cxl-spill, weighted, any launch --mem-policy, "
                   "or POLICY:NODES (bind:1). The first is the baseline. Default: local,remote, those of them that "
                   "exist here (a one-node machine runs local only, and says so).")
@click.option("--node", type=Count(0, MAX_NODES - 1), help="Home node (CPUs and local memory); default: the GPU's "
                                                          "node (--gpu, rank) or the first node with CPUs.")
@click.option("--gpu", metavar="INDEX|BDF|UUID", help="The device whose node is home (as numatune launch --gpu).")
@click.option("--cpu-bind", default="node", show_default=True,
              metavar="node|socket|exclusive|core-complex|cores:N|none",
              help="CPUs for every placement (as numatune launch).")
@click.option("--runs", "-n", type=Count(1, 10000), default=5, show_default=True, help="Runs per placement.")
@click.option("--warmup", type=Count(0, 10000), default=0, show_default=True,
              help="Runs per placement before timing (not kept).")
@click.option("--metric", metavar="REGEX", help="Compare the number this regex finds in the output (first group, "
                                                "last match) instead of wall time.")
@click.option("--higher-is-better", is_flag=True, help="With --metric: the figure is a throughput (it/s).")
@click.option("--unit", default=None, help="Unit shown for --metric figures.")
@click.option("--seed", type=Count(0, 2**64 - 1), default=None, help="Seed for the per-round order (default: random).")
@click.option("--sample-interval", type=seconds(0.01, 60.0), default=0.1, show_default=True,
              help="Seconds between numa_maps samples of each run.")
@format_option("text", "json")
@click.option("--emit", type=click.Choice(["text", "markdown"]), default="text", show_default=True,
              help="Text report, or a Markdown table for tickets.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def compare_cmd(app: App, command: tuple[str, ...], **kw) -> None:  # noqa: ANN003 - click passes the options
    """Run COMMAND under each placement: numatune compare [OPTIONS] -- CMD [ARGS...]

    Placements are numatune launch plans (the same code), run in interleaved rounds with the order shuffled
    per round; the pages of every run are sampled from /proc/PID/numa_maps and a run whose memory did not
    land where asked is flagged. A command that exits non-zero stops the comparison with its status.
    """
    import re

    from numatune.errors import UsageError

    if not command:
        raise click.UsageError("no command given: numatune compare [OPTIONS] -- CMD [ARGS...]")
    if kw["higher_is_better"] and not kw["metric"]:
        raise click.UsageError("--higher-is-better needs --metric")
    from numatune.commands.compare import DEFAULT_PLACEMENTS, compare_command

    given = kw["placements"] is not None
    names = [n.strip() for n in kw["placements"].split(",") if n.strip()] if given else list(DEFAULT_PLACEMENTS)
    if not names or len(set(names)) != len(names):
        raise UsageError(f"--placements {kw['placements']!r}: give distinct placement names")
    metric = None
    if kw["metric"]:
        try:
            metric = re.compile(kw["metric"])
        except re.error as exc:
            raise UsageError(f"--metric {kw['metric']!r}: {exc}") from exc
    compare_command(app, command, names, given, metric, kw)
