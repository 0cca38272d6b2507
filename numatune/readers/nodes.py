"""NUMA nodes from /sys/devices/system/node: CPUs, memory, distances, HMAT, tiers, weights."""

from __future__ import annotations

from numatune.cpulist import MAX_NODES
from numatune.errors import ParseError
from numatune.model.findings import Skipped
from numatune.model.topology import WEIGHT_DIR, HmatEntry, HugePages, MemorySideCache, NumaNode
from numatune.numbers import maybe_int, maybe_ints
from numatune.pieces import lines, split
from numatune.system.host import Host, natural_key, numbered

NODE_DIR = "/sys/devices/system/node"
TIER_DIR = "/sys/devices/virtual/memory_tiering"


def parse_node_meminfo(text: str, where: str = "meminfo") -> dict[str, int]:
    """`Node 0 MemTotal:  3762392 kB` lines -> {"MemTotal": 3762392} (kB; HugePages_* are counts)."""
    out: dict[str, int] = {}
    for number, line in enumerate(lines(text, where), 1):
        head, sep, value = line.partition(":")
        if not sep:
            continue
        words = head.rsplit(None, 1)
        key = words[-1] if words else ""
        parts = value.split(None, 1)
        if key and parts:
            value = maybe_int(parts[0], where, line=number)
            if value is not None:
                out[key] = value
    return out


def parse_meminfo(text: str, where: str = "/proc/meminfo") -> dict[str, int]:
    """/proc/meminfo has the same shape without the "Node N" prefix."""
    return parse_node_meminfo(text, where)


def node_ids(host: Host) -> list[int]:
    """The node directories' ids; more than MAX_NODES is ParseError (exit 3): a kernel numbers at most
    MAX_NUMNODES = 1 << NODES_SHIFT nodes, and NODES_SHIFT is at most 10 on every architecture (4,096 nodes of
    distance rows, a 1.1 MB archive, made 16.7 million distances: 2 GB)."""
    ids = sorted(n for name in host.listdir(NODE_DIR) if (n := numbered(name, "node")) is not None)
    if len(ids) > MAX_NODES:
        raise ParseError(NODE_DIR, f"{len(ids):,} nodes, more than the {MAX_NODES:,} any kernel numbers (MAX_NUMNODES)")
    return ids


def read_nodes(
    host: Host, known_cpus: set[int], online_cpus: tuple[int, ...], tiers: dict[int, tuple[int, ...]] | None = None
) -> tuple[tuple[NumaNode, ...], bool, list[Skipped]]:
    """(nodes, numa_kernel, skipped). A kernel without node directories is one node holding everything."""
    skipped: list[Skipped] = []
    ids = node_ids(host)
    if not ids:
        info = parse_meminfo(host.read_optional("/proc/meminfo") or "")
        node = NumaNode(
            id=0,
            cpus=tuple(online_cpus),
            memory_total_kib=info.get("MemTotal"),
            memory_free_kib=info.get("MemFree"),
            distances={0: 10},
            kind="dram",
            kind_evidence="kernel without NUMA: one implicit node",
        )
        return (node,), False, skipped

    order = _distance_order(host, ids)
    if tiers is None:
        tiers = read_memory_tiers(host)
    tier_of = {n: t for t, nodes in tiers.items() for n in nodes}
    weights = read_interleave_weights(host)
    normal = host.read_cpulist(f"{NODE_DIR}/has_normal_memory")
    generic = host.read_cpulist(f"{NODE_DIR}/has_generic_initiator") or frozenset()
    nodes = []
    for nid in ids:
        base = f"{NODE_DIR}/node{nid}"
        # One listing instead of failed opens of what this kernel lacks (unlistable: try all, as before).
        names = set(host.entries(base))
        cpus = host.read_cpulist(f"{base}/cpulist") if "cpulist" in names or not names else None
        if cpus is None:
            cpus = host.read_cpumask(f"{base}/cpumap") or frozenset()
        if known_cpus and not cpus <= known_cpus:
            missing = sorted(cpus - known_cpus)
            skipped.append(Skipped(f"node {nid}", f"cpulist names {len(missing)} CPUs with no cpu directory"))
            cpus = cpus & known_cpus
        meminfo = parse_node_meminfo(host.read_optional(f"{base}/meminfo") or "", f"{base}/meminfo")
        distances, problem = _read_distances(host, base, order)
        if problem:
            skipped.append(Skipped(f"node {nid} distances", problem))
        nodes.append(
            NumaNode(
                id=nid,
                cpus=tuple(sorted(cpus)),
                memory_total_kib=meminfo.get("MemTotal"),
                memory_free_kib=meminfo.get("MemFree"),
                hugepages=_read_hugepages(host, base) if "hugepages" in names or not names else (),
                distances=distances,
                tier=tier_of.get(nid),
                hmat=_read_hmat(host, base, names),
                memory_side_caches=(_read_side_caches(host, base) if "memory_side_cache" in names or not names
                                    else ()),
                interleave_weight=weights.get(nid),
                has_normal_memory=(nid in normal) if normal is not None else None,
                generic_initiator=nid in generic,
            )
        )
    return tuple(nodes), True, skipped


