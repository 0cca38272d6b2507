"""CXL memory: memdevs, ports, decoders, regions, and the DAX devices that turn regions into nodes.

Follows Documentation/ABI/testing/sysfs-bus-cxl. The chain a user cares about is
memdev -> region -> DAX device -> NUMA node (DAX `target_node`); a memdev's own `numa_node` is the
node of its host PCI device, not where its memory lands.
"""

from __future__ import annotations

from numatune.errors import ParseError
from numatune.model.links import gbps, generation, parse_gts
from numatune.model.topology import (
    CxlDecoder,
    CxlDport,
    CxlLink,
    CxlMemdev,
    CxlPmu,
    CxlPmuEvent,
    CxlPort,
    CxlRegion,
    CxlRegionMember,
    CxlTopology,
    DaxDevice,
)
from numatune.numbers import maybe_int
from numatune.pieces import MAX_FIELDS, split
from numatune.readers.pci import read_link
from numatune.system.host import Host, numbered

CXL_DEVICES = "/sys/bus/cxl/devices"
EVENT_SOURCES = "/sys/bus/event_source/devices"
#: Events that count host memory traffic per request of one 64-byte line (CXL PMU event names, CXL 3.0 13.2).
READ_EVENTS = ("m2s_req_memrd", "s2m_drs_memdata")
WRITE_EVENTS = ("m2s_rwd_memwr",)
DAX_DEVICES = "/sys/bus/dax/devices"
ND_DEVICES = "/sys/bus/nd/devices"
_BDF = r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"  # patterns: `re` is imported only with CXL/DAX
_PORT = r"^(root|port|endpoint)(\d+)$"


def _int_auto(host: Host, path: str) -> int | None:
    text = host.read_optional(path)
    if not text:
        return None
    return maybe_int(text.split(None, 1)[0], path, base=0)  # "0x" and 4,000 hex digits: ParseError, not a size


def read_cxl(host: Host) -> CxlTopology:
    names = host.listdir(CXL_DEVICES)
    if not names and not host.is_dir(DAX_DEVICES):  # most nodes: nothing to match (and `re` stays unloaded)
        return CxlTopology(pmus=read_cxl_pmus(host))
    if names:  # DAX alone (hmem, NVDIMM) is matched without the regex engine
        import re

    memdevs, ports, decoders, regions = [], [], [], []
    region_positions: dict[str, list[tuple[int, str]]] = {}
    endpoint_memdev: dict[str, str] = {}
    for name in names:
        base = f"{CXL_DEVICES}/{name}"
        if re.match(r"^mem\d+$", name):
            memdevs.append(_read_memdev(host, name, base))
        elif m := re.match(_PORT, name):
            kind = m.group(1)
            port = _read_port(host, name, kind, base)
            if kind == "endpoint" and port.uport:
                endpoint_memdev[m.group(2)] = port.uport
            ports.append(port)
    for name in names:
        if not re.match(r"^decoder\d+\.\d+$", name):
            continue
        base = f"{CXL_DEVICES}/{name}"
        devtype = host.read_optional(f"{base}/devtype") or ""
        kind = devtype.replace("cxl_decoder_", "") or "unknown"
        targets = host.read_optional(f"{base}/target_list") or ""
        real = host.resolve(base) or base
        owner = real.rsplit("/", 2)[-2] if real.count("/") >= 2 else None
        decoders.append(
            CxlDecoder(
                name=name,
                kind=kind,
                start=_int_auto(host, f"{base}/start"),
                size=_int_auto(host, f"{base}/size"),
                mode=host.read_optional(f"{base}/mode"),
                interleave_ways=_int_auto(host, f"{base}/interleave_ways"),
                interleave_granularity=_int_auto(host, f"{base}/interleave_granularity"),
                targets=tuple(t for t in split(targets, ",", f"{base}/target_list", MAX_FIELDS, "targets") if t),
                region=host.read_optional(f"{base}/region") or None,
                port=owner if owner and re.match(_PORT, owner) else None,
            )
        )
    dax = read_dax(host)
    for name in names:
        if not re.match(r"^region\d+$", name):
            continue
        base = f"{CXL_DEVICES}/{name}"
        positions = []
        for entry in host.listdir(base):
            position = numbered(entry, "target")
            if position is not None:
                value = host.read_optional(f"{base}/{entry}")
                if value:
                    positions.append((position, value))
        positions.sort()
        region_positions[name] = positions
        targets = [value for _, value in positions]
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
                members=(),  # filled below, once the tree is linked
                uuid=host.read_optional(f"{base}/uuid") or None,
            )
        )
    dax = _attach_pmem_dax_to_regions(host, dax, regions)
    regions = [_with_dax(r, dax) for r in regions]
    ports, memdevs, links = _link_tree(host, ports, memdevs)
    regions = [_with_members(r, region_positions.get(r.name, []), ports, memdevs) for r in regions]
    return CxlTopology(tuple(memdevs), tuple(ports), tuple(decoders), tuple(regions), tuple(dax), tuple(links),
                       read_cxl_pmus(host))


