"""PCI devices that matter for training (GPUs, NICs, NVMe, CXL, accelerators) and their NUMA node.

Walks /sys/bus/pci/devices (symlinks into /sys/devices/pci*), keeps the hierarchy (host bridge and
ancestor BDFs) for the GPU/NIC path matrix, joins net/RDMA/NVMe names, NVIDIA driver info and the
AMD KFD topology. A device whose numa_node is -1 gets an *inferred* node, marked as such.
"""

from __future__ import annotations

import os

from numatune.errors import ParseError
from numatune.model.findings import Skipped
from numatune.model.order import pci_sort_key
from numatune.model.topology import NumaNode, NvidiaGpuInfo, PciDevice, PciLink
from numatune.numbers import maybe_int
from numatune.pieces import lines
from numatune.readers import NVIDIA_GPUS
from numatune.readers.kfd import Kfd, cpu_agents, read_kfd
from numatune.system.host import Host

TYPE_CHECKING = False  # annotations only: collections.abc imports collections (~5% of a start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping

PCI_DEVICES = "/sys/bus/pci/devices"
_HEX = frozenset("0123456789abcdefABCDEF")
GPU_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel"}


def is_bdf(name: str) -> bool:
    """A PCI address, "0000:18:00.0" (domains of 4-8 hex digits), without `re`:
    ^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$."""
    return (4 <= len(name) - 8 <= 8 and name[-8] == ":" and name[-5] == ":" and name[-2] == "."
            and name[-1] in "01234567" and _HEX.issuperset(name[:-8] + name[-7:-5] + name[-4:-2]))


def _is_host_bridge(name: str) -> bool:
    """"pci0000:00": ^pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}$."""
    return (name.startswith("pci") and 4 <= len(name) - 6 <= 8 and name[-3] == ":"
            and _HEX.issuperset(name[3:-3] + name[-2:]))


def device_kind(class_code: int, vendor_id: int | None) -> str:
    """Map a PCI class (24-bit) to numatune's kinds."""
    base, sub = class_code >> 16, (class_code >> 8) & 0xFF
    if base == 0x03:
        return "gpu" if vendor_id in GPU_VENDORS and sub in (0x00, 0x02, 0x80) else "display"
    if base == 0x02 or (base == 0x0C and sub == 0x06):  # 0x0c06: InfiniBand HCAs (QLogic, older Mellanox)
        return "nic"
    if base == 0x01 and sub == 0x08:
        return "nvme"
    if base == 0x05 and sub == 0x02:
        return "cxl"
    if base == 0x12 or (base == 0x0B and sub == 0x40):
        return "accelerator"
    if base == 0x06:
        return "bridge"
    return "other"


REPORTED_KINDS = ("gpu", "display", "nic", "nvme", "cxl", "accelerator")


def parse_nvidia_information(text: str, where: str = "information") -> NvidiaGpuInfo:
    fields, numbers = {}, {}
    for number, line in enumerate(lines(text, where), 1):
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
            numbers[key.strip()] = number
    minor = (maybe_int(fields["Device Minor"], where, line=numbers["Device Minor"]) if fields.get("Device Minor")
             else None)
    return NvidiaGpuInfo(
        model=fields.get("Model"),
        uuid=fields.get("GPU UUID"),
        minor=minor if minor is not None and minor >= 0 else None,
        bus_location=fields.get("Bus Location"),
    )


def read_pci_devices(
    host: Host, nodes: tuple[NumaNode, ...], pci_ids: str | None = None, kfd: Kfd | None = None
) -> tuple[tuple[PciDevice, ...], list[Skipped]]:
    skipped: list[Skipped] = []
    class_links = _class_device_names(host)
    nvidia = _read_nvidia(host)
    devices: list[PciDevice] = []
    node_by_path: dict[str, int | None] = {}
    for bdf in host.listdir(PCI_DEVICES):
        if not is_bdf(bdf):
            continue
        entry = f"{PCI_DEVICES}/{bdf}"
        path = host.resolve(entry) or entry
        class_code = host.read_int(f"{path}/class", 16)
        if class_code is None:
            skipped.append(Skipped(bdf, "no class attribute"))
            continue
        numa = host.read_int(f"{path}/numa_node")
        node_by_path[path] = numa if numa is not None and numa >= 0 else None
        vendor = host.read_int(f"{path}/vendor", 16)
        if vendor is None and host.is_dir(f"{NVIDIA_GPUS}/{bdf}"):
            vendor = 0x10DE  # partial capture: the NVIDIA driver knows this function
        kind = device_kind(class_code, vendor)
        if kind not in REPORTED_KINDS:
            continue
        parts = path.split("/")
        bridge = next((p for p in parts if _is_host_bridge(p)), None)
        ancestors = tuple(p for p in parts[:-1] if is_bdf(p))
        local = host.read_cpulist(f"{path}/local_cpulist")
        if local is None:
            local = host.read_cpumask(f"{path}/local_cpus")
        names = class_links.get(path, {})
        devices.append(
            PciDevice(
                bdf=bdf,
                path=path,
                class_code=class_code,
                vendor_id=vendor,
                device_id=host.read_int(f"{path}/device", 16),
                kind=kind,
                numa_node=numa if numa is not None and numa >= 0 else None,
                numa_unknown=numa is None,
                local_cpus=tuple(sorted(local or ())),
                link=read_link(host, path),
                driver=host.link_name(f"{path}/driver"),
                ancestors=ancestors,
                host_bridge=bridge,
                netdevs=tuple(sorted(set(host.listdir(f"{path}/net")) | set(names.get("net", ())))),
                rdma=tuple(sorted(set(host.listdir(f"{path}/infiniband")) | set(names.get("infiniband", ())))),
                nvme=tuple(host.listdir(f"{path}/nvme")),
                nvidia=nvidia.get(bdf.lower()),
            )
        )
    devices = [_infer_node(host, d, nodes, node_by_path) for d in devices]
    devices = _merge_kfd(host, devices, nodes, read_kfd(host) if kfd is None else kfd)
    if pci_ids is not None and devices:
        devices = _name_devices(devices, pci_ids)
    # PCI bus order by number (the directory listing's natural sort reads "3b" before "18")
    devices.sort(key=lambda d: pci_sort_key(d.bdf))
    return tuple(devices), skipped


