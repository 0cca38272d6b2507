"""CXL link budgets: which links each CXL memory node's traffic crosses, and how many GPUs lean on them.

The rule of thumb is one CXL 2.0 x16 link (32 GT/s x16, about 63 GB/s per direction) per four GPUs:
eight GPUs spilling to memory behind one such link saturate it. A link of another width or generation
counts in proportion to its rate per direction (an x8 link is two GPUs' worth). A node's traffic
crosses the links at the host-bridge end of each path to its memdevs: a switch's upstream link
when the memdev sits behind switches (the one nearest the host bridge), else the memdev's own link.
The GPUs that use a node are those whose ranks `launch --mem-policy cxl-spill` would spill to it (its
nearest CXL node); weighted interleave and plan-memory stripe over every CXL node, which spreads the
same GPUs over more links.
"""

from __future__ import annotations

from numatune.model._record import record
from numatune.model.links import CXL2_X16_GBPS
from numatune.model.topology import CxlLink, CxlRegion, Topology

GPUS_PER_X16_LINK = 4.0


@record
class NodeBudget:
    node: int
    regions: tuple[str, ...]
    links: tuple[CxlLink, ...]  # the distinct host-side links the node's memory sits behind
    gbps: float | None  # their sum per direction; None when a link's rate is unknown
    gpus: tuple[str, ...]  # BDFs of the GPUs whose ranks spill to this node
    gpus_allowed: float | None  # gpus_per_x16 x gbps / one CXL 2.0 x16 link


def host_side_link(topo: Topology, memdev: str | None) -> CxlLink | None:
    """The link at the host-bridge end of a memdev's path (its farthest switch's upstream link, else its own)."""
    mem = topo.cxl.memdev(memdev)
    if mem is None:
        return None
    for switch in reversed(mem.switches):
        port = topo.cxl.port(switch)
        if port is not None and port.link is not None:
            return port.link
    return mem.link


def region_links(topo: Topology, region: CxlRegion) -> dict[str, CxlLink]:
    """Host-side link per member memdev (memdevs without a readable link are left out)."""
    out = {}
    for m in region.members:
        link = host_side_link(topo, m.memdev)
        if link is not None and m.memdev:
            out[m.memdev] = link
    return out


def _spill_node(topo: Topology, node: int | None) -> int | None:
    if node is None:
        return None
    from numatune.plan.launch import nearest_cxl_node  # cxl-spill's own choice (plan is loaded only here)

    return nearest_cxl_node(topo, node)


def node_budgets(topo: Topology, gpus_per_x16: float = GPUS_PER_X16_LINK) -> list[NodeBudget]:
    """One budget per CXL memory node made by regions whose links are known."""
    out = []
    nodes = sorted({n for r in topo.cxl.regions for n in r.nodes})
    if not nodes:
        return out
    spill = {g.bdf: _spill_node(topo, g.node) for g in topo.gpus}
    for node in nodes:
        regions = [r for r in topo.cxl.regions if node in r.nodes]
        links: dict[str, CxlLink] = {}
        for r in regions:
            for link in region_links(topo, r).values():
                links.setdefault(link.downstream, link)
        if not links:
            continue
        rates = [x.gbps for x in links.values()]
        gbps = round(sum(rates), 2) if all(r is not None for r in rates) else None
        gpus = tuple(bdf for bdf, n in spill.items() if n == node)
        allowed = round(gpus_per_x16 * gbps / CXL2_X16_GBPS, 2) if gbps is not None else None
        out.append(NodeBudget(node, tuple(r.name for r in regions), tuple(links.values()), gbps, gpus, allowed))
    return out


def over_budget(topo: Topology, gpus_per_x16: float = GPUS_PER_X16_LINK) -> list[NodeBudget]:
    return [b for b in node_budgets(topo, gpus_per_x16)
            if b.gpus_allowed is not None and len(b.gpus) > b.gpus_allowed]


def narrow_uplinks(topo: Topology) -> list[tuple[CxlRegion, CxlLink, float]]:
    """(region, the one host-side link all its members share, their own links' summed rate) where that
    link is slower than the members together: the interleave set cannot go faster than it."""
    out = []
    for r in topo.cxl.regions:
        if len(r.members) < 2:
            continue
        shared = region_links(topo, r)
        if len(shared) != len(r.members) or len({x.downstream for x in shared.values()}) != 1:
            continue
        link = next(iter(shared.values()))
        own = [topo.cxl.memdev(m).link for m in shared]
        rates = [x.gbps for x in own if x is not None and x.gbps is not None]
        if len(rates) != len(own) or link.gbps is None:
            continue
        total = round(sum(rates), 2)
        if link.gbps < total:
            out.append((r, link, total))
    return out


def trained_down(topo: Topology) -> list[CxlLink]:
    """Links trained below what both ends can do (width or speed)."""
    return [x for x in topo.cxl.links
            if (x.width and x.max_width and x.width < x.max_width) or (x.gts and x.max_gts and x.gts < x.max_gts)]


def link_label(link: CxlLink) -> str:
    """"x8 32 GT/s (31.5 GB/s per direction)"."""
    rate = f" ({link.gbps:g} GB/s per direction)" if link.gbps is not None else ""
    return f"x{link.width or '?'} {f'{link.gts:g}' if link.gts else '?'} GT/s{rate}"
