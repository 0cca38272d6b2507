"""read_topology: one pass over a root, assembling CPUs, nodes, devices, CXL and settings."""

from __future__ import annotations

from numatune.model.findings import Skipped
from numatune.model.topology import CxlTopology, GpuFabric, KernelSettings, NumaNode, PciDevice, Topology
from numatune.readers import host_skipped
from numatune.readers.cpukinds import group_cpu_kinds, read_kind_facts
from numatune.readers.cpus import read_cpus, summarize_cpus
from numatune.readers.gpumem import attach_gpu_memory, read_numa_status
from numatune.readers.nodes import read_memory_tiers, read_nodes
from numatune.system.host import Host

#: What a partial capture of a machine holds (a corpus's /proc/interrupts or KFD topology alone): a root with
#: none of it and no CPU describes no machine at all.
PARTIAL = ("/sys/devices/system/node", "/sys/bus/pci/devices", "/sys/class/kfd", "/proc/cpuinfo", "/proc/interrupts")


def _not_a_machine(host: Host, missing: str) -> None:
    """A root with no CPUs and nothing else of a machine (an empty saved tree, `--root /proc`) describes no
    machine: every rule would pass on nothing ("PASS, 0 CPUs"), so it is refused (exit 3) saying what is
    missing."""
    from numatune.errors import NotASysfsTree

    raise NotASysfsTree(f"{host.label} is not a machine: {missing}",
                        hint="pass a directory made by `numatune snapshot`, or a snapshot archive")


def read_topology(
    host: Host,
    *,
    pci_ids: str | None = None,
    devices: bool = True,
    cxl: bool | None = None,
    settings: bool = True,
) -> Topology:
    """Read everything `inspect` reports, or less for a hot path (launch: a rank's start).

    `devices=False` skips PCI; `cxl` (default: as `devices`) the CXL/DAX scan that tells CXL nodes
    apart; `settings=False` the kernel-settings pass, which walks /proc on a live node. The readers
    of what is skipped are not even imported.
    """
    skipped: list[Skipped] = []
    if not host.is_dir("/sys/devices/system/cpu"):
        skipped.append(Skipped("CPUs", "no /sys/devices/system/cpu in this root: CPU topology unknown"))
    cpus = read_cpus(host)
    summary = summarize_cpus(host, cpus)
    if not cpus and not summary.online and not summary.possible and not any(map(host.exists, PARTIAL)):
        _not_a_machine(host, "no CPUs (sys/devices/system/cpu), no NUMA nodes (sys/devices/system/node), no "
                             "devices (sys/bus/pci, sys/class/kfd), no proc/cpuinfo or proc/interrupts")
    cpus = read_kind_facts(host, cpus, summary.architecture)
    tiers = read_memory_tiers(host)
    nodes, numa_kernel, node_skipped = read_nodes(host, {c.id for c in cpus}, summary.online, tiers)
    skipped += node_skipped
    if not numa_kernel and (listed := host.read_cpulist("/sys/devices/system/node/online")):
        from numatune.cpulist import format_cpulist

        _not_a_machine(host, f"no NUMA nodes (sys/devices/system/node/online lists {format_cpulist(listed)}, "
                             "and no nodeN directory is there)")
    node_of = {cpu: n.id for n in nodes for cpu in n.cpus}
    cpus = tuple(c._replace(node=node_of.get(c.id)) for c in cpus)
    pci: tuple[PciDevice, ...] = ()
    memory = CxlTopology()
    fabric = GpuFabric()
    if devices:
        from numatune.readers.fabric import read_fabric, with_nvml_uuids
        from numatune.readers.kfd import read_kfd
        from numatune.readers.pci import read_pci_devices

        kfd = read_kfd(host)
        pci, pci_skipped = read_pci_devices(host, nodes, pci_ids, kfd)
        skipped += pci_skipped
        fabric = read_fabric(host, pci, kfd)
        pci = with_nvml_uuids(pci, fabric)
        nodes, pci = attach_gpu_memory(nodes, pci, read_numa_status(host), fabric.nvml_gpus, kfd)
    if devices if cxl is None else cxl:
        from numatune.readers.cxl import read_cxl

        memory = read_cxl(host)
    nodes = classify_nodes(host, nodes, memory, summary.architecture)
    kernel = KernelSettings()
    if settings:
        from numatune.readers.settings import read_settings

        kernel = read_settings(host)
    return Topology(
        source=host.label,
        live=host.is_live,
        cpu=summary,
        cpus=cpus,
        nodes=nodes,
        numa_kernel=numa_kernel,
        devices=pci,
        cxl=memory,
        memory_tiers=tiers,
        settings=kernel,
        skipped=host_skipped(host, tuple(skipped)),
        cpu_kinds=group_cpu_kinds(cpus, summary.model),
        fabric=fabric,
    )



