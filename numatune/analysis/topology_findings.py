"""Findings about the node itself (inspect's rules; `check` runs them too). Codes NT0xx are stable."""

from __future__ import annotations

from numatune.cpulist import format_cpulist
from numatune.model.findings import Code, Finding, Severity, register
from numatune.model.gpumem import grace_cpu
from numatune.model.order import gpu_names
from numatune.model.paths import nearest_nic
from numatune.model.topology import Topology

TYPE_CHECKING = False  # annotations only: collections.abc imports collections (~5% of a start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

UNBALANCED_MEMORY_RATIO = 0.25  # sockets whose DRAM differs by more than this are flagged

NT001 = register("NT001", Severity.WARNING, "topology", "a device reports numa_node -1", """
    A GPU, NIC, NVMe, accelerator or CXL device reports numa_node -1: the firmware does not tell the
    kernel which node it hangs off, so neither the kernel nor launchers can place its users. A warning
    on a machine with several nodes; on one node with CPUs, info with nothing to fix (its users can only
    run there, as in most single-socket VMs); numatune infers the node from the PCI root
    when it can and says so. On Grace superchips the firmware gives the C2C-attached GPU no PCI
    proximity at all: there -1 is the platform's answer, not a BIOS setting, so the finding is info,
    names the node numatune uses (from the GPU's memory node or NVML) and what sysfs-only tools do.""")
NT002 = register("NT002", Severity.WARNING, "topology", "a GPU has no NIC on its node", """
    A GPU's nearest NIC is across the socket link (SYS): GPUDirect RDMA traffic crosses it.""")
NT003 = register("NT003", Severity.WARNING, "topology", "a CPU-less memory node sits in DRAM's tier", """
    A CPU-less CXL/PMem node sits in the same memory tier as DRAM: the kernel will neither demote to
    it nor promote from it. The advice follows the node's kind: CXL memory wants the firmware's HMAT and
    the device's CDAT (or DAX onlining), PMem the kmem driver; a node of unknown kind that a GPU or
    display device names as its own node is most likely that device's memory (a GPU's HBM onlined as a
    node sits in DRAM's tier by design), so the finding is info and says so. GPU memory nodes that a
    driver names are never flagged.""")
NT004 = register("NT004", Severity.WARNING, "topology", "memory is unbalanced across sockets", """
    The sockets' DRAM differs by more than 25%: ranks on the small socket spill to remote memory.""")
NT005 = register("NT005", Severity.INFO, "topology", "automatic NUMA balancing is on", """
    kernel.numa_balancing is on with several nodes: it unmaps pages to sample them and may migrate a
    pinned rank's memory.""")
NT006 = register("NT006", Severity.INFO, "topology", "offline CPUs", """
    Some CPUs are offline.""")
NT007 = register("NT007", Severity.WARNING, "topology", "a device hangs off a node without CPUs", """
    A GPU, NIC, NVMe or accelerator hangs off a node without CPUs: its users must be bound to the
    nearest node with CPUs.""")
NT008 = register("NT008", Severity.ERROR, "topology", "nodes claim the same CPUs (broken SRAT)", """
    Several NUMA nodes claim the same CPUs: the firmware's SRAT is broken and binding by node is
    meaningless.""")
NT009 = register("NT009", Severity.WARNING, "topology", "a node has no usable distance row", """
    A node has no usable distance row; distances drive the kernel's fallback order (SLIT).""")
NT010 = register("NT010", Severity.WARNING, "topology", "vm.zone_reclaim_mode is set", """
    vm.zone_reclaim_mode is not 0: the kernel reclaims page cache locally before using another node.""")
NT011 = register("NT011", Severity.INFO, "topology", "the kernel has no NUMA information", """
    No /sys/devices/system/node: the kernel has no NUMA information and is treated as one node.""")
NT012 = register("NT012", Severity.INFO, "topology", "irqbalance is running", """
    irqbalance is running on a node with devices: it will move device interrupts and undo manual
    affinity.""")
NT013 = register("NT013", Severity.INFO, "topology", "transparent hugepages are disabled", """
    Transparent hugepages are disabled: large training buffers use 4 KiB pages (more TLB misses).""")
NT014 = register("NT014", Severity.INFO, "topology", "the KFD's CPU agents do not match the tree's nodes", """
    The AMD KFD topology puts each GPU under a CPU agent (one per NUMA node with CPUs), but the tree
    has a different number of NUMA nodes with CPUs (typically a capture without
    /sys/devices/system/cpu or node): the GPUs' NUMA nodes are unknown rather than guessed. The path
    matrix still tells GPUs under the same CPU agent (NODE) from GPUs under different ones (SYS).""")
