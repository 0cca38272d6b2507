"""The GPU/NIC connection matrix in the style of `nvidia-smi topo -m`: PCIe hierarchy plus GPU fabric.

The PCIe part works for any vendor and offline, because it needs only each device's sysfs path:
X same device; PIX at most one PCIe bridge between them; PXB several bridges, same host bridge
subtree; PHB through the PCIe host bridge; NODE across host bridges within one NUMA node;
SYS across the inter-socket link (or a node that is unknown). A GPU pair joined by a fabric link
shows it instead, as the vendors' tools do: NV# (# bonded NVLinks, direct or through NVSwitch, from
NVML) and XGMI / XGMI# (AMD Infinity Fabric, # links when more than one, from the KFD io_links).
"""

from __future__ import annotations

from numatune.model._record import record
from numatune.model.order import gpu_order, nic_order, order_note
from numatune.model.topology import FabricLink, GpuFabric, NvSwitchMember, PciDevice, Topology, switched_link

LEGEND = {
    "X": "self",
    "PIX": "at most a single PCIe bridge",
    "PXB": "multiple PCIe bridges, without crossing the host bridge",
    "PHB": "a PCIe host bridge (typically the CPU)",
    "NODE": "PCIe and the interconnect between host bridges within a NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (e.g. UPI, xGMI)",
    "NV#": "a bonded set of # NVLinks (direct, or through NVSwitch)",
    "XGMI#": "AMD Infinity Fabric (XGMI) GPU-to-GPU link; # links when more than one",
}


@record
class PathMatrix:
    devices: tuple[str, ...]  # BDFs, GPUs first then NICs
    labels: tuple[str, ...]  # "GPU0", "NIC0" ...
    cells: tuple[tuple[str, ...], ...]
    nodes: tuple[int | None, ...]
    local_cpus: tuple[tuple[int, ...], ...]
    links: tuple[FabricLink, ...] = ()  # the direct fabric links among these devices (XGMI, NVLink)
    nvlink: str = "n/a"  # "nvml" | "saved" | "not visible" | "n/a" (no NVIDIA GPU)
    nvlink_note: str = ""
    legend: tuple[str, ...] = ()  # "GPU0 = 0000:18:00.0 NVIDIA H100", "NIC0 = 0000:1a:00.0 mlx5_0 ibp26s0"
    order_note: str = ""  # where the GPU numbering differs from PCI bus order (numatune.model.order)
    nvswitch: tuple[NvSwitchMember, ...] = ()  # these GPUs on one NVSwitch fabric (each pair NV#: see pairs())
    cells_note: str = ""  # why `cells` is empty though there are devices (more than MAX_MATRIX_DEVICES)

    def pairs(self) -> list[FabricLink]:
        """Every GPU pair joined by a fabric link, as the links table lists them: the direct links, then each
        pair of NVSwitch members (BDF order). Quadratic in the members: only for a matrix that has its cells."""
        members = self.nvswitch if self.cells else ()
        return [*self.links, *(switched_link(x, y) for i, x in enumerate(members) for y in members[i + 1:])]


def device_name(d: PciDevice) -> str:
    """A device's model as people know it: the NVIDIA driver's, else pci.ids', else vendor:device."""
    if d.nvidia and d.nvidia.model:
        return d.nvidia.model
    if d.vendor_name and not d.device_name:  # pci.ids knows the vendor only: its device id too, as the picture
        return f"{d.vendor_name} {d.device_id or 0:04x}"
    named = " ".join(x for x in (d.vendor_name, d.device_name) if x)
    return named or f"{d.vendor_id or 0:04x}:{d.device_id or 0:04x}"


def legend_line(label: str, d: PciDevice) -> str:
    """nvidia-smi's legend: GPUi = BDF and model; NICi = BDF, RDMA device and network interface."""
    if label.startswith("NIC"):
        return " ".join([f"{label} = {d.bdf}", *d.rdma, *d.netdevs] if (d.rdma or d.netdevs) else
                        [f"{label} = {d.bdf}", device_name(d)])
    return f"{label} = {d.bdf} {device_name(d)}"


