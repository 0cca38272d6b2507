"""Which CXL nodes serve a caller, and in what shares: always seen from the caller's (or its GPU's) node.

A CXL node behind the other socket is reached over the inter-socket link: its HMAT figures for its own
socket's CPUs say nothing about what a caller on this socket gets. So the default set is the CXL nodes
on the caller's socket (those whose nearest CPU node by SLIT is the caller's node), a far-socket node
is used only when this socket has none (and the reason says so), and stripe shares come from the
caller's row: HMAT read bandwidth listed for the caller's node as initiator, or bandwidths measured
from it (`numatune probe`). Sysfs lists only each target's best initiators (access0/access1), so a
far node has no figure from the caller: shares are then equal, and the reason says which figure was
missing. Pure: the Topology comes in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from numatune.cpulist import format_cpulist
from numatune.model._record import record
from numatune.model.topology import NumaNode, Topology


@record
class CxlChoice:
    nodes: tuple[int, ...]
    reason: str  # how they were chosen (names far-socket nodes)
    far: tuple[int, ...]  # the chosen nodes that sit behind another socket


def nearest_cpu_node(topo: Topology, mem: NumaNode) -> int | None:
    """The node with CPUs nearest (SLIT) to a memory node; ties to the lowest id."""
    dists = [(n.distances.get(mem.id), n.id) for n in topo.nodes if n.cpus and n.distances.get(mem.id) is not None]
    return min(dists)[1] if dists else None


def all_cxl(topo: Topology) -> tuple[int, ...]:
    return tuple(n.id for n in topo.nodes if n.kind == "cxl" and n.memory_total_kib != 0)


def same_socket(topo: Topology, node: int) -> tuple[int, ...]:
    """CXL nodes whose nearest CPU node is `node` (the caller's socket)."""
    return tuple(m for m in all_cxl(topo) if nearest_cpu_node(topo, topo.node(m)) == node)  # type: ignore[arg-type]


def far_of(topo: Topology, node: int | None, nodes: Sequence[int]) -> tuple[int, ...]:
    """The nodes of `nodes` that are CXL behind another socket than `node`'s."""
    if node is None:
        return ()
    near = set(same_socket(topo, node))
    return tuple(n for n in nodes if n not in near and (m := topo.node(n)) is not None and m.kind == "cxl")


def default_cxl(topo: Topology, node: int | None) -> CxlChoice:
    """The CXL nodes a caller on `node` should use: its socket's; every CXL node when it has none (or the
    node is unknown), with the far ones named. Empty when the root has no CXL node."""
    every = all_cxl(topo)
    if not every:
        return CxlChoice((), "no CXL node", ())
    if node is None:
        return CxlChoice(every, "every CXL node (the caller's node is unknown)", ())
    near = same_socket(topo, node)
    if near:
        left = [n for n in every if n not in near]
        also = f"; far-socket CXL node(s) {format_cpulist(left)} left out" if left else ""
        return CxlChoice(near, f"CXL node(s) on node {node}'s socket{also}", ())
    return CxlChoice(every, f"far-socket CXL node(s) {format_cpulist(every)}: no CXL node on node {node}'s socket "
                     "(every access crosses the inter-socket link)", every)


def caller_weights(topo: Topology, initiator: int | None, nodes: Sequence[int],
                   measured: Mapping[int, float] | None = None) -> tuple[dict[int, float], str]:
    """({node: weight}, source) for striping over `nodes` as seen from `initiator`: measured bandwidths
    (probe, from that node) when given for every node, else HMAT read bandwidth from that node, else equal."""
    if measured and all(measured.get(n) for n in nodes):
        return ({n: float(measured[n]) for n in nodes},
                "measured bandwidth " + ", ".join(f"node {n} {measured[n]:g} MB/s" for n in nodes))
    if initiator is None:
        return dict.fromkeys(nodes, 1.0), "equal shares (the caller's node is unknown)"
    bws = {}
    for n in nodes:
        m = topo.node(n)
        bws[n] = m.hmat_from(initiator)[1] if m else None
    missing = [n for n, b in bws.items() if not b]
    if not missing:
        return ({n: float(b) for n, b in bws.items()},  # type: ignore[arg-type]
                f"HMAT read bandwidth from node {initiator}: "
                + ", ".join(f"node {n} {b} MB/s" for n, b in bws.items()))
    return (dict.fromkeys(nodes, 1.0), f"equal shares: HMAT gives no bandwidth from node {initiator} to node(s) "
            f"{format_cpulist(missing)}")