NT015 = register("NT015", Severity.INFO, "topology", "NVLink is not visible", """
    The root has NVIDIA GPUs but NVLink cannot be seen: NVLink is not in sysfs, and neither NVML
    (the nvidia-ml-py package with the driver loaded) nor an NVML record saved by `numatune snapshot`
    is available. GPU pairs then show their PCIe path only, which is not how they talk.""")
NT016 = register("NT016", Severity.WARNING, "topology", "no GPUDirect RDMA peer-memory module", """
    NVIDIA GPUs and RDMA NICs share the node but neither nvidia_peermem nor nv_peer_mem is loaded:
    unless the stack uses DMA-BUF (open kernel modules, NCCL 2.12+ and a 5.12+ kernel), NCCL's
    network traffic is staged through host memory instead of going NIC to GPU.""")
NT017 = register("NT017", Severity.WARNING, "topology", "ACS redirects P2P between a GPU and its NIC", """
    A PCIe bridge between a GPU and its nearest RDMA NIC has ACS P2P request/completion redirect on:
    GPUDirect RDMA traffic that could turn in the switch goes up to the root complex (and through
    the IOMMU). Read from config space, so only where the tree has it (root's snapshot, live as root).""")
NT018 = register("NT018", Severity.WARNING, "topology", "a GPU's nearest NIC is reached through the CPU", """
    The RDMA NIC nearest a GPU is reached through the CPU's PCIe root complex (PHB) or across host bridges
    (NODE), not under a shared PCIe switch: NCCL disables GPUDirect RDMA beyond PXB by default
    (NCCL_NET_GDR_LEVEL) and traffic bounces through host memory. Across sockets is NT002.""")
NT019 = register("NT019", Severity.ERROR, "topology", "the NVSwitch fabric is not ready", """
    NVML reports a GPU's NVSwitch fabric registration as not started, in progress or failed: CUDA
    will not run on it (or runs without NVLink) until nvidia-fabricmanager has trained the fabric.""")
NT030 = register("NT030", Severity.WARNING, "topology", "a GPU's NVLink fabric health is not good", """
    NVML's fabric health mask (nvmlGpuFabricInfo v2+) or health summary (v3+) says a GPU's NVLink fabric is
    degraded (NVLink paths down: less bandwidth), recovering routes or access timeouts, has an unhealthy
    route or an incorrect configuration (SysGUID, chassis serial number, no partition, too few NVLinks, GPU
    firmware). Multi-node NVLink jobs that span it may run slowly or fail at set-up (NCCL's MNNVL enrolment
    crashed on degraded paths: NVIDIA/nccl#2186). Keep the node out of NVLink blocks (`numatune fleet --emit
    slurm-topology` does) until the fabric manager reports it healthy.""")
NT031 = register("NT031", Severity.INFO, "topology", "a GPU's NVLink clique is the sentinel or unknown", """
    A GPU whose fabric registration completed reports the clique id 32766, which unrelated racks share
    (meta-pytorch/torchcomms#3612), or no cluster UUID: its NVLink domain is (cluster UUID, clique), never the
    clique alone, and tools that key on the clique alone merge racks. Info for the sentinel (numatune keys
    on both), warning when NVML gave no cluster UUID or no clique (no domain can be named). The all-zero
    cluster UUID of a node-local NVSwitch (HGX H100) is no domain beyond the node and not reported.""")
NT032 = register("NT032", Severity.ERROR, "topology", "a node's GPUs are in different NVLink domains", """
    The GPUs of one node report different (cluster UUID, clique) pairs: a node belongs to one NVLink domain,
    so the fabric manager's partition or the node's cabling is wrong, and a scheduler block built from any
    one GPU misplaces the others.""")
NT020 = register("NT020", Severity.INFO, "topology", "CPU capacity and frequency disagree", """
    Some CPUs differ in cpu_capacity but not in cpufreq's maximum frequency, or the other way round.
    The scheduler (energy-aware and asymmetric packing) places tasks by capacity, cpufreq by frequency:
    when they disagree, the core kinds are not what one of them suggests. On the DGX Spark (GB10) the
    firmware's CPPC performance levels give cores of one design different capacities at one frequency.
    numatune groups CPU kinds as hwloc does (MIDR on Arm) and says which evidence ranked them.""")
NT021 = register("NT021", Severity.WARNING, "topology", "a GPU's node has only efficiency cores", """
    On a CPU with several core kinds, every online CPU of a GPU's local NUMA node is of a lower
    (efficiency) kind: a rank bound to that node feeds its GPU from the slow cores. Bind the rank to
    performance cores elsewhere (numatune launch --node N) or check the BIOS's core parking.""")
