"""numatune inspect."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import format_option


def build_inspect(app: App):  # noqa: ANN201 - returns (topology, matrix, findings)
    from numatune.readers.pci import pci_ids_from_env
    from numatune.reports import inspect_report

    return inspect_report(app.host, pci_ids_from_env())


@click.command("inspect")
@format_option("text", "json", "prometheus")
@click.pass_obj
def inspect_cmd(app: App, fmt: str) -> None:
    """Show sockets, NUMA nodes, memory tiers and HMAT, GPUs, NICs, NVMe and CXL, and findings.

    Works the same on the live node and on a saved tree (--root DIR or a snapshot archive).
    Set NUMATUNE_PCI_IDS to a pci.ids file for device names ("" disables names).
    """
    if fmt == "json":
        from numatune.readers.pci import pci_ids_from_env
        from numatune.reports import inspect_json

        click.echo(inspect_json(app.host, pci_ids_from_env()))
        return
    topo, matrix, findings = build_inspect(app)
    if fmt == "prometheus":
        from numatune.render.prometheus import inspect_metrics

        click.echo(inspect_metrics(topo, findings), nl=False)
        return
    from numatune.render.inspect_text import render_inspect

    console = app.console()
    console.print(render_inspect(topo, matrix, findings))
    for s in topo.skipped:
        app.note(f"skipped {s.subject}: {s.reason}")
