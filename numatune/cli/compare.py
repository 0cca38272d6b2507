"""numatune compare: run a command under each memory placement, interleaved, with statistics and page proof."""

from __future__ import annotations

import os
import sys

import click

from numatune.cli._app import App
from numatune.cli._options import format_option
from numatune.render.printable import echo


@click.command("compare", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--placements", "-p", default=None, metavar="LIST",
              help="Comma-separated: local, remote, interleave, cxl, cxl-spill, weighted, any launch --mem-policy, "
                   "or POLICY:NODES (bind:1). The first is the baseline. Default: local,remote, those of them that "
                   "exist here (a one-node machine runs local only, and says so).")
@click.option("--node", type=click.IntRange(min=0), help="Home node (CPUs and local memory); default: the GPU's "
                                                          "node (--gpu, rank) or the first node with CPUs.")
@click.option("--gpu", metavar="INDEX|BDF|UUID", help="The device whose node is home (as numatune launch --gpu).")
@click.option("--cpu-bind", default="node", show_default=True,
              metavar="node|socket|exclusive|core-complex|cores:N|none",
              help="CPUs for every placement (as numatune launch).")
@click.option("--runs", "-n", type=click.IntRange(min=1), default=5, show_default=True, help="Runs per placement.")
@click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True,
              help="Runs per placement before timing (not kept).")
@click.option("--metric", metavar="REGEX", help="Compare the number this regex finds in the output (first group, "
                                                "last match) instead of wall time.")
@click.option("--higher-is-better", is_flag=True, help="With --metric: the figure is a throughput (it/s).")
@click.option("--unit", default=None, help="Unit shown for --metric figures.")
@click.option("--seed", type=int, default=None, help="Seed for the per-round order (default: random).")
@click.option("--sample-interval", type=click.FloatRange(min=0.01), default=0.1, show_default=True,
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

    from numatune.errors import Unsupported, UsageError

    if not command:
        raise click.UsageError("no command given: numatune compare [OPTIONS] -- CMD [ARGS...]")
    if kw["higher_is_better"] and not kw["metric"]:
        raise click.UsageError("--higher-is-better needs --metric")
    from numatune.commands.compare import DEFAULT_PLACEMENTS

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
    host = app.host
    if not host.is_live:
        raise UsageError(f"compare runs a command on the live node, not on --root {app.root}")

    from numatune.commands.compare import CommandFailed, plan_placements, run_compare
    from numatune.live.bind import gather_facts, read_launch_devices, read_launch_topology
    from numatune.model.launch import LaunchOptions
    from numatune.plan.launch import normalize_bdf, parse_cpu_bind

    topo = read_launch_topology(host, node_kinds=True)
    node = kw["node"]
    devices = []
    if kw["gpu"] is not None or node is None:
        devices = read_launch_devices(host, topo, normalize_bdf(kw["gpu"]) if kw["gpu"] else None)
    if node is None and kw["gpu"] is None and not any(d.kind in ("gpu", "accelerator") for d in devices):
        allowed = os.sched_getaffinity(0)
        homes = [n.id for n in topo.nodes if set(n.cpus) & allowed]
        if not homes:
            raise Unsupported("no node with CPUs this process may use")
        node = homes[0]
        app.note(f"no GPU and no --node: home is node {node}, the first node with CPUs")
    base = LaunchOptions(gpu=kw["gpu"], node=node, cpu_bind=parse_cpu_bind(kw["cpu_bind"]))
    facts = gather_facts(host, os.environ, probe=True)
    placements, skipped = plan_placements(names, base, topo, devices, facts, command, skip_missing=not given)
    for note in skipped:
        app.note(note)
    names = [p.name for p in placements]
    for p in placements:
        for w in p.plan.warnings:
            app.warn(f"{p.name}: {w}")
    tty = sys.stderr.isatty() and kw["fmt"] != "json"

    def progress(label: str, step: int, total: int) -> None:
        if tty:
            app.progress(f"numatune: {label} ({step}/{total}) ...")

    try:
        runs = run_compare(host, placements, runs=kw["runs"], warmup=kw["warmup"], seed=kw["seed"], metric=metric,
                           interval=kw["sample_interval"], progress=progress)
    except CommandFailed as exc:
        if tty:
            app.progress(None)
        if exc.tail:
            click.echo("--- output tail ---\n" + exc.tail.rstrip("\n") + "\n---", err=True)
        raise
    if tty:
        app.progress(None)
    from numatune.analysis.compare import analyse
    from numatune.render.compare_out import compare_document, render_markdown, render_text
    from numatune.render.launch_text import summary_line

    result = analyse(runs, names, names[0], higher_is_better=kw["higher_is_better"],
                     expect={p.name: p.expect for p in placements})
    what = f"the figure matched by {kw['metric']!r}" if metric else "wall time"
    unit = kw["unit"] or ("" if metric else "s")
    doc = compare_document(host.label, list(command), kw["runs"], kw["warmup"],
                           {"what": what, "unit": unit, "higher_is_better": kw["higher_is_better"]}, result,
                           {p.name: summary_line(p.plan) for p in placements}, kw["seed"], skipped)
    if kw["fmt"] == "json":
        app.echo_json(doc)
    elif kw["emit"] == "markdown":
        echo(render_markdown(doc))
    else:
        echo(render_text(doc))