def read_cxl_pmus(host: Host) -> tuple[CxlPmu, ...]:
    """The CXL PMUs perf has registered (cxl_pmu driver, kernel 6.5+); () when there are none."""
    names = [n for n in host.listdir(EVENT_SOURCES) if n.startswith("cxl_pmu_")]
    out = []
    for name in sorted(names):
        base = f"{EVENT_SOURCES}/{name}"
        memdev = name.removeprefix("cxl_pmu_").split(".")[0] or None
        try:
            pmu_type = host.read_int(f"{base}/type")
        except ParseError:
            pmu_type = None
        try:
            cpus = host.read_cpulist(f"{base}/cpumask")
        except ParseError:
            cpus = None
        formats = {f: host.read_optional(f"{base}/format/{f}") or "" for f in host.listdir(f"{base}/format")}
        events = sorted(host.listdir(f"{base}/events"))
        read, write = (_first_event(host, base, events, formats, choices) for choices in (READ_EVENTS, WRITE_EVENTS))
        out.append(CxlPmu(name, memdev if memdev and memdev.startswith("mem") else None, pmu_type,
                          min(cpus) if cpus else None, tuple(events), read, write))
    return tuple(out)


def _first_event(host: Host, base: str, events: list[str], formats: dict[str, str],
                 choices: tuple[str, ...]) -> CxlPmuEvent | None:
    for e in choices:
        if e in events:
            made = pmu_event(e, host.read_optional(f"{base}/events/{e}") or "", formats, f"{base}/events/{e}")
            if made is not None:
                return made
    return None


def pmu_event(name: str, spec: str, formats: dict[str, str], where: str = "events") -> CxlPmuEvent | None:
    """An event's "vid=0x1e98,gid=0x10,mask=0x1" placed into config/config1/config2 by the PMU's format
    files ("config:0-15", "config1:32"); None when a term has no format or a value does not parse."""
    words = {"config": 0, "config1": 0, "config2": 0}
    for term in (t.strip() for t in split(spec, ",", where, MAX_FIELDS, "terms") if t.strip()):
        key, _, value = term.partition("=")
        fmt = formats.get(key.strip(), "").strip()
        field, _, bits = fmt.partition(":")
        if field not in words or not bits:
            return None
        lo, _, hi = bits.partition("-")
        number = maybe_int(value, where, base=0) if value else 1
        lo_bit, hi_bit = maybe_int(lo, where), maybe_int(hi or lo, where)
        if number is None or lo_bit is None or hi_bit is None or not 0 <= lo_bit <= hi_bit < 64:
            return None
        width = hi_bit - lo_bit + 1
        words[field] |= (number & ((1 << width) - 1)) << lo_bit
    return CxlPmuEvent(name, words["config"], words["config1"], words["config2"])


def _read_port(host: Host, name: str, kind: str, base: str) -> CxlPort:
    """One CXL port: what it stands for (`uport`), its downstream ports and the dport above it."""
    import re

    uport_target = host.resolve(f"{base}/uport")
    uport = uport_target.rsplit("/", 1)[-1] if uport_target else host.link_name(f"{base}/uport")
    real = host.resolve(base) or base
    parent = real.rsplit("/", 2)[-2] if real.count("/") >= 2 else None
    dports = sorted((e for e in host.listdir(base) if numbered(e, "dport") is not None),
                    key=lambda e: numbered(e, "dport"))
    targets = []
    for d in dports:
        target = host.resolve(f"{base}/{d}")
        target_name = target.rsplit("/", 1)[-1] if target else host.link_name(f"{base}/{d}")
        if target_name:
            targets.append(CxlDport(name=d, target=target_name))
    parent_dport_path = host.resolve(f"{base}/parent_dport")
    parent_dport = parent_dport_path.rsplit("/", 1)[-1] if parent_dport_path else host.link_name(
        f"{base}/parent_dport")
    if kind == "root":
        role = "root"
    elif kind == "endpoint":
        role = "endpoint"
    elif uport and uport.startswith("pci") and ":" in uport:
        role = "host-bridge"
    elif uport and re.match(_BDF, uport):
        role = "switch"
    else:
        role = "unknown"
    parts = [p for x in (uport_target, parent_dport_path) if x for p in x.split("/")]
    bridge = next((p for p in parts if p.startswith("pci") and ":" in p), None)
    try:
        committed = host.read_int(f"{base}/decoders_committed")
    except ParseError:  # a malformed count is unknown, not fatal
        committed = None
    return CxlPort(
        name=name,
        kind=kind,
        uport=uport,
        dports=tuple(dports),
        parent=parent if parent and re.match(_PORT, parent) else None,
        role=role,
        dport_targets=tuple(targets),
        parent_dport=parent_dport,
        host_bridge=bridge,
        decoders_committed=committed,
    )


