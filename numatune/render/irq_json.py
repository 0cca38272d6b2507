"""JSON documents of `irq` (numatune.irq/1), `irq plan` (numatune.irq-plan/1) and `irq apply/restore`."""

from __future__ import annotations

from numatune.analysis.irq import locality, node_map, remote_counts
from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding
from numatune.model.irq import DeviceIrqs, Irq, IrqReport
from numatune.model.topology import Topology
from numatune.render.envelope import envelope
from numatune.render.jsonable import to_jsonable

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    from typing import Any

ROW_KEYS = ("irqs", "entries")  # written one IRQ per line (see numatune.render.envelope.dumps)


def _list(cpus: tuple[int, ...] | None) -> str | None:
    return None if cpus is None else format_cpulist(cpus)


def irq_json(irq: Irq, dev: DeviceIrqs, node_of: dict[int, int]) -> dict[str, Any]:
    per_node: dict[str, int] = {}
    for cpu, n in irq.per_cpu:
        key = str(node_of[cpu]) if cpu in node_of else "unknown"
        per_node[key] = per_node.get(key, 0) + n
    remote, total = remote_counts(irq, dev.node, node_of)
    return {
        "irq": irq.irq,
        "actions": list(irq.actions),
        "role": irq.role,
        "queue": irq.queue,
        "found_by": list(irq.found_by),
        "chip": irq.chip,
        "total": irq.total,
        "per_cpu": {str(cpu): n for cpu, n in irq.per_cpu},
        "per_node": per_node,
        "remote_share": (remote / total) if total and dev.node is not None and node_of else None,
        "smp_affinity": irq.smp_affinity,
        "smp_affinity_list": _list(irq.smp_affinity_list),
        "effective_affinity_list": _list(irq.effective_affinity_list),
        "affinity_hint": _list(irq.affinity_hint),
        "node": irq.node,
        "managed": irq.managed,
        "managed_evidence": irq.managed_evidence,
        "local": locality(irq, dev.node, node_of),
        "present": irq.present,
    }


def irq_document(topo: Topology, report: IrqReport, findings: list[Finding]) -> dict[str, Any]:
    node_of = node_map(topo)
    return envelope(
        "irq",
        source=report.source,
        live=report.live,
        has_interrupts=report.has_interrupts,
        has_proc_irq=report.has_proc_irq,
        interrupts_cpus=len(report.interrupts_cpus),
        isolated_cpus=format_cpulist(report.isolated_cpus),
        irqbalance={
            "running": report.irqbalance_running,
            "banned_cpus": _list(report.irqbalance_banned),
        },
        devices=[
            {
                "key": d.key,
                "bdf": d.bdf,
                "kind": d.kind,
                "label": d.label,
                "netdevs": list(d.netdevs),
                "rdma": list(d.rdma),
                "nvme": list(d.nvme),
                "driver": d.driver,
                "numa_node": d.node,
                "node_inferred": d.node_inferred,
                "in_sysfs": d.in_sysfs,
                "irqs": [irq_json(i, d, node_of) for i in d.irqs],
            }
            for d in report.devices
        ],
        findings=to_jsonable(findings),
        skipped=to_jsonable(report.skipped),
    )


def plan_document(plan, report: IrqReport, irqbalance: list[str], tuned: str) -> dict[str, Any]:  # noqa: ANN001
    return envelope(
        "irq-plan",
        source=report.source,
        entries=[
            {
                "irq": e.irq,
                "device": e.device,
                "label": e.label,
                "kind": e.kind,
                "numa_node": e.node,
                "actions": list(e.actions),
                "role": e.role,
                "current": _list(e.current),
                "target": _list(e.target),
                "action": e.action,
                "reason": e.reason,
            }
            for e in plan.entries
        ],
        reserved_cpus=format_cpulist(plan.reserved),
        isolated_cpus=format_cpulist(plan.isolated),
        free_cpus_by_node={str(k): format_cpulist(v) for k, v in plan.free_by_node.items()},
        rank_cpus={str(k): format_cpulist(v) for k, v in plan.rank_cpus.items()},
        notes=list(plan.notes),
        persistent={"irqbalance": irqbalance, "tuned": tuned},
    )


def apply_document(result, *, dry_run: bool, restore: bool = False) -> dict[str, Any]:  # noqa: ANN001
    return envelope(
        "irq-apply",
        operation="restore" if restore else "apply",
        dry_run=dry_run,
        root=result.root,
        state_file=result.state_file,
        undo=result.undo,
        applied=result.applied,
        unchanged=result.unchanged,
        skipped=[{"irq": irq, "reason": why} for irq, why in result.skipped],
        would_write=[
            {"irq": c.irq, "file": f"/proc/irq/{c.irq}/{c.file}", "value": c.text.strip(), "label": c.label}
            for c in result.planned
        ],
    )
