"""What `emit` reads beyond read_topology, all through Host (so `snapshot` captures it):
the CPU groups hwloc orders cores by (L3 caches, clusters), DRM render nodes of GPUs, InfiniBand
verbs devices of NICs and the kernel's total memory.
"""

from __future__ import annotations

from collections.abc import Iterable

from numatune.model.topology import PciDevice, Topology
from numatune.numbers import parse_int
from numatune.pieces import lines
from numatune.system.host import Host

CPU_DIR = "/sys/devices/system/cpu"


def read_cpu_groups(host: Host, topo: Topology) -> tuple[frozenset[int], ...]:
    """Distinct L3-cache and cluster CPU sets of online CPUs: hwloc levels inside a package that order its
    cores (Slurm numbers cores in that order). One read per group, not per CPU."""
    seen: set[frozenset[int]] = set()
    covered: dict[str, set[int]] = {"l3": set(), "cluster": set()}
    for cpu in sorted(c.id for c in topo.cpus if c.online):
        base = f"{CPU_DIR}/cpu{cpu}"
        if cpu not in covered["cluster"]:
            group = host.read_cpulist(f"{base}/topology/cluster_cpus_list")
            if group:
                seen.add(frozenset(group))
                covered["cluster"].update(group)
        if cpu not in covered["l3"]:
            group = _l3_of(host, base)
            if group:
                seen.add(frozenset(group))
                covered["l3"].update(group)
    return tuple(sorted(seen, key=lambda g: (min(g), len(g))))


def _l3_of(host: Host, base: str) -> frozenset[int] | None:
    for index in host.listdir(f"{base}/cache"):
        if not index.startswith("index"):
            continue
        if (host.read_optional(f"{base}/cache/{index}/level") or "").strip() == "3":
            return host.read_cpulist(f"{base}/cache/{index}/shared_cpu_list")
    return None


def _first_entry(host: Host, devices: Iterable[PciDevice], kind: str, subdir: str, prefix: str) -> dict[str, str]:
    """BDF -> the first entry named PREFIX* in each `kind` device's SUBDIR (the device file jobs open)."""
    out = {}
    for d in devices:
        if d.kind != kind or not d.path:
            continue
        names = sorted(n for n in host.listdir(f"{d.path}/{subdir}") if n.startswith(prefix))
        if names:
            out[d.bdf] = names[0]
    return out


def read_render_nodes(host: Host, devices: Iterable[PciDevice]) -> dict[str, str]:
    """BDF -> DRM render node name (renderD128...) of each GPU that has one (AMD's gres.conf File=)."""
    return _first_entry(host, devices, "gpu", "drm", "renderD")


def read_uverbs(host: Host, devices: Iterable[PciDevice]) -> dict[str, str]:
    """BDF -> InfiniBand verbs device (uverbs0...) of each RDMA NIC: the file RDMA jobs open."""
    return _first_entry(host, devices, "nic", "infiniband_verbs", "uverbs")


def read_meminfo_total_kib(host: Host) -> int | None:
    """MemTotal from the root's /proc/meminfo: what slurmd's sysinfo() reports as RealMemory."""
    text = host.read_optional("/proc/meminfo")
    for line in lines(text or "", "/proc/meminfo"):
        if line.startswith("MemTotal:"):
            parts = line.split(None, 2)
            if len(parts) >= 2 and parts[1].isdigit():
                return parse_int(parts[1], "/proc/meminfo")
    return None
