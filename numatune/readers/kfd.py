"""The AMD KFD (HSA) topology: CPU and GPU agents, and the links between them (io_links, p2p_links).

/sys/class/kfd/kfd/topology/nodes/N/properties describes agent N (CPU agents have cpu_cores_count and
no SIMDs); nodes/N/io_links/M/properties its direct links (type 2 PCIe, 11 XGMI, 1 the inter-socket
link between CPU agents), nodes/N/p2p_links/M the indirect GPU-to-GPU paths the kernel worked out
(their weight sums the segments). rocm-smi reads the same files (rocm_smi_lib, rocm_smi_kfd.cc).
"""

from __future__ import annotations

from numatune.errors import ParseError
from numatune.model._record import record
from numatune.numbers import maybe_int
from numatune.pieces import lines
from numatune.system.host import Host, numbered

KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
# CRAT io_link types (linux drivers/gpu/drm/amd/amdkfd/kfd_crat.h)
IOLINK_TYPES = {1: "hypertransport", 2: "pcie", 11: "xgmi"}
XGMI = 11


@record
class KfdLink:
    node_from: int
    node_to: int
    type: int  # CRAT io_link type: 2 PCIe, 11 XGMI
    weight: int | None
    min_bandwidth_mbps: int | None  # XGMI: one link's bandwidth
    max_bandwidth_mbps: int | None  # XGMI: every link of the pair (num_links x one link)
    direct: bool  # io_links (a link), not p2p_links (a path over several)


@record
class KfdAgent:
    id: int
    cpu: bool  # a CPU agent (cpu_cores_count > 0, no SIMDs)
    bdf: str | None  # GPU agents: the PCI function, from location_id and domain
    hive_id: int | None
    props: dict


#: Every GPU partition is an agent (an MI300X in CPX mode is 8): 8 to 16 GPUs of 8 partitions and the CPU
#: sockets are far below this. Each agent is read, indexed and, as a GPU, placed in the report: 4,000 agents
#: in a 260 KB archive cost 1.9-3.5 GB; a topology listing more is refused, naming it.
MAX_AGENTS = 1024


@record
class Kfd:
    agents: tuple[KfdAgent, ...] = ()
    links: tuple[KfdLink, ...] = ()

    def agent(self, node: int) -> KfdAgent | None:
        """One lookup (a scan); `agents_by_id` for many."""
        return next((a for a in self.agents if a.id == node), None)

    def cpu_agent_of(self, node: int) -> int | None:
        """The CPU agent a GPU agent hangs off (one lookup; `cpu_agents` answers for every agent at once)."""
        return cpu_agents(self).get(node)

    def link(self, a: int, b: int, *, direct: bool | None = None) -> KfdLink | None:
        return next((x for x in self.links if x.node_from == a and x.node_to == b
                     and (direct is None or x.direct == direct)), None)


def agents_by_id(kfd: Kfd) -> dict[int, KfdAgent]:
    return {a.id: a for a in reversed(kfd.agents)}  # the first of a repeated id, as Kfd.agent finds it


def cpu_agents(kfd: Kfd) -> dict[int, int]:
    """Agent -> the CPU agent it hangs off: its lowest-weight direct link to a CPU (as rocm-smi picks it, the
    first of equal weights); one pass over the links, not one a GPU."""
    cpus = {a.id for a in kfd.agents if a.cpu}
    best: dict[int, KfdLink] = {}
    for link in kfd.links:
        if link.direct and link.node_to in cpus:
            held = best.get(link.node_from)
            if held is None or (link.weight or 0) < (held.weight or 0):
                best[link.node_from] = link
    return {node: link.node_to for node, link in best.items()}


def parse_kfd_properties(text: str, where: str = "properties") -> dict[str, int]:
    """`name value` lines; values are integers (a hive_id may exceed 64-bit signed)."""
    out = {}
    for number, line in enumerate(lines(text, where), 1):
        parts = line.split(None, 2)
        if len(parts) == 2:
            value = maybe_int(parts[1], where, line=number)
            if value is not None:
                out[parts[0]] = value
    return out


def kfd_bdf(props: dict[str, int]) -> str:
    loc = props.get("location_id", 0)
    return f"{props.get('domain', 0):04x}:{(loc >> 8) & 0xFF:02x}:{(loc >> 3) & 0x1F:02x}.{loc & 0x7:x}"