NT022 = register("NT022", Severity.WARNING, "topology", "too many GPUs lean on one CXL link", """
    More GPUs' ranks spill to a CXL memory node than the links in front of it can feed, at one CXL 2.0
    x16 link (about 63 GB/s per direction) per four GPUs: eight GPUs on one x16 link, or more than two
    on an x8 one, saturate it. The links counted are those at the host-bridge end of each path to the
    node's memdevs (a switch's upstream link, else the device's own); the GPUs are those whose nearest
    CXL node it is (where `launch --mem-policy cxl-spill` puts their spill). Policy key
    expect.cxl.gpus_per_x16_link changes the four (NT314).""")
NT023 = register("NT023", Severity.WARNING, "topology", "an interleave set sits behind one narrow link", """
    Every member of a CXL region's interleave set sits behind the same upstream link (one switch on one
    root port), and that link is slower than the members' own links together: the set runs at that
    link's rate, not at the sum of its devices'. Spread the members over root ports or host bridges,
    or give the switch a wider upstream link.""")
NT024 = register("NT024", Severity.WARNING, "topology", "a CXL link trained below its maximum", """
    A CXL link runs narrower or slower than both of its ends can (current_link_width/speed below
    max_link_width/speed): a badly seated card, a riser or retimer, or a slot wired narrower than it
    looks. The bandwidth lost is in the finding.""")


def check_unknown_device_node(topo: Topology) -> Iterator[Finding]:
    multi = len([n for n in topo.nodes if n.cpus]) > 1
    gpun = gpu_names(topo.devices)
    grace = grace_cpu(topo)
    for d in topo.devices:
        if d.kind not in ("gpu", "nic", "nvme", "accelerator", "cxl") or d.numa_node is not None or not d.path:
            continue
        guess = f"; inferred node {d.inferred_node} from {d.inferred_from}" if d.inferred_node is not None else ""
        if grace and d.inferred_node is not None and d.kind == "gpu":
            torch = ("the same node" if d.inferred_node == 0 else f"the wrong node (numatune: {d.inferred_node})")
            yield NT001(
                f"{_device(gpun, d)} reports numa_node -1 (unknown){guess}: the platform's firmware gives this "
                "GPU no PCI proximity (nothing to enable in the BIOS)",
                f"bind ranks with `numatune launch --gpu {d.bdf}` (node {d.inferred_node}); tools that read sysfs "
                f"alone do not know the node: torchrun --numa-binding reads -1 as node 0, {torch}, and the "
                "kubelet's topology manager gives this GPU no hint",
                d.bdf,
                Severity.INFO,
            )
            continue
        if not multi and (len(topo.nodes) == 1 or d.kind != "cxl"):
            yield NT001(  # one node with CPUs: every user of the device runs there whatever it reports
                f"{_device(gpun, d)} reports numa_node -1 (unknown){guess}: with one node with CPUs its users "
                "can only run there, so nothing is misplaced",
                "",
                d.bdf,
                Severity.INFO,
            )
            continue
        yield NT001(
            f"{_device(gpun, d)} reports numa_node -1 (unknown){guess}",
            "enable ACPI _PXM/SRAT proximity in the BIOS (or the hypervisor's vNUMA) so the kernel knows "
            "the device's node; until then bind with `numatune launch --node N`",
            d.bdf,
            None if multi else Severity.INFO,
        )


def check_gpu_without_local_nic(topo: Topology) -> Iterator[Finding]:
    gpun = gpu_names(topo.devices)
    if not topo.nics:
        return
    for g in topo.gpus:
        best = nearest_nic(topo, g)
        if best and best[1] == "SYS":
            nic = best[0]
            yield NT002(
                f"{_gpu(gpun, g.bdf)} (node {_n(g.node)}) has no NIC on its node; nearest is {nic.bdf} "
                f"({', '.join(nic.netdevs + nic.rdma) or nic.kind}, node {_n(nic.node)}): "
                "GPUDirect RDMA traffic crosses the socket link",
                "put a NIC on each GPU's socket, or have each rank use the NIC on its own node (NCCL_IB_HCA)",
                g.bdf,
            )


