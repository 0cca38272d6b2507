"""The `numatune.launch/1` JSON document (documented in docs/json-schemas.md)."""

from __future__ import annotations

from typing import Any

from numatune.cpulist import format_cpulist
from numatune.model.launch import LaunchPlan
from numatune.render.envelope import envelope


def launch_document(plan: LaunchPlan, source: str) -> dict[str, Any]:
    gpu = plan.gpu
    mem = plan.memory
    return envelope(
        "launch",
        source=source,
        rank={
            "local_rank": plan.rank.rank,
            "rank_source": plan.rank.rank_source,
            "local_size": plan.rank.local_size,
            "size_source": plan.rank.size_source,
        },
        gpu=None if gpu is None else {
            "bdf": gpu.bdf,
            "kind": gpu.kind,
            "pci_index": gpu.pci_index,
            "index": gpu.index,
            "uuid": gpu.uuid,
            "source": gpu.source,
            "ordering": gpu.ordering,
            "numa_node": gpu.numa_node,
            "inferred_node": gpu.inferred_node,
            "inferred_from": gpu.inferred_from,
        },
        node=plan.node,
        node_source=plan.node_source,
        cpu_bind={"mode": plan.cpu_mode, "cpus": list(plan.cpus), "cpulist": format_cpulist(plan.cpus),
                  "confined": plan.confined or None},
        cpu_kinds=[
            {"rank": k.rank, "role": k.role, "name": k.name, "cpus": list(k.cpus)} for k in plan.cpu_kinds
        ],
        memory={
            "policy": mem.policy,
            "mpol_mode": mem.mode,
            "nodes": list(mem.nodes),
            "weights": {str(n): w for n, w in mem.weights.items()} or None,
            "weights_source": mem.weights_source,
        },
        method=plan.method,
        argv=list(plan.argv),
        command=list(plan.command),
        env=dict(plan.env),
        unbound=plan.unbound,
        reasons=list(plan.reasons),
        warnings=list(plan.warnings),
    )