def read_kfd(host: Host) -> Kfd:
    ids = [i for i in host.listdir(KFD_NODES) if numbered(i, "") is not None]
    if not ids:
        return Kfd()
    if len(ids) > MAX_AGENTS:
        raise ParseError(KFD_NODES, f"{len(ids):,} agents, more than the {MAX_AGENTS} any machine's KFD lists")
    agents, links = [], []
    for i in ids:
        node = numbered(i, "")
        p = parse_kfd_properties(host.read_optional(f"{KFD_NODES}/{i}/properties") or "", f"{KFD_NODES}/{i}/properties")
        gpu = p.get("simd_count", 0) > 0
        agents.append(KfdAgent(
            id=node,
            cpu=p.get("cpu_cores_count", 0) > 0 and not gpu,
            bdf=kfd_bdf(p) if gpu and "location_id" in p else None,
            hive_id=p.get("hive_id") or None,
            props=p,
        ))
        for sub, direct in (("io_links", True), ("p2p_links", False)):
            for name in host.listdir(f"{KFD_NODES}/{i}/{sub}"):
                lp = parse_kfd_properties(host.read_optional(f"{KFD_NODES}/{i}/{sub}/{name}/properties") or "")
                if "node_to" not in lp:
                    continue
                links.append(KfdLink(
                    node_from=lp.get("node_from", node),
                    node_to=lp["node_to"],
                    type=lp.get("type", 0),
                    weight=lp.get("weight"),
                    min_bandwidth_mbps=lp.get("min_bandwidth") or None,
                    max_bandwidth_mbps=lp.get("max_bandwidth") or None,
                    direct=direct,
                ))
    return Kfd(tuple(agents), tuple(links))


def xgmi_links(kfd: Kfd) -> list[tuple[str, str, KfdLink]]:
    """Direct XGMI links between GPU agents, once per pair: (bdf a, bdf b, link) with a < b."""
    bdf = {a.id: a.bdf for a in kfd.agents if a.bdf}
    out: dict[tuple[str, str], KfdLink] = {}
    for link in kfd.links:
        if not link.direct or link.type != XGMI:
            continue
        a, b = bdf.get(link.node_from), bdf.get(link.node_to)
        if a is None or b is None or a == b:
            continue
        out.setdefault((min(a, b), max(a, b)), link)
    return [(a, b, link) for (a, b), link in sorted(out.items())]


def xgmi_count(link: KfdLink) -> int | None:
    """Links bonded between the pair: the kernel reports one link's bandwidth as the minimum and every
    link's together as the maximum (amdgpu_amdkfd_get_xgmi_bandwidth_mbytes); None when it reports none."""
    if link.min_bandwidth_mbps and link.max_bandwidth_mbps and link.max_bandwidth_mbps >= link.min_bandwidth_mbps:
        return link.max_bandwidth_mbps // link.min_bandwidth_mbps
    return None


def rocm_smi_topology(kfd: Kfd) -> dict[tuple[str, str], tuple[str, int, int]]:
    """rocm-smi's `--showtopo` reading of every GPU pair: (link type, hops, weight), keyed by BDFs.

    The rules of rocm_smi_lib's rsmi_topo_get_link_type/rsmi_topo_get_link_weight: a direct XGMI
    io_link is XGMI, 1 hop, its weight; otherwise the GPU's link type to its CPU agent, 2 hops on
    the same CPU agent, 3 across a CPU-to-CPU io_link (4 without one), weight = both GPUs' weights to
    their CPU agents + the CPU-to-CPU link's (10 when there is none). Used to check the matrix.
    """
    gpus = [a for a in kfd.agents if a.bdf]
    links: dict[tuple[int, int], KfdLink] = {}
    for x in kfd.links:
        if x.direct:
            links.setdefault((x.node_from, x.node_to), x)
    home = cpu_agents(kfd)
    out = {}
    for src in gpus:
        for dst in gpus:
            if src.id == dst.id:
                continue
            direct = links.get((src.id, dst.id))
            if direct is not None and direct.type == XGMI:
                out[(src.bdf, dst.bdf)] = ("XGMI", 1, direct.weight or 0)
                continue
            cs, cd = home.get(src.id), home.get(dst.id)
            if cs is None or cd is None:
                continue
            up, down = links[(src.id, cs)], links[(dst.id, cd)]
            weight = (up.weight or 0) + (down.weight or 0)
            if cs == cd:
                hops = 2
            else:
                between = links.get((cs, cd))
                hops = 3 if between is not None else 4
                weight += (between.weight or 0) if between is not None else 10
            kind = {2: "PCIE", 11: "XGMI"}.get(up.type, "UNKNOWN")
            out[(src.bdf, dst.bdf)] = (kind, hops, weight)
    return out
