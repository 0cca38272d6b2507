"""Physical cores of a node, in the order the CPU-binding plans split them (launch, irq plan, and the
torchrun comparison): pure helpers below plan.launch and plan.irq, which both use them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from numatune.model.topology import Topology


def physical_cores(topo: Topology, cpus: Iterable[int]) -> list[tuple[int, ...]]:
    """Group CPUs into cores (SMT siblings together), ordered by their first CPU id."""
    wanted = set(cpus)
    sib = {c.id: c.siblings for c in topo.cpus if c.online}
    seen: set[int] = set()
    cores = []
    for cpu in sorted(wanted):
        if cpu in seen:
            continue
        group = tuple(s for s in sib.get(cpu, (cpu,)) if s in wanted) or (cpu,)
        seen.update(group)
        cores.append(group)
    return cores


def even_share(total: int, count: int, index: int, *, spread: bool = True) -> tuple[int, int]:
    """[start, end) of item `index` when `total` items are split evenly among `count`: the first
    `total % count` get one more (as torchrun's --numa-binding=exclusive splits a node's cores), or,
    without `spread`, the leftover stays unused."""
    per, extra = divmod(total, count)
    extra = extra if spread else 0
    start = index * per + min(index, extra)
    return start, start + per + (1 if index < extra else 0)


def topology_order(
    topo: Topology, cores: Sequence[tuple[int, ...]], cache_groups: Sequence[frozenset[int]] = ()
) -> list[tuple[int, ...]]:
    """Cores in topology order: by package, die and last-level-cache group (each group at the place of its
    lowest CPU), then CPU number. Where the firmware numbers CPUs linearly this is CPU order; where it does
    not (consecutive CPUs alternating between sockets or L3 groups), a contiguous slice of this order stays
    within one socket / L3 group while a slice in CPU-number order (torchrun's) spans several."""
    by_id = {c.id: c for c in topo.cpus}
    llc = {cpu: min(g) for g in cache_groups for cpu in g}

    def key(core: tuple[int, ...]) -> tuple[int, int, int, int]:
        c = by_id.get(core[0])
        package = c.package if c and c.package is not None else -1
        die = c.die if c and c.die is not None else -1
        return package, die, llc.get(core[0], -1), core[0]

    firsts: dict[tuple[int, int], int] = {}  # (package, die) -> its lowest CPU: packages keep their CPU order
    for core in cores:
        k = key(core)
        firsts[k[:2]] = min(firsts.get(k[:2], core[0]), core[0])
    return sorted(cores, key=lambda core: (firsts[key(core)[:2]], *key(core)[2:]))


def is_linear(ordered: Sequence[tuple[int, ...]]) -> bool:
    """True when topology order is CPU-number order."""
    return [core[0] for core in ordered] == sorted(core[0] for core in ordered)


def cluster_summary(topo: Topology) -> str | None:
    """Sub-NUMA clustering in one phrase, for the schedulers' notes: "SNC-4: 4 NUMA nodes per socket, node 0 holds 12
    of socket 0's 48 cores and 63.0 of its 252.0 GiB"; None without clustering (one CPU node per socket, a VM)."""
    from numatune.model.gpumem import clustering

    name, per_socket = clustering(topo)
    if name is None:
        return None
    socket, nodes = next((p, ns) for p, ns in per_socket.items() if len(ns) > 1)
    online = frozenset(topo.cpu.online)
    first = topo.node(nodes[0])
    cores = len(physical_cores(topo, (c for c in first.cpus if c in online)))
    socket_cores = len(physical_cores(topo, (c for n in nodes for c in topo.node(n).cpus if c in online)))
    text = (f"{name}: {len(nodes)} NUMA nodes per socket, node {first.id} holds {cores} of socket {socket}'s "
            f"{socket_cores} cores")
    socket_kib = sum(topo.node(n).memory_total_kib or 0 for n in nodes)
    if socket_kib and first.memory_total_kib:
        text += f" and {first.memory_total_kib / 1048576:.1f} of its {socket_kib / 1048576:.1f} GiB"
    return text