def check_cpuless_node_in_top_tier(topo: Topology) -> Iterator[Finding]:
    dram_tiers = {n.tier for n in topo.nodes if n.cpus and n.tier is not None}
    if not dram_tiers:
        return
    top = min(dram_tiers)
    gpun = gpu_names(topo.devices)
    for n in topo.nodes:
        if not n.cpus and n.tier == top and n.kind in ("cxl", "pmem", "unknown") and (n.memory_total_kib or 0) > 0:
            what = (f"CPU-less {n.kind} node {n.id} sits in the same memory tier ({top}) as DRAM: "
                    "the kernel will neither demote to it nor promote from it")
            owners = [d for d in topo.devices if d.node == n.id and d.kind in ("gpu", "accelerator", "display")]
            if n.kind == "cxl":
                fix = ("make the firmware publish HMAT for the CXL window and the device its CDAT, from which the "
                       "kernel ranks the node's tier, or have the memory onlined through DAX (soft-reserved, then "
                       "daxctl reconfigure-device --mode=system-ram), which places it in a lower tier")
            elif n.kind == "pmem":
                fix = ("online it through the kmem driver (daxctl reconfigure-device --mode=system-ram), which "
                       "places DAX memory in a lower tier, or make the firmware publish HMAT performance for it")
            elif owners:
                names = ", ".join(_device(gpun, d) for d in owners)
                yield NT003(
                    what + f"; it is the node of {names}, so it is most likely that device's own memory",
                    "nothing to publish if it is GPU memory: a GPU's memory onlined as a NUMA node (Grace in NUMA "
                    "mode) sits in DRAM's tier by design and is no demotion target; its driver names such a node "
                    "(NVIDIA: /proc/driver/nvidia/gpus/BDF/numa_status), after which numatune calls it gpu. "
                    "Otherwise make the firmware publish HMAT performance for it",
                    f"node {n.id}",
                    Severity.INFO,
                )
                continue
            else:  # nothing says what it is
                fix = ("make the firmware publish HMAT performance for the node (CDAT too, if it is CXL memory), "
                       "or online it through the kmem driver, which places DAX memory in a lower tier")
            yield NT003(what, fix, f"node {n.id}")


def check_unbalanced_memory(topo: Topology) -> Iterator[Finding]:
    per_socket: dict[int, int] = {}
    for n in topo.nodes:
        if not n.cpus or not n.memory_total_kib:
            continue
        packages = {c.package for c in topo.cpus if c.id in n.cpus and c.package is not None}
        key = min(packages) if packages else n.id
        per_socket[key] = per_socket.get(key, 0) + n.memory_total_kib
    if len(per_socket) < 2:
        return
    low, high = min(per_socket.values()), max(per_socket.values())
    if high and (high - low) / high > UNBALANCED_MEMORY_RATIO:
        yield NT004(
            f"memory is unbalanced across sockets: {low // 1048576} GiB vs {high // 1048576} GiB",
            "populate every socket's memory channels alike; ranks on the small socket will spill remote",
            "memory",
        )


def check_numa_balancing(topo: Topology) -> Iterator[Finding]:
    mode = topo.settings.numa_balancing
    if mode and mode & 1 and len(topo.nodes) > 1:
        yield NT005(
            "automatic NUMA balancing is on: it unmaps pages to sample them and may migrate a pinned "
            "rank's memory",
            "for pinned training jobs: sysctl kernel.numa_balancing=0 (or 2 to keep only memory tiering)",
            "kernel.numa_balancing",
        )


def check_offline_cpus(topo: Topology) -> Iterator[Finding]:
    offline = [c.id for c in topo.cpus if not c.online]
    if offline:
        yield NT006(
            f"{len(offline)} CPUs are offline: {format_cpulist(offline)}",
            "bring them online (echo 1 > /sys/devices/system/cpu/cpuN/online) if that was not intended",
            "cpus",
        )


def check_device_on_cpuless_node(topo: Topology) -> Iterator[Finding]:
    if not any(n.cpus for n in topo.nodes):
        return  # no CPU topology in this tree: no node is known to lack CPUs
    cpuless = {n.id for n in topo.nodes if not n.cpus}
    gpun = gpu_names(topo.devices)
    for d in topo.devices:
        if d.node in cpuless and d.kind in ("gpu", "nic", "nvme", "accelerator"):
            yield NT007(
                f"{_device(gpun, d)} hangs off node {d.node}, which has no CPUs",
                "bind its users to the nearest node with CPUs (smallest distance)",
                d.bdf,
            )


def check_overlapping_node_cpus(topo: Topology) -> Iterator[Finding]:
    seen: dict[int, int] = {}
    clash = set()
    for n in topo.nodes:
        for cpu in n.cpus:
            if cpu in seen:
                clash.add((seen[cpu], n.id))
            else:
                seen[cpu] = n.id
    if clash:
        pairs = ", ".join(f"{a}/{b}" for a, b in sorted(clash)[:4])
        yield NT008(
            f"NUMA nodes claim the same CPUs ({pairs}): the firmware's SRAT is broken",
            "update the BIOS; until then bind by CPU list, not by node",
            "nodes",
        )


