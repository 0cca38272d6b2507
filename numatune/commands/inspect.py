"""The machine-readable reports as library calls: Host in, JSON text out.

Both the click commands and the click-free entry point (`numatune.entry`) call these, so a report
is built one way whichever path runs it. No click; rich only for the terminal view of `inspect`.
"""

from __future__ import annotations

from numatune.live.enrich import read_inspect_topology
from numatune.render.envelope import dumps
from numatune.system.host import Host

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    from pathlib import Path

    from numatune.model.findings import Finding
    from numatune.model.paths import PathMatrix
    from numatune.model.topology import Topology


def inspect_report(host: Host, pci_ids: str | None):  # noqa: ANN201 - (topology, path matrix, findings)
    from numatune.analysis.topology_findings import topology_findings
    from numatune.model.paths import path_matrix

    topo = read_inspect_topology(host, pci_ids)
    return topo, path_matrix(topo), topology_findings(topo)


def inspect_json(host: Host, pci_ids: str | None) -> str:
    from numatune.render.inspect_json import inspect_document

    return dumps(inspect_document(*inspect_report(host, pci_ids)))


def irq_report(host: Host):  # noqa: ANN201 - (topology, irq report)
    from numatune.readers.irqs import read_irq_report
    from numatune.readers.topology import read_topology

    topo = read_topology(host)
    return topo, read_irq_report(host, topo)


def irq_json(host: Host) -> str:
    from numatune.analysis.irq import irq_findings
    from numatune.render.irq_json import ROW_KEYS, irq_document

    topo, report = irq_report(host)
    return dumps(irq_document(topo, report, irq_findings(topo, report, frozenset())), ROW_KEYS)


def inspect_command(app, fmt: str, output: Path | None) -> None:  # noqa: ANN001 - the CLI's App
    """`numatune inspect`: the report on the terminal (rich, in colour), as text, JSON, Prometheus, SVG or
    HTML on standard output or into `output`; what could not be read is noted."""
    from numatune.readers.pci import pci_ids_from_env

    if fmt == "json" and output is None:
        from numatune.render.printable import echo

        echo(inspect_json(app.host, pci_ids_from_env()) + "\n")
        return
    topo, matrix, findings = inspect_report(app.host, pci_ids_from_env())
    if fmt == "text" and output is None:
        from numatune.render.inspect_text import print_inspect

        print_inspect(topo, matrix, findings, app.color)
    elif output is not None:
        from numatune.render.printable import printable
        from numatune.system.outfile import output_name, write_file

        write_file(output, printable(report_text(fmt, topo, matrix, findings)))
        app.note(f"wrote {output_name(output)} ({fmt})")  # as every -o (cli._options.deliver)
    else:
        from numatune.render.printable import echo

        echo(report_text(fmt, topo, matrix, findings))
    if fmt in ("text", "svg", "html"):
        for s in topo.skipped:
            app.note(f"skipped {s.subject}: {s.reason}")


def report_text(fmt: str, topo: Topology, matrix: PathMatrix, findings: list[Finding]) -> str:
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
        return dumps(doc) + "\n"
    from numatune.render.picture import sockets_of

    if fmt == "svg":
        from numatune.render.picture import render_svg

        return render_svg(doc, sockets_of(topo))
    from numatune.render.html_out import inspect_html

    return inspect_html(doc, sockets_of(topo))
