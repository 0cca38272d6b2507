"""The node as numatune sees it: CPUs, NUMA nodes, PCI devices, CXL, kernel settings.

Node ids and CPU ids are kept as the kernel numbers them (holes included); nothing is indexed by id.
`None` always means "unknown" (e.g. PCI numa_node -1), never zero.
"""

from __future__ import annotations

from types import MappingProxyType

from numatune.model._record import record
from numatune.model.findings import Skipped

TYPE_CHECKING = False  # annotations only: collections.abc imports collections (~5% of a start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping

# The system-wide weighted-interleave weights (NumaNode.interleave_weight; `auto` on Linux 6.16+): read by
# readers.nodes, named in the advice of launch's plan.
WEIGHT_DIR = "/sys/kernel/mm/mempolicy/weighted_interleave"
MEMORY_FROM_PCI = "pci numa_node"  # a GPU memory node inferred from the GPU's own PCI node (no driver named it)

# Shared, read-only default for mapping fields (record defaults are shared between instances).
EMPTY_MAP: Mapping = MappingProxyType({})


@record
class Cpu:
    id: int
    online: bool
    package: int | None = None  # physical_package_id (36, 8442...: an id, not an index); -1 there: its first CPU
    core: int | None = None  # core_id; repeats across packages
    die: int | None = None
    node: int | None = None
    siblings: tuple[int, ...] = ()  # SMT siblings, itself included
    core_type: str | None = None  # hybrid x86: "core" (P), "atom" (E) or "lowpower" (LP E), from the PMU devices
    capacity: int | None = None  # cpu_capacity (Arm, RISC-V; 1024 = the biggest core)
    max_khz: int | None = None  # cpufreq/cpuinfo_max_freq
    base_khz: int | None = None  # cpufreq/base_frequency (intel_pstate)
    midr: int | None = None  # Arm MIDR_EL1 (regs/identification/midr_el1, else /proc/cpuinfo's per-CPU fields)


@record
class CpuKind:
    """CPUs the kernel describes alike (same core type, MIDR, capacity, frequencies), as hwloc's CPU kinds."""

    rank: int  # 0 = most performant; kinds tied on every stated fact share a rank
    role: str  # "performance" (the top rank) | "efficiency" (any lower rank) | "unranked"
    cpus: tuple[int, ...]
    name: str | None = None  # "Cortex-X925", "Intel Core (P-core)"; None when nothing names it
    part: str | None = None  # Arm "0x41:0xd85" (implementer:part) or the x86 PMU device ("cpu_core")
    capacities: tuple[int, ...] = ()  # distinct cpu_capacity values of its CPUs
    max_mhz: tuple[int, ...] = ()  # distinct cpuinfo_max_freq values (MHz)
    base_mhz: tuple[int, ...] = ()  # distinct base_frequency values (MHz)


@record
class CpuKinds:
    """The node's CPU kinds, most performant first, with the evidence that grouped and ranked them."""

    kinds: tuple[CpuKind, ...] = ()
    grouped_by: tuple[str, ...] = ()  # facts that differ between kinds: "core type", "MIDR", "cpu_capacity", ...
    ranked_by: tuple[str, ...] = ()  # facts used to order them, in order; () when one kind or unranked

    @property
    def heterogeneous(self) -> bool:
        return len(self.kinds) > 1

    def kind_of(self, cpu: int) -> CpuKind | None:
        return next((k for k in self.kinds if cpu in k.cpus), None)

    def role_of(self, cpu: int) -> str | None:
        k = self.kind_of(cpu)
        return k.role if k else None


@record
class CpuSummary:
    model: str | None
    vendor: str | None
    architecture: str | None
    sockets: tuple[int, ...]  # package ids seen on online CPUs
    cores: int  # distinct (package, core) pairs among online CPUs
    threads_per_core: int
    online: tuple[int, ...]
    offline: tuple[int, ...]  # possible/present CPUs that are not online
    possible: tuple[int, ...]
    model_source: str = "proc/cpuinfo"


@record
class HugePages:
    size_kib: int
    total: int
    free: int
    surplus: int = 0


