"""numatune fleet."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import Count, deliver, format_option

EMITS = ("slurm-topology", "slurm-topology-yaml", "kueue", "labels")
# What an --emit writes, and the -o suffixes that name another format (so `-o topology.yaml` with the .conf
# emit is a usage error, as a suffix that contradicts --format is for every report).
EMIT_SUFFIXES = {"slurm-topology": (".conf", ""), "slurm-topology-yaml": (".yaml", ".yml"),
                 "kueue": (".yaml", ".yml"), "labels": (".txt", ".labels", "")}


def _emit_output(func):  # noqa: ANN001, ANN201 - click decorator
    """With --emit, -o names the emitted file (topology.conf, topology.yaml ...), not a report format: it is
    taken from the format option's suffix rule and checked against the emit's own suffixes."""
    @functools.wraps(func)
    def command(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        emit, output = kwargs.get("emit"), kwargs.get("output")
        kwargs["emit_output"] = None
        if emit is not None and output is not None:
            from numatune.errors import UsageError

            allowed = EMIT_SUFFIXES[emit]
            if output.suffix.lower() not in allowed and (output.suffix.lower() in (".conf", ".yaml", ".yml", ".json",
                                                                                   ".html", ".htm", ".svg")):
                raise UsageError(f"--output {output}: the suffix {output.suffix!r} is not what --emit {emit} writes "
                                 f"({', '.join(s for s in allowed if s) or 'no suffix'})")
            kwargs["emit_output"], kwargs["output"] = output, None
        return func(*args, **kwargs)
    return command


@click.command("fleet")
@click.argument("reports", nargs=-1, metavar="[REPORT|DIR|-]...")
@click.option("--fail-on-outliers", is_flag=True, help="Exit 1 when any node differs from the reference group "
              "(or a report cannot be read).")
@click.option("--emit", type=click.Choice(EMITS), default=None,
              help="Write scheduler configuration from the nodes' NVLink domains instead of the report: Slurm "
                   "topology.conf (topology/block), topology.yaml (Slurm 25.05+), a Kueue Topology and "
                   "ResourceFlavor, or node labels (NODE key=value ...).")
@click.option("--block-size", type=Count(1, 1 << 20), default=None, metavar="N",
              help="With --emit: the base block size [default: the smallest domain's healthy nodes]; domains with "
                   "fewer healthy nodes are left out and named.")
@click.option("--check-topology", "check_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Compare a topology.conf or topology.yaml with the reports: exit 1 naming every "
                                   "node whose block no longer matches its NVLink domain, every unhealthy node "
                                   "still in a block, every healthy node missing.")
@_emit_output
@format_option("text", "json", "html", output=True)
@click.pass_obj
def fleet_cmd(app: App, reports: tuple[str, ...], fail_on_outliers: bool, emit: str | None, block_size: int | None,
              check_file: Path | None, fmt: str, output: Path | None, emit_output: Path | None) -> None:
    """Group many nodes' `inspect --json` reports by topology; list outliers and findings per group.

    REPORT is a JSON file (one report, or several as JSON lines), a directory of *.json files, or
    `-` for stdin (also the default): JSON documents one after another, or pdsh/clush output
    whose lines start with "host: ". A node is named by the pdsh/clush prefix, else the file name.
    Reports are read as a stream: memory grows with the number of topologies, not of nodes.
    `--format html` (or `-o fleet.html`) writes one page with a row and a picture per group.
    """
    from numatune.errors import ExitCode, UsageError

    if emit is not None or check_file is not None:
        if emit is not None and check_file is not None:
            raise UsageError("--emit and --check-topology: give one")
        if emit is not None and fmt != "text":
            raise UsageError(f"--emit {emit} writes its own format: leave --format/--json out")
        if block_size is not None and emit is None:
            raise UsageError("--block-size goes with --emit")
        _fabric_cmd(app, reports, emit, block_size, check_file, fmt, output or emit_output)
        return
    if block_size is not None:
        raise UsageError("--block-size goes with --emit")
    from numatune.commands.fleet import fleet_output

    text, fleet, unreadable = fleet_output(reports, fmt)
    for where, why in unreadable:
        app.warn(f"{where}: {why}")
    if unreadable.unlisted:  # the rest were counted, not kept
        app.warn(f"{unreadable.unlisted:,} more unreadable inputs, counted, not listed")
    deliver(app, text, output, fmt)
    if fail_on_outliers and (fleet.outliers or unreadable):
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))


def _fabric_cmd(app: App, reports: tuple[str, ...], emit: str | None, block_size: int | None, check_file: Path | None,
                fmt: str, output: Path | None) -> None:
    from numatune.commands import fleet as command
    from numatune.errors import ExitCode

    if emit is not None:
        text, unreadable = command.emit_output(reports, emit, block_size)
        mismatches = 0
    else:
        if fmt == "html":
            from numatune.errors import UsageError

            raise UsageError("--check-topology writes text or json")
        text, mismatches, unreadable = command.check_topology_output(reports, str(check_file), fmt)
    for where, why in unreadable:
        app.warn(f"{where}: {why}")
    deliver(app, text, output, emit or fmt)
    if mismatches:
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))