def connection(a: PciDevice, b: PciDevice) -> str:
    if a.bdf == b.bdf:
        return "X"
    if a.host_bridge and a.host_bridge == b.host_bridge and a.path and b.path:
        chain_a, chain_b = a.ancestors, b.ancestors
        common = 0
        for x, y in zip(chain_a, chain_b, strict=False):
            if x != y:
                break
            common += 1
        if common == 0:
            return "PHB"
        # Bridges crossed: from each device up to (and including) the common ancestor.
        crossed = (len(chain_a) - common) + (len(chain_b) - common) + 1
        return "PIX" if crossed <= 1 else "PXB"
    node_a, node_b = a.node, b.node
    if node_a is not None and node_a == node_b:
        return "NODE"
    if node_a is None and node_b is None and a.kfd_cpu_agent is not None and a.kfd_cpu_agent == b.kfd_cpu_agent:
        return "NODE"  # no NUMA information in the tree, but the KFD puts both under one CPU
    return "SYS"


def fabric_label(link: FabricLink) -> str:
    """The cell for a fabric link, as nvidia-smi (NV18) and rocm-smi (XGMI) name them."""
    if link.kind in ("nvlink", "nvswitch"):
        return f"NV{link.count or ''}" if link.count else "NV?"
    return "XGMI" if not link.count or link.count == 1 else f"XGMI{link.count}"


class FabricIndex:
    """The fabric's links by GPU pair and its NVSwitch members by GPU, built once (a scan of every link for
    each of N^2 cells was most of 17 s for 1,000 GPUs)."""

    def __init__(self, fabric: GpuFabric) -> None:
        self.direct: dict[tuple[str, str], FabricLink] = {}
        for x in fabric.links:
            self.direct.setdefault((x.a, x.b), x)
            self.direct.setdefault((x.b, x.a), x)
        self.switched = {m.bdf: m for m in fabric.nvswitch}

    def link(self, a: str, b: str) -> FabricLink | None:
        found = self.direct.get((a, b))
        if found is None and a != b and a in self.switched and b in self.switched:
            return switched_link(self.switched[a], self.switched[b])
        return found


def cell(topo: Topology, a: PciDevice, b: PciDevice, index: FabricIndex | None = None) -> str:
    if a.bdf != b.bdf and a.kind == "gpu" and b.kind == "gpu":
        link = (index or FabricIndex(topo.fabric)).link(a.bdf.lower(), b.bdf.lower())
        if link is not None:
            return fabric_label(link)
    return connection(a, b)


#: The matrix is N x N cells: a real node has a few dozen GPUs and NICs (a host with hundreds of SR-IOV virtual
#: functions a few hundred); past this many devices its cells are left out with a note (4,000 GPU agents in a
#: 260 KB KFD topology made 16 million cells and 1.9-3.5 GB).
MAX_MATRIX_DEVICES = 256


def path_matrix(topo: Topology) -> PathMatrix:
    gpus, kind = gpu_order(topo.devices)  # the one numbering (numatune.model.order): GPUi here = GPUi everywhere
    gpus = gpus if kind == "gpu" else []
    nics = nic_order(topo.devices)
    devs = gpus + nics
    labels = [f"GPU{i}" for i in range(len(gpus))] + [f"NIC{i}" for i in range(len(nics))]
    index = FabricIndex(topo.fabric)
    cells: tuple[tuple[str, ...], ...] = ()
    cells_note = ""
    if len(devs) <= MAX_MATRIX_DEVICES:
        cells = tuple(tuple(cell(topo, a, b, index) for b in devs) for a in devs)
    else:
        cells_note = (f"{len(gpus)} GPUs and {len(nics)} NICs: the GPU/NIC path matrix is left out above "
                      f"{MAX_MATRIX_DEVICES} devices ({len(devs) ** 2:,} cells)")
    bdfs = {d.bdf.lower() for d in gpus}
    return PathMatrix(
        devices=tuple(d.bdf for d in devs),
        labels=tuple(labels),
        cells=cells,
        nodes=tuple(d.node for d in devs),
        local_cpus=tuple(_affinity(topo, d) for d in devs),
        links=tuple(x for x in topo.fabric.links if x.a in bdfs and x.b in bdfs),
        nvlink=topo.fabric.nvlink,
        nvlink_note=topo.fabric.nvlink_note,
        legend=tuple(legend_line(label, d) for label, d in zip(labels, devs, strict=True)),
        order_note=order_note(topo.devices),
        nvswitch=tuple(m for m in topo.fabric.nvswitch if m.bdf in bdfs),
        cells_note=cells_note,
    )