def _pci_path(host: Host, bdf: str) -> str | None:
    return host.resolve(f"/sys/bus/pci/devices/{bdf}")


def _link(host: Host, upstream: str | None, downstream: str | None) -> CxlLink | None:
    """The link between a port function above (`upstream`) and the function below, read on the one below.

    The maximum is the lower of both ends' max_link_* (a x16 device in a x8 slot can only reach x8).
    """
    import re

    if not downstream or not re.match(_BDF, downstream):
        return None
    path = _pci_path(host, downstream)
    if path is None:
        return None
    below = read_link(host, path)
    above_path = _pci_path(host, upstream) if upstream and re.match(_BDF, upstream) else None
    above = read_link(host, above_path) if above_path else None
    max_width = below.max_width
    max_gts = parse_gts(below.max_speed)
    max_speed = below.max_speed
    if above is not None:
        if above.max_width and (max_width is None or above.max_width < max_width):
            max_width = above.max_width
        above_gts = parse_gts(above.max_speed)
        if above_gts and (max_gts is None or above_gts < max_gts):
            max_gts, max_speed = above_gts, above.max_speed
    gts = parse_gts(below.current_speed)
    width = below.current_width if below.current_width is not None and below.current_width > 0 else None
    max_width = max_width if max_width is not None and max_width > 0 else None
    if width is None and gts is None and max_width is None and max_gts is None:
        return None  # no link files at all (a partial tree): nothing to say
    return CxlLink(
        upstream=upstream,
        downstream=downstream,
        width=width,
        speed=below.current_speed,
        max_width=max_width,
        max_speed=max_speed,
        gts=gts,
        max_gts=max_gts,
        generation=generation(gts),
        gbps=gbps(gts, width),
        max_gbps=gbps(max_gts, max_width),
    )


def _link_tree(
    host: Host, ports: list[CxlPort], memdevs: list[CxlMemdev]
) -> tuple[list[CxlPort], list[CxlMemdev], list[CxlLink]]:
    """Give switch ports their upstream link and memdevs their endpoint, dport, switches and link."""
    by_name = {p.name: p for p in ports}
    links: list[CxlLink] = []
    out_ports = []
    for p in ports:
        if p.role == "switch":
            link = _link(host, p.parent_dport, p.uport)
            if link:
                links.append(link)
                p = p._replace(link=link)
        out_ports.append(p)
    by_name = {p.name: p for p in out_ports}
    endpoint_of = {p.uport: p for p in out_ports if p.role == "endpoint" and p.uport}
    out_mems = []
    for m in memdevs:
        ep = endpoint_of.get(m.name)
        if ep is None:
            out_mems.append(m)
            continue
        switches = []
        seen = set()
        parent = by_name.get(ep.parent) if ep.parent else None
        while parent is not None and parent.name not in seen:
            seen.add(parent.name)
            if parent.role == "switch":
                switches.append(parent.name)
            parent = by_name.get(parent.parent) if parent.parent else None
        link = _link(host, ep.parent_dport, m.pci_bdf)
        if link:
            links.append(link)
        out_mems.append(m._replace(port=ep.name, parent_dport=ep.parent_dport, switches=tuple(switches), link=link))
    out_ports = [p._replace(link=next((m.link for m in out_mems if m.port == p.name), None))
                 if p.role == "endpoint" else p for p in out_ports]
    return out_ports, out_mems, links


def _with_members(
    region: CxlRegion, positions: list[tuple[int, str]], ports: list[CxlPort], memdevs: list[CxlMemdev]
) -> CxlRegion:
    members = []
    for position, decoder in positions:
        port_name = "endpoint" + decoder.removeprefix("decoder").split(".")[0]
        mem = next((m for m in memdevs if m.port == port_name), None)
        members.append(
            CxlRegionMember(
                position=position,
                decoder=decoder,
                memdev=mem.name if mem else None,
                endpoint=port_name if any(p.name == port_name for p in ports) else None,
                switch=mem.switches[0] if mem and mem.switches else None,
                dport=mem.parent_dport if mem else None,
                host_bridge=mem.host_bridge if mem else None,
            )
        )
    return region._replace(members=tuple(members))


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