# The legend every output gives where an HMAT figure is unknown (HmatEntry.unknown_reason).
HMAT_UNKNOWN = "- = unknown: 0 in sysfs, a figure the firmware's HMAT did not provide"


@record
class HmatEntry:
    """One HMAT access class of a memory target: best figures from the listed initiators."""

    access_class: int  # 0: any initiator incl. generic initiators; 1: CPU initiators only
    initiators: tuple[int, ...]
    read_latency_ns: int | None = None
    write_latency_ns: int | None = None
    read_bandwidth_mbps: int | None = None
    write_bandwidth_mbps: int | None = None
    unknown_reason: str | None = None  # why figures are None: sysfs says 0, which the firmware's HMAT left unset


@record
class MemorySideCache:
    level: int
    size_bytes: int | None
    line_size: int | None
    indexing: int | None
    write_policy: int | None


@record
class NumaNode:
    id: int
    cpus: tuple[int, ...]
    memory_total_kib: int | None
    memory_free_kib: int | None = None
    hugepages: tuple[HugePages, ...] = ()
    distances: Mapping[int, int] = EMPTY_MAP
    kind: str = "unknown"  # dram | cxl | hbm | gpu | pmem | memoryless | unknown
    kind_evidence: str = ""
    tier: int | None = None  # kernel memory_tierN (smaller = faster)
    hmat: tuple[HmatEntry, ...] = ()
    memory_side_caches: tuple[MemorySideCache, ...] = ()
    interleave_weight: int | None = None
    has_normal_memory: bool | None = None
    generic_initiator: bool = False
    gpu: str | None = None  # kind "gpu": the BDF of the GPU whose memory (or MIG placeholder) this node is
    mig_placeholder: bool = False  # an empty node the NVIDIA driver keeps for a MIG instance's memory

    def hmat_from(self, initiator: int) -> tuple[int | None, int | None]:
        """(read latency ns, read bandwidth MB/s) HMAT lists for `initiator` reaching this node (CPU class
        access1 first, then access0); Nones when the initiator is not one listed (sysfs lists only the
        best initiators of each target, so a far socket's CPUs usually have no figure)."""
        for cls in (1, 0):
            for e in self.hmat:
                if e.access_class == cls and initiator in e.initiators:
                    return e.read_latency_ns, e.read_bandwidth_mbps
        return None, None


@record
class PciLink:
    current_speed: str | None = None  # "16.0 GT/s PCIe"
    current_width: int | None = None
    max_speed: str | None = None
    max_width: int | None = None


@record
class NvidiaGpuInfo:
    """From /proc/driver/nvidia/gpus/<bdf>/information."""

    model: str | None
    uuid: str | None
    minor: int | None
    bus_location: str | None


@record
class PciDevice:
    bdf: str  # "0000:18:00.0"; domains may be wider than 16 bits ("10000:00:04.0")
    path: str  # logical sysfs path of the device directory
    class_code: int  # 24-bit class ("0x030200")
    vendor_id: int | None
    device_id: int | None
    kind: str  # gpu | display | nic | nvme | cxl | accelerator | bridge | other
    numa_node: int | None  # None for -1 / missing (numa_unknown tells them apart)
    inferred_node: int | None = None  # when numa_node is unknown: best guess
    inferred_from: str | None = None  # "local_cpulist" | "upstream bridge"
    local_cpus: tuple[int, ...] = ()
    link: PciLink = PciLink()
    driver: str | None = None
    ancestors: tuple[str, ...] = ()  # BDFs from the root port down to the parent
    host_bridge: str | None = None  # "pci0000:00"
    vendor_name: str | None = None
    device_name: str | None = None
    netdevs: tuple[str, ...] = ()
    rdma: tuple[str, ...] = ()
    nvme: tuple[str, ...] = ()
    nvidia: NvidiaGpuInfo | None = None
    amd_kfd_node: int | None = None
    kfd_cpu_agent: int | None = None  # the KFD CPU node this GPU's PCIe link goes to (its socket, per the KFD)
    memory_node: int | None = None  # the NUMA node of the GPU's own memory (Grace HBM node; an APU's node)
    # "numa_status" | "nvml" | "apu" (KFD: no memory of its own) | MEMORY_FROM_PCI (inferred, readers.gpumem)
    memory_node_from: str | None = None
    placeholder_nodes: tuple[int, ...] = ()  # the empty MIG placeholder nodes that belong to this GPU
    # True when no numa_node could be read (a capture without the function's sysfs, a GPU known from the KFD
    # topology only): its node is unknown, which is not the firmware's -1 (no NUMA affinity)
    numa_unknown: bool = False

    @property
    def numa_state(self) -> str:
        """"node" (sysfs names one), "none" (sysfs says -1: no NUMA affinity) or "unknown" (not readable)."""
        if self.numa_node is not None:
            return "node"
        return "unknown" if self.numa_unknown else "none"

    @property
    def node(self) -> int | None:
        """The node to act on: the kernel's, else the inferred one."""
        return self.numa_node if self.numa_node is not None else self.inferred_node