def _affinity(topo: Topology, d: PciDevice) -> tuple[int, ...]:
    """The CPU affinity column: the function's local_cpulist, except for a GPU whose sysfs node is -1 and
    whose NVML record names CPUs: nvidia-smi prints NVML's (a GB200's local_cpulist is every CPU, NVML's
    the GPU's own Grace)."""
    if d.numa_node is None and d.kind == "gpu":
        nvml = next((g for g in topo.fabric.nvml_gpus if g.bdf == d.bdf.lower()), None)
        if nvml is not None and nvml.cpu_affinity:
            return nvml.cpu_affinity
    return d.local_cpus


RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


def nearest_nic(
    topo: Topology, gpu: PciDevice, nics: tuple[PciDevice, ...] | None = None
) -> tuple[PciDevice, str] | None:
    """The NIC a GPU should use for GPUDirect RDMA: the one with the shortest path (of `nics`, default all; the
    first in their order among the equally near). One lookup a GPU in an index of the NICs built once for the
    topology (or the `nics` tuple) asked last: each GPU comparing itself with every NIC was 1,000 x 1,000
    `connection`s for a root of 1,000 GPUs and 1,000 NICs."""
    key = topo if nics is None else nics
    if _LAST[0] is not key:
        _LAST[:] = [key, NicIndex(topo.nics if nics is None else nics)]
    return _LAST[1].nearest(gpu)


_LAST: list = [None, None]  # (the topology or NIC tuple, its NicIndex): the callers ask GPU after GPU


class NicIndex:
    """The first NIC of each kind of path `connection` tells apart, by what decides it: the same function
    (X), the same chain of bridges (PIX), the same root port (PXB), host bridge (PHB), node or KFD CPU agent
    (NODE), else the first NIC (SYS). The first NIC with the nearest kind is what a scan in order finds."""

    def __init__(self, nics: tuple[PciDevice, ...] | list[PciDevice]) -> None:
        self.first = nics[0] if nics else None
        self.bdf: dict[str, PciDevice] = {}
        self.chain: dict[tuple[str, tuple[str, ...]], PciDevice] = {}
        self.port: dict[tuple[str, str], PciDevice] = {}
        self.bridge: dict[str, PciDevice] = {}
        self.node: dict[int, PciDevice] = {}
        self.agent: dict[int, PciDevice] = {}
        for nic in nics:
            self.bdf.setdefault(nic.bdf, nic)
            if nic.host_bridge and nic.path:
                if nic.ancestors:
                    self.chain.setdefault((nic.host_bridge, nic.ancestors), nic)
                    self.port.setdefault((nic.host_bridge, nic.ancestors[0]), nic)
                self.bridge.setdefault(nic.host_bridge, nic)
            if nic.node is not None:
                self.node.setdefault(nic.node, nic)
            elif nic.kfd_cpu_agent is not None:
                self.agent.setdefault(nic.kfd_cpu_agent, nic)

    def nearest(self, gpu: PciDevice) -> tuple[PciDevice, str] | None:
        if self.first is None:
            return None
        found = self.bdf.get(gpu.bdf)
        if found is not None:
            return found, "X"
        hb, chain = gpu.host_bridge, gpu.ancestors
        if hb and gpu.path:
            for kind, found in (("PIX", self.chain.get((hb, chain)) if chain else None),
                                ("PXB", self.port.get((hb, chain[0])) if chain else None),
                                ("PHB", self.bridge.get(hb))):
                if found is not None:
                    return found, kind
        node = gpu.node
        found = self.node.get(node) if node is not None else (
            self.agent.get(gpu.kfd_cpu_agent) if gpu.kfd_cpu_agent is not None else None)
        return (found, "NODE") if found is not None else (self.first, "SYS")
