"""GPU-to-GPU links beside PCIe: AMD XGMI from the KFD topology, NVIDIA NVLink/NVSwitch from NVML.

NVML is asked (or a saved record read) only when the root has NVIDIA GPUs, so the other paths never
import pynvml or json. NVIDIA GPUs without NVML are reported as "NVLink not visible", never as a
PCIe-only machine.
"""

from __future__ import annotations

from numatune.model.topology import FabricLink, GpuFabric, NvidiaGpuInfo, PciDevice
from numatune.pieces import lines
from numatune.readers.kfd import Kfd, xgmi_count, xgmi_links
from numatune.system.host import Host

NVIDIA = 0x10DE


def read_fabric(host: Host, devices: tuple[PciDevice, ...], kfd: Kfd) -> GpuFabric:
    links = [
        FabricLink(a, b, "xgmi", xgmi_count(link), link.weight, link.min_bandwidth_mbps, link.max_bandwidth_mbps,
                   "kfd io_links")
        for a, b, link in xgmi_links(kfd)
    ]
    fabric = GpuFabric(links=tuple(links))
    if any(d.kind == "gpu" and d.vendor_id == NVIDIA for d in devices):
        from numatune.readers.nvml import read_nvidia_fabric

        nv = read_nvidia_fabric(host)
        fabric = nv._replace(links=fabric.links + nv.links, peer_memory=read_peer_memory(host))
    acs = read_acs(host, devices)
    return fabric._replace(acs=acs) if acs else fabric


def with_nvml_uuids(devices: tuple[PciDevice, ...], fabric: GpuFabric) -> tuple[PciDevice, ...]:
    """GPUs whose /proc/driver/nvidia information is missing (containers) get NVML's UUID and name."""
    if not fabric.nvml_gpus:
        return devices
    by_bdf = {g.bdf: g for g in fabric.nvml_gpus}
    out = []
    for d in devices:
        g = by_bdf.get(d.bdf.lower())
        if g is not None and g.uuid and (d.nvidia is None or not d.nvidia.uuid):
            info = d.nvidia or NvidiaGpuInfo(model=None, uuid=None, minor=None, bus_location=None)
            d = d._replace(nvidia=info._replace(uuid=g.uuid, model=info.model or g.name))
        out.append(d)
    return tuple(out)


PEER_MEMORY_MODULES = ("nvidia_peermem", "nv_peer_mem")
ACS_CAP_ID = 0x000D  # PCIe extended capability: Access Control Services
ACS_REDIRECT = 0x0004 | 0x0008  # ACS control: P2P Request Redirect | P2P Completion Redirect


def read_peer_memory(host: Host) -> str | None:
    """The GPUDirect RDMA peer-memory module loaded (nvidia_peermem, or the older nv_peer_mem);
    "" when /proc/modules says none is; None when the root has no /proc/modules."""
    text = host.read_optional("/proc/modules")
    if text is None:
        return None
    loaded = {line.split(" ", 1)[0] for line in lines(text, "/proc/modules")}
    return next((m for m in PEER_MEMORY_MODULES if m in loaded), "")


def acs_redirect(config: bytes) -> bool | None:
    """Whether ACS redirects peer-to-peer requests upstream, from a function's config space; None when
    the extended space (beyond 256 bytes, root only) is not there or has no ACS capability."""
    if len(config) < 0x108:
        return None
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            control = int.from_bytes(config[offset + 6:offset + 8], "little")
            return bool(control & ACS_REDIRECT)
        offset = (header >> 20) & 0xFFC
    return None


def read_acs(host: Host, devices: tuple[PciDevice, ...]) -> dict[str, str]:
    """ACS state of the bridges above GPUs and NICs (where GPUDirect traffic turns), when config space is readable."""
    from numatune.errors import NumatuneError

    if not any(d.kind == "gpu" for d in devices) or not any(d.kind == "nic" for d in devices):
        return {}
    out: dict[str, str] = {}
    for bdf in sorted({b for d in devices if d.kind in ("gpu", "nic") for b in d.ancestors}):
        try:
            config = host.read_bytes(f"/sys/bus/pci/devices/{bdf}/config")
        except NumatuneError:
            continue
        state = acs_redirect(config)
        if state is not None:
            out[bdf] = "redirect" if state else "no redirect"
    return out