@record
class CxlLink:
    """One PCIe/CXL link of the CXL tree, as the function below it reads it (current/max_link_*).

    `max_*` is what both ends can do (the lower of the two functions' maxima, where both are read);
    `gbps` is GB/s per direction from the trained speed (its encoding) and width; see model/links.py.
    """

    upstream: str | None  # the port above: a root port or a switch downstream port (BDF)
    downstream: str  # the function below: a switch upstream port or a memdev's PCI function (BDF)
    width: int | None
    speed: str | None  # as sysfs writes it: "32.0 GT/s PCIe"
    max_width: int | None
    max_speed: str | None
    gts: float | None = None
    max_gts: float | None = None
    generation: str | None = None  # "PCIe 5 / CXL 2.0" for the trained speed
    gbps: float | None = None  # per direction, trained
    max_gbps: float | None = None  # per direction, at max width and speed


@record
class CxlMemdev:
    name: str
    ram_size: int | None
    pmem_size: int | None
    serial: str | None
    firmware_version: str | None
    numa_node: int | None  # the host PCI device's node, NOT where the memory lands
    pci_bdf: str | None
    host_bridge: str | None
    port: str | None = None  # its endpoint port (endpointN)
    parent_dport: str | None = None  # the root port or switch downstream port it sits behind (BDF)
    switches: tuple[str, ...] = ()  # switch ports between it and the host bridge, nearest first
    link: CxlLink | None = None


@record
class CxlDport:
    name: str  # dportN (N: the kernel's port id)
    target: str  # what it links to: a host bridge (pci0000:80) or a PCIe port function (BDF)


@record
class CxlPort:
    name: str  # root0, port1, endpoint2
    kind: str  # root | port | endpoint
    uport: str | None
    dports: tuple[str, ...]
    parent: str | None
    role: str = "unknown"  # root | host-bridge | switch | endpoint
    dport_targets: tuple[CxlDport, ...] = ()
    parent_dport: str | None = None  # the dport above it (its target)
    host_bridge: str | None = None
    decoders_committed: int | None = None
    link: CxlLink | None = None  # switch: its upstream link; endpoint: the memdev's link


@record
class CxlDecoder:
    name: str  # decoderX.Y
    kind: str  # root | switch | endpoint
    start: int | None
    size: int | None
    mode: str | None
    interleave_ways: int | None
    interleave_granularity: int | None
    targets: tuple[str, ...]
    region: str | None
    port: str | None = None  # the port whose HDM decoder it is (root0, port1, endpoint3)


@record
class DaxDevice:
    name: str  # dax0.0
    target_node: int | None
    mode: str | None  # kmem (system RAM) | device_dax | unknown
    size: int | None
    region: str | None  # cxl region or nd region it comes from
    backing: str  # cxl | nvdimm | hmem | unknown


@record
class CxlRegionMember:
    position: int  # the region's targetN
    decoder: str  # the endpoint decoder at that position
    memdev: str | None
    endpoint: str | None
    switch: str | None  # the switch port it sits behind (nearest), None when it hangs off a root port
    dport: str | None  # the downstream or root port right above it (BDF)
    host_bridge: str | None


