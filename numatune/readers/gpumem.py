"""GPU memory as NUMA nodes: which GPU owns each GPU-memory node and each empty MIG placeholder node.

Grace Hopper and Grace Blackwell in NUMA mode online each GPU's HBM as a CPU-less node
(`/proc/driver/nvidia/gpus/<BDF>/numa_status`, "Node: N"; NVML's nvmlDeviceGetNumaNodeId says the same)
and keep seven empty nodes after it for MIG instances (a GH200: node 0 Grace, 1 HBM, 2-8 empty; a GB200
tray: 0-1 Grace, 2/10/18/26 HBM, the seven after each empty). POWER9 does the same with nodes 250-255
(no placeholders). In CDMM mode (driver-managed memory) there are no such nodes. An AMD APU (MI300A) has
no GPU memory of its own: the KFD reports `local_mem_size 0`, and the GPU uses its socket's node.

A GPU whose PCI numa_node is -1 (no _PXM: common on Grace) gets its node inferred here, after the PCI
reader's own inference: its memory node's nearest node with CPUs (SLIT), else NVML's CPU affinity.

Where no driver names a GPU's memory node but the firmware gives the GPU's PCI function a CPU-less node with
memory (its _PXM names the node, as NVML and NVIDIA's DRA driver name a Grace GPU's HBM node), and no other GPU
sits on that node, the node is taken as that GPU's memory, labelled inferred (MEMORY_FROM_PCI): the shape of
GPU memory without its driver's word, which is how the VM harness's superchip guest shows it to a real kernel.
"""

from __future__ import annotations

from numatune.model.topology import MEMORY_FROM_PCI, NumaNode, NvmlGpu, PciDevice
from numatune.numbers import maybe_int
from numatune.pieces import lines
from numatune.readers import NVIDIA_GPUS
from numatune.readers.kfd import Kfd, agents_by_id
from numatune.system.host import Host

MIG_PLACEHOLDERS = 7  # the driver keeps one node per possible MIG instance after the GPU's own node


def read_numa_status(host: Host) -> dict[str, int]:
    """BDF (lower case) -> the node the NVIDIA driver onlined the GPU's memory to (numa_status "Node: N")."""
    out = {}
    for bdf in host.listdir(NVIDIA_GPUS):
        text = host.read_optional(f"{NVIDIA_GPUS}/{bdf}/numa_status") or ""
        for number, line in enumerate(lines(text, f"{NVIDIA_GPUS}/{bdf}/numa_status"), 1):
            key, _, value = line.partition(":")
            node = maybe_int(value, f"{NVIDIA_GPUS}/{bdf}/numa_status", line=number) if key.strip() == "Node" else None
            if node is not None and node >= 0:
                out[bdf.lower()] = node
    return out


def _nearest_cpu_node(nodes: dict[int, NumaNode], mem: int) -> int | None:
    dists = [(n.distances.get(mem), n.id) for n in nodes.values() if n.cpus and n.distances.get(mem) is not None]
    return min(dists)[1] if dists else None


def _placeholders(nodes: dict[int, NumaNode], mem: int, claimed: set[int]) -> tuple[int, ...]:
    out: list[int] = []
    for nid in sorted(n for n in nodes if n > mem):
        n = nodes[nid]
        if n.cpus or n.memory_total_kib != 0 or nid in claimed or len(out) == MIG_PLACEHOLDERS:
            break
        out.append(nid)
    return tuple(out)


def _node_of_cpus(nodes: dict[int, NumaNode], cpus: tuple[int, ...]) -> int | None:
    homes = {nid for nid, n in nodes.items() for c in cpus if c in n.cpus}
    return homes.pop() if len(homes) == 1 else None


def _driver_memory_node(
    by_id: dict[int, NumaNode], bdf: str, status: dict[str, int], g: NvmlGpu | None
) -> tuple[int | None, str]:
    """The node a driver names for the GPU's memory: numa_status, else NVML's node when it is CPU-less memory."""
    mem = status.get(bdf)
    if mem is None and g is not None and g.numa_node is not None:
        n = by_id.get(g.numa_node)
        if n is not None and not n.cpus and n.memory_total_kib:
            return g.numa_node, "nvml"
    return mem, "numa_status"