def read_link(host: Host, path: str) -> PciLink:
    def width(name: str) -> int | None:
        try:
            return host.read_int(f"{path}/{name}")
        except ParseError:  # some devices write "unknown": treat as absent
            return None

    return PciLink(
        current_speed=host.read_optional(f"{path}/current_link_speed"),
        current_width=width("current_link_width"),
        max_speed=host.read_optional(f"{path}/max_link_speed"),
        max_width=width("max_link_width"),
    )


def _class_device_names(host: Host) -> dict[str, dict[str, list[str]]]:
    """Device path -> {"net": [...], "infiniband": [...]}, from /sys/class links (partial trees)."""
    out: dict[str, dict[str, list[str]]] = {}
    for cls in ("net", "infiniband"):
        for name in host.listdir(f"/sys/class/{cls}"):
            target = host.resolve(f"/sys/class/{cls}/{name}")
            if not target or f"/{cls}/" not in target:
                continue
            dev = target.rsplit(f"/{cls}/", 1)[0]
            while dev and not is_bdf(dev.rsplit("/", 1)[-1]):
                dev = dev.rsplit("/", 1)[0]  # virtio: .../0000:00:03.0/virtio0/net/eth0
            if not dev:
                continue
            out.setdefault(dev, {}).setdefault(cls, []).append(name)
    return out


def _read_nvidia(host: Host) -> dict[str, NvidiaGpuInfo]:
    out = {}
    for name in host.listdir(NVIDIA_GPUS):
        text = host.read_optional(f"{NVIDIA_GPUS}/{name}/information")
        if text:
            out[name.lower()] = parse_nvidia_information(text, f"{NVIDIA_GPUS}/{name}/information")
    return out


def _infer_node(
    host: Host, dev: PciDevice, nodes: tuple[NumaNode, ...], node_by_path: dict[str, int | None]
) -> PciDevice:
    if dev.numa_node is not None:
        return dev
    local = set(dev.local_cpus)
    all_cpus = {c for n in nodes for c in n.cpus}
    if local and local != all_cpus and len(nodes) > 1:
        candidates = [n.id for n in nodes if n.cpus and local <= set(n.cpus)]
        if len(candidates) == 1:
            return dev._replace(inferred_node=candidates[0], inferred_from="local_cpulist")
    with_cpus = [n for n in nodes if n.cpus]
    if len(with_cpus) == 1 and local and local <= set(with_cpus[0].cpus):
        # One node with CPUs and the device's CPUs are on it: nowhere else it could be (as nvidia-smi reads it).
        return dev._replace(inferred_node=with_cpus[0].id, inferred_from="the only node with CPUs")
    # Walk up the hierarchy: a bridge above may carry the _PXM the function lacks.
    parts = dev.path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        parent = "/".join(parts[:i])
        if not is_bdf(parts[i - 1]):
            break
        node = node_by_path.get(parent)
        if parent not in node_by_path:
            value = host.read_int(f"{parent}/numa_node")
            node = value if value is not None and value >= 0 else None
        if node is not None:
            return dev._replace(inferred_node=node, inferred_from="upstream bridge")
    return dev