@record
class CxlRegion:
    name: str
    size: int | None
    mode: str | None
    interleave_ways: int | None
    interleave_granularity: int | None
    targets: tuple[str, ...]  # endpoint decoders
    memdevs: tuple[str, ...]
    dax: tuple[str, ...]
    nodes: tuple[int, ...]  # NUMA node(s) the region's memory became
    members: tuple[CxlRegionMember, ...] = ()
    uuid: str | None = None  # pmem regions: kept in the devices' label areas, so every host assembling it agrees


@record
class CxlPmuEvent:
    name: str  # m2s_req_memrd
    config: int
    config1: int = 0
    config2: int = 0


@record
class CxlPmu:
    """A CXL performance monitoring unit (CPMU) as perf exposes it: /sys/bus/event_source/devices/cxl_pmu_memX.Y."""

    name: str  # cxl_pmu_mem0.0
    memdev: str | None  # mem0
    pmu_type: int | None  # perf_event_attr.type (the PMU's `type` file)
    cpu: int | None  # the CPU to open its system-wide counters on (first of `cpumask`)
    events: tuple[str, ...]  # every event it documents
    read: CxlPmuEvent | None  # host reads it serves (M2S MemRd requests, 64 bytes each)
    write: CxlPmuEvent | None  # host writes (M2S RwD MemWr, 64 bytes each)


@record
class CxlTopology:
    memdevs: tuple[CxlMemdev, ...] = ()
    ports: tuple[CxlPort, ...] = ()
    decoders: tuple[CxlDecoder, ...] = ()
    regions: tuple[CxlRegion, ...] = ()
    dax: tuple[DaxDevice, ...] = ()
    links: tuple[CxlLink, ...] = ()
    pmus: tuple[CxlPmu, ...] = ()

    @property
    def present(self) -> bool:
        return bool(self.memdevs or self.regions or self.dax)

    def port(self, name: str | None) -> CxlPort | None:
        return next((p for p in self.ports if p.name == name), None)

    def memdev(self, name: str | None) -> CxlMemdev | None:
        return next((m for m in self.memdevs if m.name == name), None)


@record
class FabricLink:
    """A GPU-to-GPU link beside PCIe: AMD XGMI (KFD io_links) or NVIDIA NVLink/NVSwitch (NVML)."""

    a: str  # BDF, the first in PCI order
    b: str
    kind: str  # "xgmi" | "nvlink" (direct GPU-GPU) | "nvswitch" (both ends on one NVSwitch fabric)
    count: int | None = None  # links bonded (the # of NV#/XGMI#); None when the source does not say
    weight: int | None = None  # KFD io_link weight (15 per XGMI hop)
    min_bandwidth_mbps: int | None = None  # KFD: one link
    max_bandwidth_mbps: int | None = None  # KFD: every link of the pair
    source: str = ""  # "kfd io_links" | "nvml" | "nvml record <path>"


@record
class NvSwitchMember:
    """A GPU on the NVSwitch fabric. Membership is kept once a GPU, not once a pair: every two members are
    joined through the switches (the pair's NV# is the fewer of their counts), and N GPUs would be N^2/2 links
    (an NVML record of 1 MB: MemoryError)."""

    bdf: str
    count: int  # its active NVLinks to NVSwitch ports
    source: str = ""  # "nvml" | "nvml record <path>"


@record
class NvmlGpu:
    """What NVML says about one NVIDIA GPU (not in sysfs)."""

    index: int  # NVML's index
    bdf: str
    uuid: str | None = None
    name: str | None = None
    nvlinks_active: int = 0
    fabric_state: str | None = None  # NVSwitch registration: not-supported|not-started|in-progress|completed
    fabric_status: str | None = None  # NVML return code of the registration ("success" or the error)
    processes: tuple[int, ...] = ()  # PIDs of the compute processes on this GPU
    numa_node: int | None = None  # nvmlDeviceGetNumaNodeId: the GPU memory's node on Grace (NUMA mode), else None
    cpu_affinity: tuple[int, ...] = ()  # nvmlDeviceGetCpuAffinity: the CPUs NVML calls near the GPU
    # The NVLink domain (model.nvfabric): nvmlGpuFabricInfo v3/v4, None where NVML gave no answer
    cluster_uuid: str | None = None  # clusterUuid as 32 hex digits
    clique_id: int | None = None  # v3's cliqueId
    cliques: tuple[tuple[int, int], ...] = ()  # v4's (type, id) cliques
    health_mask: int | None = None  # healthMask as NVML gives it (model.nvfabric.decode_health names its fields)
    health_summary: str | None = None  # healthSummary: healthy | unhealthy | limited capacity | not supported
    domain: str | None = None  # "<cluster UUID>.<clique>" (nvidia.com/gpu.clique's value), None: no domain
    health: tuple[str, ...] = ()  # what the mask and summary say is wrong, in words (empty: nothing known wrong)