def _pci_memory_nodes(
    by_id: dict[int, NumaNode], devices: tuple[PciDevice, ...], claimed: set[int], status: dict[str, int],
    by_nvml: dict[str, NvmlGpu],
) -> dict[str, int]:
    """BDF -> the CPU-less memory node its PCI numa_node names, for GPUs no driver gives a memory node, where that
    node is the only such GPU's and no driver claims it (see the module's docstring)."""
    on: dict[int, list[str]] = {}
    for d in devices:
        bdf = d.bdf.lower()
        n = by_id.get(d.numa_node) if d.numa_node is not None else None
        if d.kind not in ("gpu", "accelerator") or n is None or n.cpus or not n.memory_total_kib:
            continue
        if _driver_memory_node(by_id, bdf, status, by_nvml.get(bdf))[0] is None:
            on.setdefault(n.id, []).append(bdf)
    return {bdfs[0]: nid for nid, bdfs in on.items() if len(bdfs) == 1 and nid not in claimed}


def attach_gpu_memory(
    nodes: tuple[NumaNode, ...],
    devices: tuple[PciDevice, ...],
    status: dict[str, int],
    nvml: tuple[NvmlGpu, ...] = (),
    kfd: Kfd | None = None,
) -> tuple[tuple[NumaNode, ...], tuple[PciDevice, ...]]:
    """Nodes marked with the GPU they belong to; GPUs with their memory node, placeholders and CPU node."""
    by_id = {n.id: n for n in nodes}
    by_nvml = {g.bdf: g for g in nvml}
    agents = agents_by_id(kfd) if kfd is not None else {}  # one lookup a GPU, not a scan of every agent
    marks: dict[int, tuple[str, str, bool]] = {}  # node -> (bdf, evidence, placeholder)
    out = []
    claimed = set(status.values()) | {g.numa_node for g in nvml if g.numa_node is not None}
    by_pci = _pci_memory_nodes(by_id, devices, claimed, status, by_nvml)
    for d in devices:
        bdf = d.bdf.lower()
        g = by_nvml.get(bdf)
        mem, source = _driver_memory_node(by_id, bdf, status, g)
        if mem is None and bdf in by_pci:
            mem, source = by_pci[bdf], MEMORY_FROM_PCI
        if mem is not None and mem in by_id and source == MEMORY_FROM_PCI:
            marks[mem] = (bdf, f"GPU {d.bdf} memory, inferred: the GPU's PCI numa_node names this CPU-less node and "
                               "no driver (numa_status, NVML, KFD) names its owner", False)
            d = d._replace(memory_node=mem, memory_node_from=source)
        elif mem is not None and mem in by_id:
            holes = _placeholders(by_id, mem, claimed)
            claimed.update(holes)
            marks[mem] = (bdf, f"NVIDIA GPU {d.bdf} memory ({source})", False)
            for h in holes:
                marks[h] = (bdf, f"empty MIG placeholder of GPU {d.bdf} (the driver onlines a MIG instance's "
                                 "memory here)", True)
            d = d._replace(memory_node=mem, memory_node_from=source, placeholder_nodes=holes)
            if d.numa_node is None and d.inferred_node is None:
                home = _nearest_cpu_node(by_id, mem)
                if home is not None:
                    d = d._replace(inferred_node=home,
                                   inferred_from=f"GPU memory node {mem}: its nearest node with CPUs (SLIT)")
        if d.numa_node is None and d.inferred_node is None and g is not None and g.cpu_affinity:
            home = _node_of_cpus(by_id, g.cpu_affinity)
            if home is not None:
                d = d._replace(inferred_node=home, inferred_from="NVML CPU affinity")
        if kfd is not None and d.amd_kfd_node is not None and d.memory_node is None:
            agent = agents.get(d.amd_kfd_node)
            here = d.node
            if agent is not None and agent.props.get("local_mem_size", -1) == 0 and here is not None \
                    and by_id.get(here) is not None and by_id[here].cpus:
                d = d._replace(memory_node=here, memory_node_from="apu")
        out.append(d)
    new_nodes = tuple(
        n._replace(kind="gpu", kind_evidence=marks[n.id][1], gpu=marks[n.id][0], mig_placeholder=marks[n.id][2])
        if n.id in marks and not n.cpus else n
        for n in nodes
    )
    return new_nodes, tuple(out)


__all__ = ["attach_gpu_memory", "read_numa_status", "MIG_PLACEHOLDERS"]