def _distance_order(host: Host, ids: list[int]) -> list[int]:
    """Columns of `distance` follow the online node list, not the directory ids."""
    for name in ("online", "possible"):
        listed = host.read_cpulist(f"{NODE_DIR}/{name}", MAX_NODES)
        if listed and set(ids) <= listed and (name == "online" or len(listed) == len(ids)):
            return sorted(listed)
    return ids


def _read_distances(host: Host, base: str, order: list[int]) -> tuple[dict[int, int], str | None]:
    """The node's row by node id, or {} and why not; read once a Host (snapshot's dry runs read the topology
    eleven times: a 1,000-node tree's million distances each time)."""
    return host.once(f"{base}/distance", lambda: _distance_row(host, base, order))


def _distance_row(host: Host, base: str, order: list[int]) -> tuple[dict[int, int], str | None]:
    text = host.read_optional(f"{base}/distance")
    if text is None:
        return {}, "no distance file"
    try:  # the entries counted before any is made: a row is at most one a node
        split(text, None, f"{base}/distance", len(order) + 1, "entries")
    except ParseError:
        return {}, f"distance row has more than {len(order) + 1} entries for {len(order)} online nodes"
    values = maybe_ints(text, f"{base}/distance")
    if None in values:
        return {}, f"malformed distance row {text[:40]!r}"
    if len(values) != len(order):
        return {}, f"distance row has {len(values)} entries for {len(order)} online nodes"
    return dict(zip(order, values, strict=True)), None


def _read_hugepages(host: Host, base: str) -> tuple[HugePages, ...]:
    out = []
    for name in host.listdir(f"{base}/hugepages"):
        size = numbered(name, "hugepages-", "kB")
        if size is None:
            continue
        d = f"{base}/hugepages/{name}"
        out.append(
            HugePages(
                size_kib=size,
                total=host.read_int(f"{d}/nr_hugepages") or 0,
                free=host.read_int(f"{d}/free_hugepages") or 0,
                surplus=host.read_int(f"{d}/surplus_hugepages") or 0,
            )
        )
    return tuple(out)


HMAT_FIGURES = ("read_latency", "write_latency", "read_bandwidth", "write_bandwidth")


def _read_hmat(host: Host, base: str, names: set[str]) -> tuple[HmatEntry, ...]:
    """accessN/initiators of the node directory BASE, whose entries are NAMES (listed by the caller)."""
    out = []
    for name in sorted((n for n in names if n.startswith("access")), key=natural_key):
        access = numbered(name, "access")
        if access is None:
            continue
        d = f"{base}/{name}/initiators"
        inits = tuple(
            n for entry in host.listdir(d) if (n := numbered(entry, "node")) is not None
        )
        # A 0 is a figure the firmware did not provide (QEMU's and many BIOSes' HMAT leave entries at 0; the kernel
        # prints it as read): unknown, never a 0 ns latency or a 0 MB/s bandwidth.
        figures = {f: host.read_int(f"{d}/{f}") for f in HMAT_FIGURES}
        zero = [f for f, v in figures.items() if v == 0]
        known = {f: (v or None) for f, v in figures.items()}
        out.append(
            HmatEntry(
                access_class=access,
                initiators=inits,
                read_latency_ns=known["read_latency"],
                write_latency_ns=known["write_latency"],
                read_bandwidth_mbps=known["read_bandwidth"],
                write_bandwidth_mbps=known["write_bandwidth"],
                unknown_reason=f"{', '.join(zero)} 0 in sysfs: not provided by the firmware's HMAT" if zero else None,
            )
        )
    return tuple(out)


def _read_side_caches(host: Host, base: str) -> tuple[MemorySideCache, ...]:
    out = []
    for name in host.listdir(f"{base}/memory_side_cache"):
        level = numbered(name, "index")
        if level is None:
            continue
        d = f"{base}/memory_side_cache/{name}"
        out.append(
            MemorySideCache(
                level=level,
                size_bytes=host.read_int(f"{d}/size"),
                line_size=host.read_int(f"{d}/line_size"),
                indexing=host.read_int(f"{d}/indexing"),
                write_policy=host.read_int(f"{d}/write_policy"),
            )
        )
    return tuple(out)


def read_memory_tiers(host: Host) -> dict[int, tuple[int, ...]]:
    """memory_tierN/nodelist (the ABI document says `nodes`; kernels write `nodelist`)."""
    tiers: dict[int, tuple[int, ...]] = {}
    for name in host.listdir(TIER_DIR):
        tier = numbered(name, "memory_tier")
        if tier is None:
            continue
        nodes = host.read_cpulist(f"{TIER_DIR}/{name}/nodelist")
        if nodes is None:
            nodes = host.read_cpulist(f"{TIER_DIR}/{name}/nodes")
        tiers[tier] = tuple(sorted(nodes or ()))
    return tiers


def read_interleave_weights(host: Host) -> dict[int, int]:
    weights = {}
    for name in host.listdir(WEIGHT_DIR):
        node = numbered(name, "node")
        if node is not None:
            value = host.read_int(f"{WEIGHT_DIR}/{name}")
            if value is not None:
                weights[node] = value
    return weights


def read_weighted_interleave_auto(host: Host) -> bool | None:
    """`auto` (kernel >= 6.16); some kernels spell the file `__auto_type` (a macro collision)."""
    for name in ("auto", "__auto_type"):
        text = host.read_optional(f"{WEIGHT_DIR}/{name}")
        if text is not None:
            return text in ("true", "1", "Y")
    return None
