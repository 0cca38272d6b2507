"""The `numatune.inspect/4` JSON document (documented in docs/json-schemas.md)."""

from __future__ import annotations

from numatune.model.findings import Finding
from numatune.model.gpumem import GpuMemoryLayout, gpu_memory_layout
from numatune.model.paths import LEGEND, PathMatrix, fabric_label
from numatune.model.topology import PciDevice, Topology
from numatune.plan.dra import DeviceAttributes, standard_attributes
from numatune.render.envelope import envelope
from numatune.render.jsonable import to_jsonable

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    from typing import Any



def device_json(d: PciDevice) -> dict[str, Any]:
    return {
        "bdf": d.bdf,
        "kind": d.kind,
        "class": f"0x{d.class_code:06x}",
        "vendor_id": f"0x{d.vendor_id:04x}" if d.vendor_id is not None else None,
        "device_id": f"0x{d.device_id:04x}" if d.device_id is not None else None,
        "vendor_name": d.vendor_name,
        "device_name": d.device_name,
        "numa_node": d.numa_node,
        "numa_node_state": d.numa_state,
        "inferred_node": d.inferred_node,
        "inferred_from": d.inferred_from,
        "local_cpus": list(d.local_cpus),
        "driver": d.driver,
        "host_bridge": d.host_bridge,
        "link": to_jsonable(d.link),
        "netdevs": list(d.netdevs),
        "rdma": list(d.rdma),
        "nvme": list(d.nvme),
        "nvidia": to_jsonable(d.nvidia),
        "amd_kfd_node": d.amd_kfd_node,
        "kfd_cpu_agent": d.kfd_cpu_agent,
        "memory_node": d.memory_node,
        "memory_node_from": d.memory_node_from,
        "placeholder_nodes": list(d.placeholder_nodes),
        "sysfs_path": d.path or None,
    }


def gpu_memory_json(layout: GpuMemoryLayout) -> dict[str, Any]:
    """The machine's GPU-memory mode and each GPU's CPU node and memory node (`gpu_memory` of inspect)."""
    return {
        "mode": layout.mode,
        "mode_evidence": layout.mode_evidence,
        "clustering": layout.clustering,
        "nodes_per_socket": {str(p): list(ns) for p, ns in layout.nodes_per_socket.items()},
        "gpus": [to_jsonable(g) for g in layout.gpus],
    }


def dra_json(a: DeviceAttributes) -> dict[str, Any]:
    """A device's DRA standard attributes: both numaNode forms, and why any is not published."""
    return {"attributes": a.attributes("scalar"), "numa_node_list": list(a.numa_nodes) if a.numa_nodes else None,
            "omitted": {name: why for name, why in a.omitted}}


def _with_dra(topo: Topology) -> list[dict[str, Any]]:
    dra = {a.bdf: a for a in standard_attributes(topo)}
    out = []
    for d in topo.devices:
        doc = device_json(d)
        a = dra.get(d.bdf.lower())
        doc["dra"] = dra_json(a) if a is not None else None
        out.append(doc)
    return out


def inspect_document(topo: Topology, matrix: PathMatrix, findings: list[Finding]) -> dict[str, Any]:
    label_of = {bdf.lower(): label for bdf, label in zip(matrix.devices, matrix.labels, strict=True)}
    names = {n.id: str(n.id) for n in topo.nodes}  # one key string a node for N^2 distances, not one a distance
    return envelope(
        "inspect",
        source=topo.source,
        live=topo.live,
        cpu=to_jsonable(topo.cpu),
        cpu_kinds=to_jsonable(topo.cpu_kinds),
        numa_kernel=topo.numa_kernel,
        nodes=[
            {
                "id": n.id,
                "cpus": list(n.cpus),
                "memory_total_kib": n.memory_total_kib,
                "memory_free_kib": n.memory_free_kib,
                "kind": n.kind,
                "kind_evidence": n.kind_evidence,
                "distances": dict(zip(map(names.get, n.distances, map(str, n.distances)), n.distances.values(),
                                      strict=True)),
                "tier": n.tier,
                "hmat": to_jsonable(n.hmat),
                "memory_side_caches": to_jsonable(n.memory_side_caches),
                "hugepages": to_jsonable(n.hugepages),
                "interleave_weight": n.interleave_weight,
                "has_normal_memory": n.has_normal_memory,
                "generic_initiator": n.generic_initiator,
                "gpu": n.gpu,
                "mig_placeholder": n.mig_placeholder,
            }
            for n in topo.nodes
        ],
        memory_tiers={str(k): list(v) for k, v in sorted(topo.memory_tiers.items())},
        devices=_with_dra(topo),
        path_matrix={
            "legend": LEGEND,
            "devices": list(matrix.devices),
            "labels": list(matrix.labels),
            "names": list(matrix.legend),
            "order_note": matrix.order_note,
            "cells": [list(row) for row in matrix.cells],
            "numa_nodes": list(matrix.nodes),
            "cpu_affinity": [list(c) for c in matrix.local_cpus],
            "links": [dict(to_jsonable(x), label=fabric_label(x)) for x in matrix.links],
            "nvswitch": [dict(to_jsonable(m), label=label_of[m.bdf.lower()]) for m in matrix.nvswitch],
            "cells_note": matrix.cells_note,
            "nvlink": {"state": matrix.nvlink, "note": matrix.nvlink_note},
        },
        gpu_fabric={
            "driver_version": topo.fabric.driver_version,
            "peer_memory": topo.fabric.peer_memory,
            "acs": dict(topo.fabric.acs),
            "nvml_gpus": to_jsonable(topo.fabric.nvml_gpus),
        },
        gpu_memory=gpu_memory_json(gpu_memory_layout(topo)),
        cxl=to_jsonable(topo.cxl),
        settings=to_jsonable(topo.settings),
        findings=to_jsonable(findings),
        skipped=to_jsonable(topo.skipped),
    )