@record
class GpuFabric:
    """GPU interconnect beside PCIe, and whether NVLink could be seen at all."""

    links: tuple[FabricLink, ...] = ()  # direct links: XGMI (KFD), NVLink GPU to GPU (NVML)
    nvlink: str = "n/a"  # "nvml" (live) | "saved" (NVML record in the root) | "not visible" | "n/a" (no NVIDIA GPU)
    nvlink_note: str = ""  # why not visible, or where the record came from
    nvml_gpus: tuple[NvmlGpu, ...] = ()
    driver_version: str | None = None
    peer_memory: str | None = None  # GPUDirect module: nvidia_peermem | nv_peer_mem | "" none | None unknown
    acs: Mapping[str, str] = EMPTY_MAP  # bridge BDF -> "redirect" | "no redirect" (ACS P2P), where readable
    nvswitch: tuple[NvSwitchMember, ...] = ()  # GPUs on one NVSwitch fabric, in BDF order

    def link(self, a: str, b: str) -> FabricLink | None:
        """The link between two GPUs (one lookup: a scan; `paths.FabricIndex` answers many)."""
        direct = next((x for x in self.links if {x.a, x.b} == {a, b}), None)
        if direct is not None or a == b:
            return direct
        ends = {m.bdf: m for m in self.nvswitch if m.bdf in (a, b)}
        return switched_link(ends[a], ends[b]) if len(ends) == 2 else None


def switched_link(x: NvSwitchMember, y: NvSwitchMember) -> FabricLink:
    """Two NVSwitch members as the link the matrix shows between them (BDF order, the fewer links)."""
    a, b = (x, y) if x.bdf <= y.bdf else (y, x)
    return FabricLink(a.bdf, b.bdf, "nvswitch", min(a.count, b.count), source=a.source)


@record
class KernelSettings:
    release: str | None = None
    numa_balancing: int | None = None  # bitmask: 0 off, 1 normal, 2 memory tiering
    transparent_hugepage: str | None = None  # the bracketed choice
    thp_defrag: str | None = None
    zone_reclaim_mode: int | None = None
    demotion_enabled: bool | None = None
    weighted_interleave_auto: bool | None = None
    irqbalance_running: bool | None = None  # None: not known (not a live run)


@record
class Topology:
    source: str  # the root as the user gave it
    live: bool
    cpu: CpuSummary
    cpus: tuple[Cpu, ...]
    nodes: tuple[NumaNode, ...]
    numa_kernel: bool  # False: no /sys/devices/system/node (one implicit node)
    devices: tuple[PciDevice, ...] = ()
    cxl: CxlTopology = CxlTopology()
    memory_tiers: Mapping[int, tuple[int, ...]] = EMPTY_MAP
    settings: KernelSettings = KernelSettings()
    skipped: tuple[Skipped, ...] = ()
    cpu_kinds: CpuKinds = CpuKinds()
    fabric: GpuFabric = GpuFabric()

    def node(self, node_id: int) -> NumaNode | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def node_of_cpu(self, cpu: int) -> int | None:
        for n in self.nodes:
            if cpu in n.cpus:
                return n.id
        return None

    def device(self, bdf: str) -> PciDevice | None:
        return next((d for d in self.devices if d.bdf == bdf), None)

    @property
    def gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices if d.kind == "gpu")

    @property
    def nics(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices if d.kind == "nic")
