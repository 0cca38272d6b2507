"""The `numatune.launch/2` JSON document (documented in docs/json-schemas.md)."""

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
        nic=None if plan.nic is None else {
            "bdf": plan.nic.bdf,
            "rdma": plan.nic.rdma,
            "netdev": plan.nic.netdev,
            "path": plan.nic.path,
            "source": plan.nic.source,
            "shared_with": list(plan.nic.shared_with),
        },
        torchrun=None if plan.torch is None else {
            "mode": plan.torch.mode,
            "node": plan.torch.node,
            "cpus": list(plan.torch.cpus),
            "same": plan.torch.same,
            "error": plan.torch.error,
            "because": list(plan.torch.because),
        },
        spread=None if plan.spread is None else {
            "nodes": list(plan.spread.nodes),
            "ranks": plan.spread.ranks,
            "node": plan.spread.nodes[plan.spread.index],
            "reason": plan.spread.reason,
        },
        clusters=None if plan.clusters is None else {
            "clustering": plan.clusters.clustering,
            "socket": plan.clusters.socket,
            "nodes": list(plan.clusters.nodes),
            "ranks": plan.clusters.ranks,
            "cores": plan.clusters.cores,
            "socket_cores": plan.clusters.socket_cores,
            "memory_kib": plan.clusters.memory_kib,
            "socket_memory_kib": plan.clusters.socket_memory_kib,
            "options": list(plan.clusters.options),
            "reason": plan.clusters.reason,
        },
        method=plan.method,
        argv=list(plan.argv),
        command=list(plan.command),
        env=dict(plan.env),
        unbound=plan.unbound,
        reasons=list(plan.reasons),
        warnings=list(plan.warnings),
        notes=list(plan.notes),
    )