def _merge_kfd(host: Host, devices: list[PciDevice], nodes: tuple[NumaNode, ...], kfd: Kfd) -> list[PciDevice]:
    """AMD GPUs from the KFD (HSA) topology, with the CPU agent each hangs off.

    CPU agents come first, one per NUMA node with CPUs: the n-th CPU agent is the n-th such node.
    When the tree has fewer nodes with CPUs than the KFD has CPU agents (no CPU or NUMA
    information was captured), the agent is kept (`kfd_cpu_agent`) but no node is inferred from it:
    a node the tree does not have is never shown.
    """
    if not kfd.agents:
        return devices
    cpu_kfd = sorted(a.id for a in kfd.agents if a.cpu)
    cpu_numa = [n.id for n in nodes if n.cpus]
    kfd_to_numa = {k: cpu_numa[idx] for idx, k in enumerate(cpu_kfd) if idx < len(cpu_numa)}
    if len(cpu_numa) != len(cpu_kfd):
        kfd_to_numa = {}  # the agents cannot be matched to this tree's nodes one to one
    by_bdf = {d.bdf.lower(): i for i, d in enumerate(devices)}
    home_agent = cpu_agents(kfd)  # every agent's CPU agent in one pass over the links
    seen: set[str] = set()
    for agent in sorted(kfd.agents, key=lambda a: a.id):
        bdf = agent.bdf
        if bdf is None or bdf in seen:  # partitions (CPX) of one GPU share its PCI function
            continue
        seen.add(bdf)
        cpu_agent = home_agent.get(agent.id)
        home = kfd_to_numa.get(cpu_agent) if cpu_agent is not None else None
        if bdf in by_bdf:
            dev = devices[by_bdf[bdf]]
            infer = dev.numa_node is None and dev.inferred_node is None and home is not None
            devices[by_bdf[bdf]] = dev._replace(
                amd_kfd_node=agent.id,
                kfd_cpu_agent=cpu_agent,
                inferred_node=home if infer else dev.inferred_node,
                inferred_from="kfd io_link" if infer else dev.inferred_from,
            )
            continue
        devices.append(
            PciDevice(
                bdf=bdf,
                path="",
                class_code=0x038000,
                vendor_id=agent.props.get("vendor_id"),
                device_id=agent.props.get("device_id"),
                kind="gpu",
                numa_node=None,
                numa_unknown=True,  # no PCI sysfs in this tree: the KFD topology alone knows the GPU
                inferred_node=home,
                inferred_from="kfd io_link" if home is not None else None,
                amd_kfd_node=agent.id,
                kfd_cpu_agent=cpu_agent,
            )
        )
    return devices


def _name_devices(devices: list[PciDevice], pci_ids: str) -> list[PciDevice]:
    from numatune.errors import InputError
    from numatune.system.infile import read_input

    try:  # a regular file only, bounded: a FIFO or /dev/zero named by NUMATUNE_PCI_IDS is never opened
        db = read_input(pci_ids, "pci.ids", 16 << 20)
    except InputError:
        return devices
    vendors: dict[int, tuple[str, int] | None] = {}  # each vendor's line found once, not once a device
    out = []
    for d in devices:
        vendor_name, device_name = lookup_pci_ids(db, d.vendor_id, d.device_id, vendors)
        out.append(d._replace(vendor_name=vendor_name, device_name=device_name))
    return out


def lookup_pci_ids(db: bytes, vendor: int | None, device: int | None,
                   vendors: dict[int, tuple[str, int] | None] | None = None) -> tuple[str | None, str | None]:
    """Find names in pci.ids without parsing the whole 1.3 MB file (bytes.find and bytes.count run in C,
    and no regular expression is compiled: the report paths start without `re`); `vendors` keeps each
    vendor's (name, end of its line) across calls, since finding Intel reads ~1 MB."""
    if vendor is None:
        return None, None
    found = vendors.get(vendor, False) if vendors is not None else False
    if found is False:
        found = _vendor_line(db, vendor)
        if vendors is not None:
            vendors[vendor] = found
    if found is None:
        return None, None
    vendor_name, line_end = found
    if device is None:
        return vendor_name, None
    dkey = b"\n\t%04x  " % device
    pos = db.find(dkey, line_end - 1)
    # Inside the vendor's block every line is a device or subsystem line (a tab first) or a comment: a
    # match after another kind of line (the next vendor's, the class list) belongs to someone else.
    if pos < 0 or db.count(b"\n", line_end, pos) != db.count(b"\n\t", line_end, pos) + db.count(b"\n#", line_end, pos):
        return vendor_name, None
    end = db.find(b"\n", pos + 1)
    return vendor_name, db[pos + len(dkey) : end].decode("utf-8", "replace").strip()


def _vendor_line(db: bytes, vendor: int) -> tuple[str, int] | None:
    key = b"\n%04x  " % vendor
    start = db.find(key)
    if start < 0:
        return None
    line_end = db.find(b"\n", start + 1)
    return db[start + len(key) : line_end].decode("utf-8", "replace").strip(), line_end


def pci_ids_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """NUMATUNE_PCI_IDS names the pci.ids file ("" turns names off); else the installed one."""
    override = (os.environ if environ is None else environ).get("NUMATUNE_PCI_IDS")
    if override is not None:
        return override or None
    return find_pci_ids()


def find_pci_ids() -> str | None:
    """The local pci.ids database (pciutils/hwdata), if installed."""
    for candidate in ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids"):
        if os.path.isfile(candidate):
            return candidate
    return None
