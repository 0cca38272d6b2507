"""numatune diff."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import format_option


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
    from numatune.analysis.diff import diff_views, view
    from numatune.cli._reports import load_inspect
    from numatune.errors import ExitCode
    from numatune.render.diff_out import diff_document, render_diff_text

    doc_a, kind_a = load_inspect(a)
    doc_b, kind_b = load_inspect(b)
    diffs = diff_views(view(doc_a), view(doc_b), tuple(ignore))
    if fmt == "json":
        app.echo_json(diff_document((a, kind_a), (b, kind_b), diffs, ignore))
    else:
        click.echo(render_diff_text(a, b, diffs), nl=False)
    if diffs:
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))