def check_missing_distances(topo: Topology) -> Iterator[Finding]:
    if not topo.numa_kernel or len(topo.nodes) < 2:
        return
    missing = [n.id for n in topo.nodes if not n.distances]
    if missing:
        yield NT009(
            f"no usable distance row for node(s) {format_cpulist(missing)}",
            "distances drive the kernel's fallback order; check the firmware's SLIT",
            "distances",
        )


def check_zone_reclaim(topo: Topology) -> Iterator[Finding]:
    if topo.settings.zone_reclaim_mode:
        yield NT010(
            f"vm.zone_reclaim_mode is {topo.settings.zone_reclaim_mode}: the kernel reclaims page cache "
            "locally before using another node",
            "sysctl vm.zone_reclaim_mode=0 unless the workload was measured to prefer it",
            "vm.zone_reclaim_mode",
        )


def check_single_node(topo: Topology) -> Iterator[Finding]:
    if not topo.numa_kernel:
        yield NT011(
            "no NUMA information in this kernel (no /sys/devices/system/node): treated as one node",
            "",
            "kernel",
        )


def check_irqbalance(topo: Topology) -> Iterator[Finding]:
    if topo.settings.irqbalance_running and topo.devices:
        yield NT012(
            "irqbalance is running: it will move device interrupts and undo manual affinity",
            "set IRQBALANCE_BANNED_CPULIST to the ranks' cores (see `numatune irq plan`)",
            "irqbalance",
        )


def check_thp(topo: Topology) -> Iterator[Finding]:
    if topo.settings.transparent_hugepage == "never":
        yield NT013(
            "transparent hugepages are disabled: large training buffers use 4 KiB pages (more TLB misses)",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
            "transparent_hugepage",
        )


def check_capacity_frequency(topo: Topology) -> Iterator[Finding]:
    cpus = [c for c in topo.cpus if c.online and c.capacity is not None and c.max_khz]
    if len({c.capacity for c in cpus}) < 2 and len({c.max_khz for c in cpus}) < 2:
        return
    caps_at: dict[int, dict[int, list[int]]] = {}
    freqs_at: dict[int, dict[int, list[int]]] = {}
    for c in cpus:
        caps_at.setdefault(c.max_khz, {}).setdefault(c.capacity, []).append(c.id)
        freqs_at.setdefault(c.capacity, {}).setdefault(c.max_khz, []).append(c.id)
    same_freq = [
        f"{'; '.join(f'{cap} (CPUs {format_cpulist(ids)})' for cap, ids in sorted(caps.items()))} "
        f"at {khz // 1000} MHz"
        for khz, caps in sorted(caps_at.items()) if len(caps) > 1
    ]
    same_cap = [
        f"{'; '.join(f'{khz // 1000} MHz (CPUs {format_cpulist(ids)})' for khz, ids in sorted(fr.items()))} "
        f"at capacity {cap}"
        for cap, fr in sorted(freqs_at.items()) if len(fr) > 1
    ]
    fix = ("nothing to change in numatune: it ranks kinds by the evidence it names (inspect's CPU kinds); "
           "if the kinds look wrong, check the firmware's CPPC performance levels (acpi_cppc/highest_perf)")
    if same_freq:
        yield NT020("cpu_capacity differs at one max frequency: " + " | ".join(same_freq), fix, "cpu_capacity")
    if same_cap:
        yield NT020("max frequency differs at one cpu_capacity: " + " | ".join(same_cap), fix, "cpufreq")


def check_gpu_on_efficiency_cores(topo: Topology) -> Iterator[Finding]:
    gpun = gpu_names(topo.devices)
    kinds = topo.cpu_kinds
    if not kinds.heterogeneous or not any(k.role == "performance" for k in kinds.kinds):
        return
    online = set(topo.cpu.online)
    perf_nodes = sorted({n.id for n in topo.nodes for c in n.cpus if kinds.role_of(c) == "performance"})
    for g in topo.gpus:
        node = topo.node(g.node) if g.node is not None else None
        cpus = [c for c in node.cpus if c in online] if node else []
        if not cpus or any(kinds.role_of(c) != "efficiency" for c in cpus):
            continue
        names = sorted({kinds.kind_of(c).name or "?" for c in cpus})
        elsewhere = (f"bind its rank to performance cores on node(s) {','.join(map(str, perf_nodes))} "
                     f"(numatune launch --node N)" if perf_nodes else "no node has performance cores online")
        yield NT021(
            f"{_gpu(gpun, g.bdf)}'s node {node.id} has only efficiency cores ({', '.join(names)}, CPUs "
            f"{format_cpulist(cpus)}): its rank feeds the GPU from the slow cores",
            elsewhere + "; or check the BIOS's core parking / offlined performance cores",
            g.bdf,
        )


