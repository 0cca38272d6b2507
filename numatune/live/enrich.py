"""Optional enrichment for live runs only (root "/"): py-cpuinfo and pyudev.

Neither can read a saved root (py-cpuinfo shells out to the live /proc, pyudev's sysfs is fixed
at /sys), so no reader depends on them: they only fill gaps on the live
node, they are imported lazily, and their absence or failure leaves the report as it was.
"""

from __future__ import annotations

from numatune.model.topology import PciDevice, Topology

TYPE_CHECKING = False  # annotations only: the reports start without collections.abc
if TYPE_CHECKING:
    from collections.abc import Callable

    from numatune.system.host import Host


def read_inspect_topology(host: Host, pci_ids: str | None, *, names: bool = True) -> Topology:
    """The topology inspect, check and emit report: everything read, plus what only the live node tells.
    `names=False` (check, whose report names no device by vendor or model) reads no pci.ids and asks
    udev for no names: 1.3 MB read and searched for nothing."""
    from numatune.readers.topology import read_topology

    topo = read_topology(host, pci_ids=pci_ids if names else None)
    return enrich_topology(topo, names=names) if topo.live else topo


def enrich_topology(topo: Topology, *, cpu_brand: Callable[[], str | None] | None = None,
                    udev_names: Callable[[str], tuple[str | None, str | None]] | None = None,
                    names: bool = True) -> Topology:
    """Fill what the kernel files left empty: the CPU brand (arm64 /proc/cpuinfo names none) and
    device names from udev's hardware database when no pci.ids file is installed."""
    if not topo.live:
        return topo
    if not topo.cpu.model or topo.cpu.model.startswith("ARM implementer"):
        brand = _safely(cpu_brand or _cpuinfo_brand)
        if brand:
            topo = topo._replace(cpu=topo.cpu._replace(model=brand, model_source="py-cpuinfo"))
    unnamed = [d for d in topo.devices if d.path and d.vendor_name is None] if names else []
    if unnamed:
        lookup = udev_names or _udev_names
        devices = tuple(_named(d, lookup) if d in unnamed else d for d in topo.devices)
        topo = topo._replace(devices=devices)
    return topo


def _named(dev: PciDevice, lookup: Callable[[str], tuple[str | None, str | None]]) -> PciDevice:
    names = _safely(lambda: lookup(dev.path))
    if not names or not any(names):
        return dev
    return dev._replace(vendor_name=names[0], device_name=names[1])


def _safely(func: Callable[[], object]):  # noqa: ANN202 - any optional value
    try:
        return func()
    except Exception:  # noqa: BLE001 - enrichment must never break a report
        return None


def _cpuinfo_brand() -> str | None:
    import cpuinfo  # py-cpuinfo

    return cpuinfo.get_cpu_info().get("brand_raw") or None


def _udev_names(sys_path: str) -> tuple[str | None, str | None]:
    import pyudev

    device = pyudev.Devices.from_sys_path(pyudev.Context(), sys_path)
    props = device.properties
    return props.get("ID_VENDOR_FROM_DATABASE"), props.get("ID_MODEL_FROM_DATABASE")
