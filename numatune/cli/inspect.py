"""numatune inspect."""

from __future__ import annotations

import click

from numatune.cli._app import App
from numatune.cli._options import format_option, resolve_format


def build_inspect(app: App):  # noqa: ANN201 - returns (topology, matrix, findings)
    import os

    from numatune.analysis.paths import path_matrix
    from numatune.analysis.topology_findings import topology_findings
    from numatune.readers.pci import find_pci_ids
    from numatune.readers.topology import read_topology

    override = os.environ.get("NUMATUNE_PCI_IDS")
    pci_ids = (override or None) if override is not None else find_pci_ids()
    topo = read_topology(app.host, pci_ids=pci_ids)
    if topo.live:
        from numatune.live import enrich_topology

        topo = enrich_topology(topo)
    return topo, path_matrix(topo), topology_findings(topo)


@click.command("inspect")
@format_option("table", "json", "prometheus")
@click.pass_obj
def inspect_cmd(app: App, fmt: str, as_json: bool) -> None:
    """Show sockets, NUMA nodes, memory tiers and HMAT, GPUs, NICs, NVMe and CXL, and findings.

    Works the same on the live node and on a saved tree (--root DIR or a snapshot archive).
    Set NUMATUNE_PCI_IDS to a pci.ids file for device names ("" disables names).
    """
    fmt = resolve_format(fmt, as_json)
    topo, matrix, findings = build_inspect(app)
    if fmt == "json":
        from numatune.render.inspect_json import inspect_document

        app.echo_json(inspect_document(topo, matrix, findings))
        return
    if fmt == "prometheus":
        from numatune.render.prometheus import inspect_metrics

        click.echo(inspect_metrics(topo, findings), nl=False)
        return
    from numatune.render.inspect_text import render_inspect

    console = app.console()
    console.print(render_inspect(topo, matrix, findings))
    for s in topo.skipped:
        app.note(f"skipped {s.subject}: {s.reason}")
