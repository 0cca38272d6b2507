"""Where each GPU's CPUs and memory are, and which memory mode the machine is in (pure).

Every tool built before 2024 took a GPU's NUMA node to be a node with CPUs and DRAM. On the machines of
2025-26 it is not:
- Grace Hopper / Grace Blackwell in NUMA mode: the GPU's HBM is a CPU-less node (plus seven empty MIG
  placeholder nodes per GPU); NVML's node id is that HBM node and sysfs often says -1. The CPUs and the
  default memory of a rank belong on the Grace node nearest the HBM node.
- The same machines in CDMM mode: no GPU-memory nodes at all; the same placement must come out.
- APUs (MI300A): the GPU's node is a CPU node and "GPU memory" is that node's memory.
- Sub-NUMA clustering (SNC-2/3/4, NPS2/4): several CPU nodes per socket; binding memory to the GPU's one
  node cuts bandwidth and capacity to that cluster's share.
`gpu_memory_layout` says each of these once, for inspect, launch and emit.
"""

from __future__ import annotations

from numatune.model import order
from numatune.model._record import record
from numatune.model.topology import MEMORY_FROM_PCI, PciDevice, Topology

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

GRACE_PART = "0xd4f"  # Arm Neoverse V2, the Grace CPU's core (MIDR part)


@record
class GpuHome:
    """One GPU's CPU node and memory node, kept apart (they differ on Grace in NUMA mode)."""

    bdf: str
    label: str  # GPU0.. (numatune's numbering)
    cpu_node: int | None  # the node with CPUs to run its rank on
    cpu_node_from: str  # how it was found
    memory_node: int | None  # the node of its own memory: the HBM node (NUMA mode), its node (APU), else None
    memory_node_from: str | None
    placeholder_nodes: tuple[int, ...]  # empty MIG placeholder nodes that belong to it
    sysfs_node: int | None  # the PCI function's numa_node (None for -1)
    nvml_node: int | None  # NVML's numa node id, when the record has one
    same_socket: tuple[int, ...]  # the CPU nodes of its socket, its CPU node first, then by SLIT distance
    notes: tuple[str, ...] = ()  # where sysfs or NVML name a CPU-less node, and what is used instead


@record
class GpuMemoryLayout:
    mode: str  # "numa" | "cdmm" | "apu" | "discrete" | "none"
    mode_evidence: str
    clustering: str | None  # "SNC-4", "NPS4", "2 nodes per socket"; None with one CPU node per socket
    nodes_per_socket: Mapping[int, tuple[int, ...]]  # package id -> its nodes with CPUs
    gpus: tuple[GpuHome, ...] = ()

    def home(self, bdf: str) -> GpuHome | None:
        return next((g for g in self.gpus if g.bdf == bdf.lower()), None)


def nearest_cpu_node(topo: Topology, node_id: int) -> int | None:
    """The node with CPUs nearest (SLIT) to `node_id`; ties to the lowest id; itself when it has CPUs."""
    here = topo.node(node_id)
    if here is not None and here.cpus:
        return node_id
    dists = [(n.distances.get(node_id), n.id) for n in topo.nodes if n.cpus and n.distances.get(node_id) is not None]
    return min(dists)[1] if dists else None


def sockets(topo: Topology) -> dict[int, tuple[int, ...]]:
    """Package id -> the nodes with CPUs whose CPUs are on it (a node's socket: its first CPU's package)."""
    package = {c.id: c.package for c in topo.cpus}
    out: dict[int, list[int]] = {}
    for n in topo.nodes:
        if n.cpus and package.get(n.cpus[0]) is not None:
            out.setdefault(package[n.cpus[0]], []).append(n.id)
    return {p: tuple(ns) for p, ns in sorted(out.items())}


def same_socket_nodes(topo: Topology, node_id: int) -> tuple[int, ...]:
    """`node_id` then the other CPU nodes of its socket, nearest (SLIT) first; (node_id,) when unknown."""
    here = topo.node(node_id)
    for nodes in sockets(topo).values():
        if node_id in nodes and here is not None:
            rest = sorted((n for n in nodes if n != node_id), key=lambda n: (here.distances.get(n, 1 << 30), n))
            return (node_id, *rest)
    return (node_id,)


#: First-generation EPYC (Naples, Zen 1: the 7001 series, 7251 to 7601 and their P parts, and the embedded 3001
#: series): each die is its own NUMA node, always; the NPS (nodes per socket) BIOS setting came with Rome.
NAPLES = r"\bEPYC\s+[37]\d\d1P?\b"


def naples(model: str) -> bool:
    """The CPU model names a first-generation EPYC. `re` is imported here, on AMD's multi-node sockets only: the
    report paths start without it (tests/test_start_up.py)."""
    import re

    return re.search(NAPLES, model) is not None


def clustering(topo: Topology) -> tuple[str | None, dict[int, tuple[int, ...]]]:
    """(SNC-N / NPSN / "N nodes per socket", or None; package id -> its nodes with CPUs)."""
    per_socket = sockets(topo)
    return _clustering(topo, per_socket), per_socket


