"""numatune inspect."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import format_option


@click.command("inspect")
@format_option("text", "json", "prometheus", "svg", "html", output=True)
@click.pass_obj
def inspect_cmd(app: App, fmt: str, output: Path | None) -> None:
    """Show sockets, NUMA nodes, memory tiers and HMAT, GPUs, NICs, NVMe and CXL, and findings.

    Works the same on the live node and on a saved tree (--root DIR or a snapshot archive).
    Set NUMATUNE_PCI_IDS to a pci.ids file for device names ("" disables names).
    `--format svg` draws the node (`-o node.svg` does the same); `--format html` writes one
    self-contained page with the picture, the tables and the findings.
    """
    from numatune.commands.inspect import inspect_command

    inspect_command(app, fmt, output)
