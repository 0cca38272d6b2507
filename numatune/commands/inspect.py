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
    from collections.abc import Sequence
    from typing import Any


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


def audit_json(host: Host, pids: Sequence[int]) -> str:
    """`audit PID... --json` with the default thresholds (the common, scripted case)."""
    from numatune.commands.audit import AuditRun, prefetch_numa_maps

    thread, prefetched = prefetch_numa_maps(host, tuple(pids))  # first: the kernel builds numa_maps meanwhile
    from numatune.analysis.locality import Thresholds

    run = AuditRun(host, tuple(pids), False, (), Thresholds())
    thread.join()
    audits, job, notes, _helpers = run.run(0, progress=None, prefetched=prefetched)
    return dumps(audit_doc(run, audits, job, notes, Thresholds()))


def audit_doc(run, audits, job, notes, thresholds, min_size: int = 0) -> dict[str, Any]:  # noqa: ANN001
    from numatune.render.audit_json import audit_document

    return audit_document(
        audits, source=run.topo.source, live=run.topo.live, job=job, notes=notes, min_size=min_size,
        thresholds={"remote_warning": thresholds.remote_warning, "remote_misplaced": thresholds.remote_misplaced,
                    "slow_tier_warning": thresholds.slow_tier_warning},
    )