def classify_nodes(
    host: Host, nodes: tuple[NumaNode, ...], cxl: CxlTopology, arch: str | None
) -> tuple[NumaNode, ...]:
    """Give each node a kind, with the evidence: CPU-less nodes are CXL, HBM, GPU memory or PMem."""
    gpu_nodes = {node: bdf for bdf, node in read_numa_status(host).items()}
    dax_by_node: dict[int, list[str]] = {}
    for d in cxl.dax:
        if d.target_node is not None:
            dax_by_node.setdefault(d.target_node, []).append("cxl" if d.backing.startswith("cxl") else d.backing)
    own_bw = {n.id: max((e.read_bandwidth_mbps or 0 for e in n.hmat), default=0) for n in nodes if n.cpus}
    out = []
    for n in nodes:
        initiators = {i for e in n.hmat for i in e.initiators}
        local_bw = max((own_bw.get(i, 0) for i in initiators), default=0)
        kind, why = _kind_of(n, gpu_nodes, dax_by_node.get(n.id, []), local_bw)
        out.append(n._replace(kind=kind, kind_evidence=why))
    return tuple(out)


def _kind_of(
    node: NumaNode, gpu_nodes: dict[int, str], dax_backings: list[str], dram_bw: int
) -> tuple[str, str]:
    if node.cpus:
        return "dram", "has CPUs"
    if node.gpu is not None:  # attach_gpu_memory named the GPU (its memory, or a MIG placeholder)
        return node.kind, node.kind_evidence
    if node.id in gpu_nodes:
        return "gpu", f"NVIDIA GPU {gpu_nodes[node.id]} memory (numa_status)"
    if "cxl" in dax_backings:
        return "cxl", "a CXL region's DAX device is onlined to this node"
    if "nvdimm" in dax_backings:
        return "pmem", "an NVDIMM region's DAX device is onlined to this node"
    if node.memory_total_kib == 0:
        return "memoryless", "no CPUs and no memory (generic initiator or empty)"
    bw = max((e.read_bandwidth_mbps or 0 for e in node.hmat), default=0)
    if dram_bw and bw > dram_bw:
        return "hbm", f"CPU-less with HMAT bandwidth {bw} MB/s above its initiator's DRAM ({dram_bw} MB/s)"
    if "hmem" in dax_backings:
        return "unknown", "soft-reserved (hmem) memory, backing device not described"
    slowest = max(node.hmat, key=lambda e: e.read_latency_ns or 0, default=None)
    if slowest is not None and slowest.read_latency_ns:
        return "unknown", (
            f"CPU-less; HMAT: {slowest.read_latency_ns} ns, {slowest.read_bandwidth_mbps or '?'} MB/s from node(s) "
            f"{','.join(map(str, slowest.initiators)) or '?'}; no CXL, DAX or GPU link says what it is"
        )
    return "unknown", "CPU-less node with no evidence of its memory type"


__all__ = ["read_topology", "classify_nodes", "Skipped"]
