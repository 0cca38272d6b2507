"""node-feature-discovery labels for the local feature source (a file in
/etc/kubernetes/node-feature-discovery/features.d/), so pods can select nodes by NUMA and GPU layout.

Format (NFD customization guide, "Local feature source"): one `<namespace>/<name>[=<value>]` per line,
`#` comments, at most 64 kB. Names use NFD's own `feature.node.kubernetes.io/` namespace, allowed
by nfd-master without -extra-label-ns. Names and values must be valid Kubernetes labels: the name
part and the value at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric.
"""

from __future__ import annotations

import re

from numatune.model.topology import Topology

PREFIX = "feature.node.kubernetes.io/numatune-"
MAX_FILE_BYTES = 64 * 1024
_LABEL = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def valid_label(name: str, value: str) -> bool:
    """Kubernetes' label syntax: prefix/name with name and value <= 63 [A-Za-z0-9._-] chars, alphanumeric ends."""
    prefix, _, short = name.rpartition("/")
    return (0 < len(short) <= 63 and bool(_LABEL.match(short)) and len(value) <= 63 and bool(_LABEL.match(value))
            and len(prefix) <= 253)


def nfd_labels(topo: Topology) -> dict[str, str]:
    """label -> value. GPU-NIC path is the worst, over the GPUs, of each GPU's best NIC path (PIX < PXB < PHB <
    NODE < SYS): a pod selecting `gpu-nic.path In (PIX,PXB)` gets a node where every GPU has a close NIC."""
    from numatune.model.paths import RANK, nearest_nic
    from numatune.plan.slurm import gpus_in_bus_order

    labels: dict[str, str] = {}
    cpu_nodes = [n for n in topo.nodes if n.cpus]
    if cpu_topology_known(topo):  # unknowns are left out, never written as 0 (see `omitted`)
        labels["numa.nodes"] = str(len(topo.nodes) if topo.numa_kernel else 1)
        labels["numa.cpu-nodes"] = str(len(cpu_nodes) if topo.numa_kernel else 1)
        if topo.cpu.sockets:
            labels["cpu.sockets"] = str(len(topo.cpu.sockets))
            labels["cpu.threads-per-core"] = str(topo.cpu.threads_per_core)
    gpus = gpus_in_bus_order(topo)
    labels["gpu.count"] = str(len(gpus))
    if gpus:
        per_node: dict[int, int] = {}
        for g in gpus:
            if g.node is not None:
                per_node[g.node] = per_node.get(g.node, 0) + 1
        for nid, count in sorted(per_node.items()):
            labels[f"gpu.node{nid}"] = str(count)
        if all(g.node is not None for g in gpus):  # balanced: the same number of GPUs on every node with CPUs
            counts = {per_node.get(n.id, 0) for n in cpu_nodes}
            labels["gpu.balanced"] = "true" if len(counts) == 1 else "false"
        if topo.nics:
            paths = [best[1] for g in gpus if (best := nearest_nic(topo, g))]
            if paths:
                worst = max(paths, key=lambda p: RANK[p])
                labels["gpu-nic.path"] = worst
                labels["gpu-nic.local"] = "true" if RANK[worst] < RANK["SYS"] else "false"
    cxl_nodes = [n for n in topo.nodes if n.kind == "cxl"]
    if cxl_nodes:
        kib = sum(n.memory_total_kib or 0 for n in cxl_nodes)
        labels["cxl.nodes"] = str(len(cxl_nodes))
        labels["cxl.capacity-mib"] = str(kib // 1024)
        tiers = sorted({n.tier for n in cxl_nodes if n.tier is not None})
        dram_tiers = sorted({n.tier for n in cpu_nodes if n.tier is not None})
        if tiers:
            labels["cxl.tier"] = "-".join(map(str, tiers))
            labels["cxl.own-tier"] = "true" if not set(tiers) & set(dram_tiers) else "false"
    return {PREFIX + k: v for k, v in labels.items()}


def cpu_topology_known(topo: Topology) -> bool:
    """Whether the tree says anything about CPUs (a tree of PCI or KFD files only does not)."""
    return any(c.online for c in topo.cpus)


def omitted(topo: Topology) -> list[str]:
    """Why labels a node would normally carry are not written (said as comments in the file)."""
    if not cpu_topology_known(topo):
        return ["no CPU topology in this tree (no online CPUs under /sys/devices/system/cpu): numa.* and cpu.* "
                "labels are not written"]
    if not topo.cpu.sockets:
        return ["no CPU package ids in this tree: cpu.sockets and cpu.threads-per-core are not written"]
    return []


def features_file(labels: dict[str, str], source: str, notes: list[str] | None = None) -> str:
    lines = [f"# node-feature-discovery local features written by numatune emit nfd for {source}",
             "# install as /etc/kubernetes/node-feature-discovery/features.d/numatune (write .numatune, then rename)"]
    lines += [f"# note: {n}" for n in notes or ()]
    lines += [f"{k}={v}" for k, v in labels.items()]
    return "\n".join(lines) + "\n"
