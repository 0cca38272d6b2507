"""The machine-readable reports as library calls: Host in, JSON text out.

Both the click commands and the click-free entry point (`numatune.entry`) call these, so a report
is built one way whichever path runs it. No click, no rich.
"""

from __future__ import annotations

from numatune.live.enrich import read_inspect_topology
from numatune.render.envelope import dumps
from numatune.system.host import Host

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    pass


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