def check_kfd_agents_unmatched(topo: Topology) -> Iterator[Finding]:
    amd = [d for d in topo.gpus if d.kfd_cpu_agent is not None and d.node is None]
    if not amd:
        return
    agents = sorted({d.kfd_cpu_agent for d in amd if d.kfd_cpu_agent is not None})
    with_cpus = len([n for n in topo.nodes if n.cpus])
    yield NT014(
        f"{len(amd)} AMD GPU(s) hang off KFD CPU agent(s) {format_cpulist(agents)}, but this tree has "
        f"{with_cpus} NUMA node(s) with CPUs{'' if topo.numa_kernel else ' (no NUMA information: one implicit node)'}: "
        "their NUMA nodes are unknown, not guessed; GPUs under the same CPU agent show NODE, others SYS",
        "capture /sys/devices/system/cpu and /sys/devices/system/node too (numatune snapshot does)",
        "kfd",
    )


def check_nvlink_visible(topo: Topology) -> Iterator[Finding]:
    if topo.fabric.nvlink == "not visible" and len([g for g in topo.gpus if g.vendor_id == 0x10DE]) > 1:
        yield NT015(
            f"NVLink is not visible ({topo.fabric.nvlink_note}): GPU pairs show their PCIe path only",
            "install nvidia-ml-py (pip install 'numatune[nvidia]') on the node, or snapshot it with NVML",
            "nvlink",
        )


def check_peer_memory(topo: Topology) -> Iterator[Finding]:
    nvidia = [g for g in topo.gpus if g.vendor_id == 0x10DE]
    rdma = [n for n in topo.nics if n.rdma]
    if nvidia and rdma and topo.fabric.peer_memory == "":
        yield NT016(
            f"{len(nvidia)} NVIDIA GPU(s) and {len(rdma)} RDMA NIC(s) but neither nvidia_peermem nor nv_peer_mem "
            "is loaded: GPUDirect RDMA needs it (or DMA-BUF)",
            "modprobe nvidia_peermem (and list it in /etc/modules-load.d/)",
            "nvidia_peermem",
        )


def _gpu_nic_pairs(topo: Topology) -> Iterator[tuple]:
    """Each GPU with its nearest RDMA NIC (GPUDirect RDMA needs one) and the path kind between them."""
    rdma = tuple(n for n in topo.nics if n.rdma)
    if not rdma:
        return
    for g in topo.gpus:
        best = nearest_nic(topo, g, rdma)
        if best is not None:
            yield g, best[0], best[1], ", ".join(best[0].netdevs + best[0].rdma) or best[0].kind


def check_gpudirect_through_cpu(topo: Topology) -> Iterator[Finding]:
    gpun = gpu_names(topo.devices)
    for g, nic, kind, names in _gpu_nic_pairs(topo):
        if kind in ("PHB", "NODE"):
            yield NT018(
                f"{_gpu(gpun, g.bdf)}'s nearest NIC {nic.bdf} ({names}) is {kind}: reached through the CPU, "
                "so GPUDirect RDMA is off by default (NCCL_NET_GDR_LEVEL=PXB)",
                "put GPU and NIC under one PCIe switch; or, knowing the cost, NCCL_NET_GDR_LEVEL=PHB",
                g.bdf,
            )


def check_gpudirect_acs(topo: Topology) -> Iterator[Finding]:
    gpun = gpu_names(topo.devices)
    if not topo.fabric.acs:
        return
    for g, nic, kind, names in _gpu_nic_pairs(topo):
        if kind not in ("PIX", "PXB"):
            continue
        # The bridges where the traffic turns: below the deepest common ancestor on each side, and it.
        common = [b for b in g.ancestors if b in nic.ancestors]
        turn = set(g.ancestors[len(common) - 1:]) | set(nic.ancestors[len(common) - 1:])
        redirect = sorted(b for b in turn if topo.fabric.acs.get(b) == "redirect")
        if redirect:
            yield NT017(
                f"ACS redirects peer-to-peer traffic on bridge(s) {', '.join(redirect)} "
                f"between {_gpu(gpun, g.bdf)} "
                f"and NIC {nic.bdf} ({names}): GPUDirect RDMA goes up to the root complex",
                "disable ACS P2P redirect on those switch ports (setpci, or the BIOS) where IOMMU isolation "
                "is not needed",
                g.bdf,
            )