def _clustering(topo: Topology, per_socket: dict[int, tuple[int, ...]]) -> str | None:
    """SNC-N / NPSN / "N nodes per socket" where a socket's CPU nodes are nearer each other than a remote node
    (SLIT 11-19: SNC and NPS give 11-12, Naples's dies 16). A socket whose nodes are 10 apart (a firmware that
    left the SLIT flat) or 20 and more (a VM's vNUMA: QEMU puts all its nodes on one socket) is no clustering."""
    counts = {len(v) for v in per_socket.values()}
    if not counts or max(counts) < 2:
        return None
    by_id = {n.id: n for n in topo.nodes}
    intra = {by_id[a].distances.get(b) for nodes in per_socket.values() for a in nodes for b in nodes
             if a != b and a in by_id}
    intra.discard(None)
    if intra and not all(10 < d < 20 for d in intra):
        return None
    n = max(counts)
    vendor = (topo.cpu.vendor or "").lower()
    if "intel" in vendor:
        return f"SNC-{n}"
    if "amd" in vendor:
        if naples(topo.cpu.model or ""):  # one node per die, fixed: Naples has no NPS setting
            return f"{n} dies per socket (EPYC Naples)"
        return f"NPS{n}"
    return f"{n} nodes per socket"


def _home(topo: Topology, d: PciDevice, label: str, nvml: dict[str, int | None]) -> GpuHome:
    notes = []
    node = d.node
    cpu_node, how = None, "unknown: no node from sysfs, the driver or NVML"
    if node is not None:
        cpu_node = nearest_cpu_node(topo, node)
        how = (f"numa_node of {d.bdf}" if d.numa_node is not None else f"inferred from {d.inferred_from}")
        if cpu_node is not None and cpu_node != node:
            n = topo.node(node)
            what = "its GPU memory" if n is not None and n.gpu == d.bdf.lower() else "CPU-less"
            notes.append(f"sysfs numa_node {node} of {d.bdf} is a node without CPUs ({what}): its CPUs go to "
                         f"node {cpu_node}, the nearest node with CPUs")
            how = f"node {node}'s nearest node with CPUs (SLIT)"
    nv = nvml.get(d.bdf.lower())
    if nv is not None and cpu_node is not None and nv != cpu_node:
        n = topo.node(nv)
        if n is not None and not n.cpus:
            notes.append(f"NVML reports node {nv} for {d.bdf}: the GPU's memory node, without CPUs (numactl "
                         f"--cpunodebind={nv} fails); its CPUs are on node {cpu_node}")
    return GpuHome(
        bdf=d.bdf.lower(), label=label, cpu_node=cpu_node, cpu_node_from=how,
        memory_node=d.memory_node, memory_node_from=d.memory_node_from, placeholder_nodes=d.placeholder_nodes,
        sysfs_node=d.numa_node, nvml_node=nv,
        same_socket=same_socket_nodes(topo, cpu_node) if cpu_node is not None else (),
        notes=tuple(notes),
    )


def grace_cpu(topo: Topology) -> bool:
    """The CPUs are Grace's (Arm Neoverse V2): its GPUs hang off C2C, and the firmware gives them no PCI node."""
    model = topo.cpu.model or ""
    return GRACE_PART in model and "0x41" in model


def gpu_memory_layout(topo: Topology) -> GpuMemoryLayout:
    gpus, kind = order.gpu_order(topo.devices)
    nvml = {g.bdf: g.numa_node for g in topo.fabric.nvml_gpus}
    homes = tuple(_home(topo, d, f"GPU{i}" if kind == "gpu" else f"ACC{i}", nvml) for i, d in enumerate(gpus))
    name, per_socket = clustering(topo)
    mem_nodes = sorted({h.memory_node for h in homes if h.memory_node is not None and h.memory_node_from != "apu"})
    holes = sorted({p for h in homes for p in h.placeholder_nodes})
    if mem_nodes:
        extra = f"; empty MIG placeholder nodes {_span(holes)}" if holes else ""
        inferred = sorted({h.memory_node for h in homes if h.memory_node_from == MEMORY_FROM_PCI})
        if inferred:
            extra += (f"; node(s) {_span(inferred)} inferred from the GPU's PCI numa_node (no driver names an "
                      "owner)")
        mode, why = "numa", f"GPU memory onlined as CPU-less NUMA nodes {_span(mem_nodes)}{extra}"
    elif any(h.memory_node_from == "apu" for h in homes):
        mode, why = "apu", ("the GPUs have no memory of their own (KFD local_mem_size 0): each shares its "
                            "socket's node with the CPUs")
    elif any(d.vendor_id == order.NVIDIA for d in gpus) and grace_cpu(topo):
        mode, why = "cdmm", ("NVIDIA GPUs on Grace (Neoverse V2) and no GPU-memory node: the driver manages the "
                             "GPU memory (CDMM); place as on NUMA mode, without HBM nodes")
    elif gpus:
        mode, why = "discrete", "GPU memory is the GPUs' own, outside the kernel's NUMA nodes"
    else:
        mode, why = "none", "no GPU or accelerator"
    return GpuMemoryLayout(mode, why, name, per_socket, homes)


def _span(ids: list[int]) -> str:
    from numatune.cpulist import format_cpulist

    return format_cpulist(ids)


__all__ = ["GpuHome", "GpuMemoryLayout", "clustering", "gpu_memory_layout", "grace_cpu", "nearest_cpu_node",
           "same_socket_nodes", "sockets"]
