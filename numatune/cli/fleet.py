"""numatune fleet."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import deliver, format_option


@click.command("fleet")
@click.argument("reports", nargs=-1, metavar="[REPORT|DIR|-]...")
@click.option("--fail-on-outliers", is_flag=True, help="Exit 1 when any node differs from the reference group "
              "(or a report cannot be read).")
@format_option("text", "json", "html", output=True)
@click.pass_obj
def fleet_cmd(app: App, reports: tuple[str, ...], fail_on_outliers: bool, fmt: str, output: Path | None) -> None:
    """Group many nodes' `inspect --json` reports by topology; list outliers and findings per group.

    REPORT is a JSON file (one report, or several as JSON lines), a directory of *.json files, or
    `-` for stdin (also the default): JSON documents one after another, or pdsh/clush output
    whose lines start with "host: ". A node is named by the pdsh/clush prefix, else the file name.
    Reports are read as a stream: memory grows with the number of topologies, not of nodes.
    `--format html` (or `-o fleet.html`) writes one page with a row and a picture per group.
    """
    from numatune.commands.fleet import fleet_output
    from numatune.errors import ExitCode

    text, fleet, unreadable = fleet_output(reports, fmt)
    for where, why in unreadable:
        app.warn(f"{where}: {why}")
    if unreadable.unlisted:  # the rest were counted, not kept
        app.warn(f"{unreadable.unlisted:,} more unreadable inputs, counted, not listed")
    deliver(app, text, output, fmt)
    if fail_on_outliers and (fleet.outliers or unreadable):
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))
