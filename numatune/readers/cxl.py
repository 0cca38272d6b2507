"""CXL memory: memdevs, ports, decoders, regions, and the DAX devices that turn regions into nodes.

Follows Documentation/ABI/testing/sysfs-bus-cxl. The chain a user cares about is
memdev -> region -> DAX device -> NUMA node (DAX `target_node`); a memdev's own `numa_node` is the
node of its host PCI device, not where its memory lands.
"""

from __future__ import annotations

from numatune.model.topology import CxlDecoder, CxlMemdev, CxlPort, CxlRegion, CxlTopology, DaxDevice
from numatune.system.host import Host, numbered

CXL_DEVICES = "/sys/bus/cxl/devices"
DAX_DEVICES = "/sys/bus/dax/devices"
ND_DEVICES = "/sys/bus/nd/devices"
_BDF = r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"  # patterns: `re` is imported only with CXL/DAX
_PORT = r"^(root|port|endpoint)(\d+)$"


def _int_auto(host: Host, path: str) -> int | None:
    text = host.read_optional(path)
    if not text:
        return None
    try:
        return int(text.split()[0], 0)
    except ValueError:
        return None


def read_cxl(host: Host) -> CxlTopology:
    names = host.listdir(CXL_DEVICES)
    if not names and not host.is_dir(DAX_DEVICES):  # most nodes: nothing to match (and `re` stays unloaded)
        return CxlTopology()
    if names:  # DAX alone (hmem, NVDIMM) is matched without the regex engine
        import re

    memdevs, ports, decoders, regions = [], [], [], []
    endpoint_memdev: dict[str, str] = {}
    for name in names:
        base = f"{CXL_DEVICES}/{name}"
        if re.match(r"^mem\d+$", name):
            memdevs.append(_read_memdev(host, name, base))
        elif m := re.match(_PORT, name):
            kind = m.group(1)
            uport_target = host.resolve(f"{base}/uport")
            uport = uport_target.rsplit("/", 1)[-1] if uport_target else host.link_name(f"{base}/uport")
            if kind == "endpoint" and uport:
                endpoint_memdev[m.group(2)] = uport
            real = host.resolve(base) or base
            parent = real.rsplit("/", 2)[-2] if real.count("/") >= 2 else None
            ports.append(
                CxlPort(
                    name=name,
                    kind=kind,
                    uport=uport,
                    dports=tuple(e for e in host.listdir(base) if e.startswith("dport")),
                    parent=parent if parent and re.match(_PORT, parent) else None,
                )
            )
    for name in names:
        if not re.match(r"^decoder\d+\.\d+$", name):
            continue
        base = f"{CXL_DEVICES}/{name}"
        devtype = host.read_optional(f"{base}/devtype") or ""
        kind = devtype.replace("cxl_decoder_", "") or "unknown"
        targets = host.read_optional(f"{base}/target_list") or ""
        decoders.append(
            CxlDecoder(
                name=name,
                kind=kind,
                start=_int_auto(host, f"{base}/start"),
                size=_int_auto(host, f"{base}/size"),
                mode=host.read_optional(f"{base}/mode"),
                interleave_ways=_int_auto(host, f"{base}/interleave_ways"),
                interleave_granularity=_int_auto(host, f"{base}/interleave_granularity"),
                targets=tuple(t for t in targets.split(",") if t),
                region=host.read_optional(f"{base}/region") or None,
            )
        )
    dax = read_dax(host)
    for name in names:
        if not re.match(r"^region\d+$", name):
            continue
        base = f"{CXL_DEVICES}/{name}"
        targets = []
        for entry in host.listdir(base):
            if re.match(r"^target\d+$", entry):
                value = host.read_optional(f"{base}/{entry}")
                if value:
                    targets.append(value)
        mems = []
        for decoder in targets:
            port_id = decoder.removeprefix("decoder").split(".")[0]
            if port_id in endpoint_memdev:
                mems.append(endpoint_memdev[port_id])
        regions.append(
            CxlRegion(
                name=name,
                size=_int_auto(host, f"{base}/size"),
                mode=host.read_optional(f"{base}/mode"),
                interleave_ways=_int_auto(host, f"{base}/interleave_ways"),
                interleave_granularity=_int_auto(host, f"{base}/interleave_granularity"),
                targets=tuple(targets),
                memdevs=tuple(mems),
                dax=(),  # filled below, once pmem regions' DAX devices are matched too
                nodes=(),
            )
        )
    dax = _attach_pmem_dax_to_regions(host, dax, regions)
    regions = [_with_dax(r, dax) for r in regions]
    return CxlTopology(tuple(memdevs), tuple(ports), tuple(decoders), tuple(regions), tuple(dax))


