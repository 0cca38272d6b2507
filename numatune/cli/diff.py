"""numatune diff."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import format_option
from numatune.render.printable import echo


@click.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--ignore", "-i", multiple=True, metavar="WHAT",
              help="Leave out a category (cpu, numa, memory, distances, tiers, devices, kernel) or keys starting "
                   "with this text, e.g. 'kernel release' (repeatable).")
@format_option("text", "json")
@click.pass_obj
def diff_cmd(app: App, a: str, b: str, ignore: tuple[str, ...], fmt: str) -> None:
    """Compare two nodes: A and B are each a root directory, a snapshot archive or an inspect JSON report.

    Compares the node count, CPU lists, memory per node, distances, memory tiers, device placement
    (GPU, NIC, NVMe, CXL, accelerators and each GPU's nearest NIC) and the kernel version and
    settings. Use `/` for the live node. Exit status 0 when they match, 1 when they differ.
    """
    from numatune.commands.diff import diff_report
    from numatune.errors import ExitCode

    text, differ = diff_report(a, b, tuple(ignore), fmt)
    echo(text)
    if differ:
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))
