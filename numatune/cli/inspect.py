"""numatune inspect."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import format_option, write_output
from numatune.render.printable import echo


def build_inspect(app: App):  # noqa: ANN201 - returns (topology, matrix, findings)
    from numatune.commands.inspect import inspect_report
    from numatune.readers.pci import pci_ids_from_env

    return inspect_report(app.host, pci_ids_from_env())


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
    if fmt == "json" and output is None:
        from numatune.commands.inspect import inspect_json
        from numatune.readers.pci import pci_ids_from_env

        click.echo(inspect_json(app.host, pci_ids_from_env()))
        return
    topo, matrix, findings = build_inspect(app)
    if fmt == "text" and output is None:
        from numatune.render.inspect_text import print_inspect

        print_inspect(topo, matrix, findings, app.color)
    elif output is not None:
        write_output(output, _report_text(fmt, topo, matrix, findings))
    else:
        echo(_report_text(fmt, topo, matrix, findings))
    if fmt in ("text", "svg", "html"):
        for s in topo.skipped:
            app.note(f"skipped {s.subject}: {s.reason}")


def _report_text(fmt: str, topo, matrix, findings) -> str:  # noqa: ANN001
    """The report as the text of a file (ending in a newline); `text` without colour, 100 columns."""
    if fmt == "text":
        from numatune.render.inspect_text import inspect_file_text

        return inspect_file_text(topo, matrix, findings, 100)
    if fmt == "prometheus":
        from numatune.render.prometheus import inspect_metrics

        return inspect_metrics(topo, findings)
    from numatune.render.inspect_json import inspect_document

    doc = inspect_document(topo, matrix, findings)
    if fmt == "json":
        from numatune.render.envelope import dumps

        return dumps(doc) + "\n"
    from numatune.render.picture import sockets_of

    if fmt == "svg":
        from numatune.render.picture import render_svg

        return render_svg(doc, sockets_of(topo))
    from numatune.render.html_out import inspect_html

    return inspect_html(doc, sockets_of(topo))