def check_nvswitch_fabric(topo: Topology) -> Iterator[Finding]:
    gpun = gpu_names(topo.devices)
    for g in topo.fabric.nvml_gpus:
        state, status = g.fabric_state, g.fabric_status
        if state in ("not-started", "in-progress") or (state == "completed" and status not in (None, "success")):
            yield NT019(
                f"{_gpu(gpun, g.bdf)} ({g.uuid or g.name or 'NVIDIA'}): NVSwitch fabric registration {state}"
                f"{'' if status in (None, 'success') else f', {status}'}",
                "systemctl start nvidia-fabricmanager (same version as the driver) and check its log",
                g.bdf,
            )


def _completed(g) -> bool:  # noqa: ANN001 - an NvmlGpu
    return g.fabric_state == "completed" and g.fabric_status in (None, "success")


def check_fabric_health(topo: Topology) -> Iterator[Finding]:
    gpun = gpu_names(topo.devices)
    for g in topo.fabric.nvml_gpus:
        if g.health:
            where = f" in domain {g.domain}" if g.domain else ""
            mask = f" (health mask {g.health_mask:#x})" if g.health_mask is not None else ""
            yield NT030(
                f"{_gpu(gpun, g.bdf)} ({g.uuid or g.name or 'NVIDIA'}){where}: NVLink fabric {'; '.join(g.health)}"
                f"{mask}",
                "keep the node out of NVLink blocks; check the fabric manager and the NVLink switch trays "
                "(nvidia-smi -q | grep -A8 Fabric), then reset or reseat the tray",
                g.bdf,
            )


def check_fabric_clique(topo: Topology) -> Iterator[Finding]:
    if not topo.fabric.nvml_gpus:
        return
    from numatune.model.nvfabric import SENTINEL_CLIQUE, ZERO_UUID, domain_clique

    gpun = gpu_names(topo.devices)
    for g in topo.fabric.nvml_gpus:
        if not _completed(g):
            continue
        clique = domain_clique(g.clique_id, g.cliques)
        if g.cluster_uuid == ZERO_UUID:
            continue  # a node-local NVSwitch (HGX H100): no NVLink domain beyond the node, nothing wrong
        if g.cluster_uuid is None or clique is None:
            yield NT031(
                f"{_gpu(gpun, g.bdf)}: fabric registration completed but NVML names no NVLink domain "
                f"(cluster UUID {g.cluster_uuid or 'unknown'}, clique {clique if clique is not None else 'unknown'})",
                "check the fabric manager's partition for this tray (nvidia-smi -q | grep -A8 Fabric)",
                g.bdf, severity=Severity.WARNING,
            )
        elif clique == SENTINEL_CLIQUE:
            yield NT031(
                f"{_gpu(gpun, g.bdf)}: clique id {SENTINEL_CLIQUE}, the sentinel unrelated racks share; its domain "
                f"is {g.domain} (cluster UUID and clique together)",
                "key NVLink domains on (cluster UUID, clique), as nvidia.com/gpu.clique and numatune do, never on "
                "the clique alone",
                g.bdf,
            )


def check_fabric_one_domain(topo: Topology) -> Iterator[Finding]:
    gpun = gpu_names(topo.devices)
    domains: dict[str, list[str]] = {}
    for g in topo.fabric.nvml_gpus:
        if g.domain:
            domains.setdefault(g.domain, []).append(_gpu(gpun, g.bdf))
    if len(domains) > 1:
        yield NT032(
            "this node's GPUs report " + str(len(domains)) + " NVLink domains: "
            + "; ".join(f"{d}: {', '.join(names)}" for d, names in sorted(domains.items())),
            "check the fabric manager's partition and the tray's NVLink cabling; schedule the node alone until "
            "its GPUs agree",
            "node",
        )


# Each rule with the one code it reports, in report order.
def check_cxl_link_budget(topo: Topology) -> Iterator[Finding]:
    if not topo.cxl.links or not topo.gpus:
        return
    from numatune.analysis.cxl_links import over_budget

    yield from cxl_budget_findings(NT022, topo, over_budget(topo), 4)