def _read_memdev(host: Host, name: str, base: str) -> CxlMemdev:
    import re

    real = host.resolve(base) or base
    parts = real.split("/")
    bdf = next((p for p in reversed(parts[:-1]) if re.match(_BDF, p)), None)
    bridge = next((p for p in parts if p.startswith("pci") and ":" in p), None)
    numa = host.read_int(f"{base}/numa_node")
    return CxlMemdev(
        name=name,
        ram_size=_int_auto(host, f"{base}/ram/size"),
        pmem_size=_int_auto(host, f"{base}/pmem/size"),
        serial=host.read_optional(f"{base}/serial"),
        firmware_version=host.read_optional(f"{base}/firmware_version"),
        numa_node=numa if numa is not None and numa >= 0 else None,
        pci_bdf=bdf,
        host_bridge=bridge,
    )


def dax_region_at(parts: list[str], *kinds: str) -> int | None:
    r"""Where in a real path's components (`real.split("/")`) the first run KIND0N/KIND1N/.../regionN/ starts
    (each KIND decimal digits; "decoder." is decoderN.M), with a component after the region: as
    re.search(r"/KIND0\d+/.../(region\d+)/"), without loading `re` (DAX-only nodes start without it)."""
    kinds = (*kinds, "region")
    for at in range(1, len(parts) - len(kinds)):
        if all(_numbered_part(parts[at + k], kind) for k, kind in enumerate(kinds)):
            return at
    return None


def _numbered_part(part: str, kind: str) -> bool:
    if kind == "decoder.":
        major, dot, minor = part[len("decoder"):].partition(".") if part.startswith("decoder") else ("", "", "")
        return major.isdecimal() and dot == "." and minor.isdecimal()
    return numbered(part, kind) is not None


def read_dax(host: Host) -> list[DaxDevice]:
    out = []
    for name in host.listdir(DAX_DEVICES):
        base = f"{DAX_DEVICES}/{name}"
        real = host.resolve(base) or ""
        driver = host.link_name(f"{base}/driver")
        target = host.read_int(f"{base}/target_node")
        region = None
        parts = real.split("/")
        if "/nvdimm-bridge" in real and (at := dax_region_at(parts, "root", "nvdimm-bridge", "ndbus")) is not None:
            backing, region = "cxl-nvdimm", f"nd:{parts[at]}/{parts[at + 3]}"  # resolved to a CXL region below
        elif "/ndbus" in real:
            backing = "nvdimm"
            at = dax_region_at(parts, "ndbus")
            region = f"nd:{parts[at + 1]}" if at is not None else None
        elif (at := dax_region_at(parts, "decoder.")) is not None:
            backing, region = "cxl", parts[at + 1]
        elif "hmem" in real:
            backing = "hmem"
        else:
            backing = "unknown"
        out.append(
            DaxDevice(
                name=name,
                target_node=target if target is not None and target >= 0 else None,
                mode="kmem" if driver == "kmem" else ("device_dax" if driver == "device_dax" else driver),
                size=_int_auto(host, f"{base}/size"),
                region=region,
                backing=backing,
            )
        )
    return out


def _attach_pmem_dax_to_regions(host: Host, dax: list[DaxDevice], regions: list[CxlRegion]) -> list[DaxDevice]:
    """A pmem-mode CXL region becomes an NVDIMM region on the CXL root's nvdimm-bridge first.

    sysfs has no link from that NVDIMM region back to the CXL region, so match them: the NVDIMM
    bus sits under the CXL root (`rootN/nvdimm-bridgeM/ndbusK`), and among that root's pmem regions
    the one of the same size is it (the only one, on most machines).
    """
    by_root: dict[str, list[CxlRegion]] = {}
    for r in regions:
        real = host.resolve(f"{CXL_DEVICES}/{r.name}") or ""
        root = next((p for p in real.split("/") if numbered(p, "root") is not None), None)
        if root and r.mode == "pmem":
            by_root.setdefault(root, []).append(r)
    out = []
    for d in dax:
        if d.backing == "cxl-nvdimm" and d.region and d.region.startswith("nd:"):
            root, nd_region = d.region[3:].split("/")
            candidates = by_root.get(root, [])
            size = host.read_int(f"{ND_DEVICES}/{nd_region}/size")
            same_size = [r for r in candidates if size is not None and r.size == size]
            match = same_size if len(same_size) == 1 else candidates if len(candidates) == 1 else []
            d = d._replace(region=match[0].name if match else None, backing="cxl")
        out.append(d)
    return out


def _with_dax(region: CxlRegion, dax: list[DaxDevice]) -> CxlRegion:
    mine = [d for d in dax if d.region == region.name]
    return region._replace(
        dax=tuple(d.name for d in mine),
        nodes=tuple(sorted({d.target_node for d in mine if d.target_node is not None})),
    )
