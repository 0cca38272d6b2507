"""The `numatune.audit/2` JSON document (documented in docs/json-schemas.md)."""

from __future__ import annotations

from numatune.model.process import MAX_LISTED_MAPPINGS, GpuUse, ProcessAudit, fold_mappings
from numatune.render.envelope import envelope

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    from typing import Any



def _nodes(d: dict[int, int]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(d.items())}


def _gpu(g: GpuUse | None) -> dict[str, Any] | None:
    if g is None:
        return None
    return {"bdf": g.bdf, "node": g.node, "source": g.source, "index": g.index, "label": g.label}


def mapping_placement(a: ProcessAudit, min_size: int) -> dict[str, Any]:
    """`processes[].mapping_placement` (`audit --mappings`): each mapping of at least `min_size`
    bytes, largest first, and the smaller ones folded (with those audit summed without keeping: past the
    MAX_LISTED_MAPPINGS largest)."""
    beyond = a.process.memory.mappings_beyond
    shown, (count, total, by_node, off) = fold_mappings(a.process.memory.by_mapping or (), min_size, beyond)
    return {
        "min_size": min_size,
        "limit": MAX_LISTED_MAPPINGS,
        "mappings": [
            {"start": f"{m.start:x}", "kind": m.kind, "name": m.name, "policy": m.policy,
             "page_size": m.page_size, "bytes": m.bytes, "pages_by_node": _nodes(m.pages),
             "off_policy_pages": m.off_policy_pages}
            for m in shown
        ],
        "smaller": {"mappings": count, "bytes": total, "bytes_by_node": _nodes(by_node), "off_policy_bytes": off,
                    "not_kept": beyond.mappings if beyond is not None else 0},
    }


def process_json(a: ProcessAudit, helpers: int | None = None, min_size: int = 0) -> dict[str, Any]:
    p, loc, c = a.process, a.locality, a.counters
    doc: dict[str, Any] = {
        "pid": p.pid,
        "command": list(p.cmdline),
        "comm": p.comm,
        "ppid": p.ppid,
        "state": p.state,
        "kernel_thread": p.kernel_thread,
        "rank": p.rank,
        "rank_source": p.rank_source,
        "threads": [
            {"tid": t.tid, "comm": t.comm, "cpu": t.cpu, "allowed_cpus": list(t.allowed_cpus)} for t in p.threads
        ],
        "cpus_allowed": list(p.cpus_allowed),
        "mems_allowed": list(p.mems_allowed),
        "cgroup": p.cgroup,
        "cpuset_cpus": list(p.cpuset_cpus) if p.cpuset_cpus is not None else None,
        "cpuset_mems": list(p.cpuset_mems) if p.cpuset_mems is not None else None,
        "memory_by_node": _nodes(p.memory.by_node),
        "memory_by_kind": {k: _nodes(v) for k, v in p.memory.by_kind.items()},
        "memory_total": p.memory.total,
        "mappings": p.memory.mappings,
        "policies": [{"policy": u.policy, "mappings": u.mappings, "bytes": u.bytes} for u in p.memory.policies],
        "home_nodes": list(loc.home_nodes),
        "home_source": loc.home_source,
        "remote_ratio": round(loc.remote_ratio, 6),
        "slow_tier_ratio": round(loc.slow_tier_ratio, 6),
        "remote_bytes": loc.remote_bytes,
        "slow_tier_bytes": loc.slow_tier_bytes,
        "threads_off_home": list(loc.threads_off_home),
        "late_binding": None if loc.late_binding is None else {
            "bound_cpus": list(loc.late_binding.bound_cpus),
            "bound_nodes": list(loc.late_binding.bound_nodes),
            "threads": list(loc.late_binding.threads),
            "old_cpus": list(loc.late_binding.old_cpus),
            "remote_bytes": loc.late_binding.remote_bytes,
            "remote_nodes": list(loc.late_binding.remote_nodes),
            "cause": loc.late_binding.cause,
            "fix": loc.late_binding.fix,
        },
        "access_counters": {
            "source": c.source,
            "values": {
                "local": c.local,
                "remote": c.remote,
                "by_node": _nodes(c.by_node),
                "remote_ratio": round(c.remote_ratio, 6) if c.remote_ratio is not None else None,
            },
            "events": list(c.events),
            "window_s": c.window_s,
            "notes": list(c.notes),
        },
        "memory_nodes": {str(n): {"kind": kind, "gpu": gpu} for n, (kind, gpu) in sorted(loc.node_kinds.items())},
        "pinned_host": None if loc.pinned is None else {
            "gpu_cpu_node": loc.pinned.gpu_cpu_node,
            "bytes_by_node": _nodes(loc.pinned.by_node),
            "devices": list(loc.pinned.devices),
            "off_node_bytes": loc.pinned.wrong_bytes,
            "off_nodes": list(loc.pinned.wrong_nodes),
            "cost": loc.pinned.cost,
            "how": loc.pinned.how,
            "chunks": [{"start": f"{m.start:x}", "bytes": m.bytes, "page_size": m.page_size,
                        "pages_by_node": _nodes(m.pages)} for m in loc.pinned.chunks],
            "chunk_count": loc.pinned.chunk_count,
            "host_cache_reuse": loc.pinned.cache_reuse,
            "h2d_gbps_by_node": {str(n): v for n, v in sorted(loc.pinned.h2d_gbps.items())},
        },
        "gpu_driver_memory": {d: _nodes(v) for d, v in p.memory.driver.items()},
        "gpu_driver_memory_inherited": None if not p.memory.inherited_driver else {
            "charged_to": a.rank_pid,
            "by_device": {d: _nodes(v) for d, v in p.memory.inherited_driver.items()},
        },
        "gpu_context": None if p.gpu_context is None else {
            "runtime": p.gpu_context.runtime, "evidence": p.gpu_context.evidence},
        "role": a.role,
        "rank_pid": a.process.pid if a.role == "rank" else a.rank_pid,
        "kind": a.place.kind if a.place is not None else None,
        "job": a.place.job if a.place is not None else None,
        "rank_inferred_from": a.place.inferred if a.place is not None and a.role == "rank" else None,
        "worker": None if a.worker is None else {
            "rank_pid": a.worker.rank_pid,
            "rank_cpus": list(a.worker.rank_cpus),
            "rank_nodes": None if a.worker.rank_nodes is None else list(a.worker.rank_nodes),
            "outside_cpus": list(a.worker.outside_cpus),
            "outside_nodes": list(a.worker.outside_nodes),
            "outside_bytes": a.worker.outside_bytes,
            "reason": a.worker.reason or None,
            "fix": a.worker.fix or None,
        },
        "gpu": _gpu(p.gpu),
        "gpus_open": [_gpu(g) for g in p.gpus_open],
        "verdict": loc.verdict,
        "reasons": list(loc.reasons),
        "fix": {
            "launch": loc.fix.launch,
            "numactl": loc.fix.numactl,
            "migratepages": loc.fix.migratepages,
            "taskset": loc.fix.taskset,
        },
        "notes": list(p.notes),
    }
    if helpers is not None:
        doc["helper_processes"] = helpers
    if p.memory.by_mapping is not None:
        doc["mapping_placement"] = mapping_placement(a, min_size)
    return doc


def audit_document(
    audits: list[ProcessAudit],
    *,
    source: str,
    live: bool,
    thresholds: dict[str, float],
    job: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    min_size: int = 0,
) -> dict[str, Any]:
    return envelope(
        "audit",
        source=source,
        live=live,
        thresholds=thresholds,
        processes=[process_json(a, min_size=min_size) for a in audits],
        job=job,
        notes=notes or [],
    )