def cxl_budget_findings(code: Code, topo: Topology, budgets: list, per_x16: float) -> Iterator[Finding]:
    """The budget finding (NT022, or the policy's NT314 with its own GPUs-per-link figure)."""
    from numatune.analysis.cxl_links import link_label

    for b in budgets:
        links = ", ".join(f"{x.downstream} {link_label(x)}" for x in b.links)
        yield code(
            f"{len(b.gpus)} GPUs' ranks spill to CXL node {b.node} ({', '.join(b.regions)}), whose memory sits "
            f"behind {len(b.links)} link(s) of {b.gbps:g} GB/s per direction in all ({links}): "
            f"{b.gpus_allowed:g} GPUs' worth at one CXL 2.0 x16 link per {per_x16:g} GPUs",
            f"add CXL links (one x16 CXL 2.0 link per {per_x16:g} GPUs: more devices on other root ports or host "
            "bridges, or a wider switch uplink), or keep some GPUs' spill in DRAM",
            f"node {b.node}",
        )


def check_cxl_interleave_uplink(topo: Topology) -> Iterator[Finding]:
    if not topo.cxl.links:
        return
    from numatune.analysis.cxl_links import link_label, narrow_uplinks

    for region, link, total in narrow_uplinks(topo):
        members = ", ".join(m.memdev or "?" for m in region.members)
        switch = next((m.switch for m in region.members if m.switch), None)
        where = f"switch {switch}'s upstream link" if switch else "one link"
        yield NT023(
            f"{region.name}'s {region.interleave_ways}-way interleave set ({members}) sits behind {where} "
            f"{link.upstream or '?'} -> {link.downstream}, {link_label(link)}, while its members' own links "
            f"carry {total:g} GB/s together: the set runs at most at the upstream link's rate",
            "put the members behind different root ports or host bridges, or give the switch a wider or "
            "faster upstream link",
            region.name,
        )


def check_cxl_link_trained_down(topo: Topology) -> Iterator[Finding]:
    if not topo.cxl.links:
        return
    from numatune.analysis.cxl_links import trained_down

    for x in trained_down(topo):
        lost = f", {x.max_gbps:g} GB/s possible" if x.max_gbps is not None else ""
        yield NT024(
            f"CXL link {x.upstream or '?'} -> {x.downstream} runs x{x.width or '?'} {x.speed or '?'} but both ends "
            f"can do x{x.max_width or '?'} {x.max_speed or '?'}: {x.gbps if x.gbps is not None else '?'} GB/s per "
            f"direction{lost}",
            "reseat the card, check risers/retimers and the slot's wiring (lspci -vv: LnkSta against LnkCap); "
            "the BIOS may force a lower link speed",
            x.downstream,
        )


CHECKS: tuple[tuple[Code, Callable[[Topology], Iterator[Finding]]], ...] = (
    (NT001, check_unknown_device_node),
    (NT002, check_gpu_without_local_nic),
    (NT003, check_cpuless_node_in_top_tier),
    (NT004, check_unbalanced_memory),
    (NT005, check_numa_balancing),
    (NT006, check_offline_cpus),
    (NT007, check_device_on_cpuless_node),
    (NT008, check_overlapping_node_cpus),
    (NT009, check_missing_distances),
    (NT010, check_zone_reclaim),
    (NT011, check_single_node),
    (NT012, check_irqbalance),
    (NT013, check_thp),
    (NT014, check_kfd_agents_unmatched),
    (NT015, check_nvlink_visible),
    (NT016, check_peer_memory),
    (NT017, check_gpudirect_acs),
    (NT018, check_gpudirect_through_cpu),
    (NT019, check_nvswitch_fabric),
    (NT020, check_capacity_frequency),
    (NT021, check_gpu_on_efficiency_cores),
    (NT022, check_cxl_link_budget),
    (NT023, check_cxl_interleave_uplink),
    (NT024, check_cxl_link_trained_down),
    (NT030, check_fabric_health),
    (NT031, check_fabric_clique),
    (NT032, check_fabric_one_domain),
)


def topology_findings(topo: Topology) -> list[Finding]:
    out = [f for _, check in CHECKS for f in check(topo)]
    return sorted(out, key=lambda f: (-f.severity.rank, f.code, f.subject))


def _device(names: dict[str, str], d) -> str:  # noqa: ANN001 - a PciDevice
    """A GPU as "GPU0 0000:18:00.0", another device as "NIC 0000:41:00.0" (its kind and address)."""
    return names.get(d.bdf.lower(), f"{d.kind.upper()} {d.bdf}")


def _gpu(names: dict[str, str], bdf: str) -> str:
    """"GPU0 0000:18:00.0" (model.order.gpu_names), "GPU 0000:18:00.0" for a GPU numatune does not number."""
    return names.get(bdf.lower(), f"GPU {bdf}")


def _n(node: int | None) -> str:
    return "?" if node is None else str(node)
