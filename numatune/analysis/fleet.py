"""Group a fleet's inspect reports by topology and find the nodes that differ from the rest.

Nodes bought together should look alike. The fingerprint keeps what placement depends on:
sockets, SMT, NUMA nodes with their CPU counts, memory (rounded, so a few MiB reserved by another
kernel do not split a group), kind and tier, the distance matrix, where GPUs and NICs sit and how
far each GPU's nearest NIC is. It leaves out what legitimately differs between identical nodes
(hostnames, serials, free memory, PCI bus numbers) and the kernel, which is reported per group
instead. The largest group is the reference; every node outside it is an outlier, listed with
what differs.

Fleets are large (10,000 reports of ~12 KB each), so grouping is streaming: `FleetTally.add` folds one
report into its group and keeps nothing of the document. What is kept grows with the number of
groups and finding codes; per node only its name and, per finding code it has, 4 bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from array import array
from dataclasses import dataclass, field, replace
from typing import Any

from numatune.analysis.diff import _PATH_RANK, cpu_kinds_summary
from numatune.analysis.nvdomains import DomainTally
from numatune.numbers import maybe_int


@dataclass(frozen=True)
class NodeReport:
    name: str  # hostname, file name or pdsh/clush prefix
    doc: dict[str, Any]  # numatune.inspect/4 (or /3, /2, /1)


@dataclass(frozen=True)
class FindingSummary:
    code: str
    severity: str
    message: str  # from the first node that has it
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Group:
    id: str  # "A", "B", ... by size
    fingerprint: str  # 12 hex digits
    shape: dict[str, str]
    nodes: tuple[str, ...]
    kernels: dict[str, int]
    findings: tuple[FindingSummary, ...]
    differs: tuple[tuple[str, str | None, str | None], ...] = ()  # (key, reference value, this group's value)
    # The group's first report, kept whole (one per topology, not per node) for `fleet --format html`'s picture.
    example: dict[str, Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PoolHost:
    """One host's view of a pooled CXL device or shared region."""

    node: str  # the host (report name)
    memdevs: tuple[str, ...]  # the host's names for it (mem0, ...)
    capacity_bytes: int | None  # the device's capacity as this host sees it (ram + pmem)
    online_bytes: int | None  # what of it this host has in regions onlined as NUMA nodes (its share of each)
    numa_nodes: tuple[int, ...]  # the nodes that memory became
    tiers: tuple[int | None, ...]  # the memory tier of each of those nodes
    regions: tuple[str, ...]


@dataclass(frozen=True)
class Pool:
    """A CXL device (same serial number) or region (same UUID) that several hosts see."""

    kind: str  # "device" | "region"
    key: str  # the serial number ("0x4e540001") or the region UUID
    hosts: tuple[PoolHost, ...]


@dataclass(frozen=True)
class Fleet:
    groups: tuple[Group, ...]
    reference_is_majority: bool  # False when the largest groups tie
    outliers: tuple[str, ...] = ()
    total: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    pools: tuple[Pool, ...] = ()
    fabric: Any = None  # model.nvfleet.FleetFabric: the NVLink domains (analysis.nvdomains)


#: Unreadable inputs listed by name and reason; past this many they are counted only.
MAX_UNREADABLE_SHOWN = 50


class Unreadable(list):
    """The (source, reason) of inputs that were not reports: the first MAX_UNREADABLE_SHOWN kept, every one
    counted in `total`. One JSON array of 4 million non-reports kept each (8 MB of input, 1 GiB)."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def append(self, item: tuple[str, str]) -> None:
        self.total += 1
        if len(self) < MAX_UNREADABLE_SHOWN:
            super().append(item)

    def keep(self, item: tuple[str, str]) -> None:
        """Count and list ITEM past the bound too (why the rest of an input was not read)."""
        self.total += 1
        super().append(item)

    @property
    def unlisted(self) -> int:
        """How many were counted but not kept."""
        return self.total - len(self)


def round_gib(kib: int | None) -> str:
    """Memory to two significant digits of GiB (503.7 -> "500 GiB", 15.6 -> "16 GiB", 0.37 -> "0.37 GiB"); memory
    the report does not know (no meminfo in the tree: null) is "memory unknown", never 0 GiB."""
    if kib is None:
        return "memory unknown"
    if kib <= 0:
        return "0 GiB"
    gib = kib / 1048576
    value = round(gib, 1 - math.floor(math.log10(gib)))
    return f"{int(value)} GiB" if value >= 10 else f"{value:g} GiB"


def _placement(devices: list[dict[str, Any]]) -> tuple[str, str]:
    """("node 0: 2, node 1: 2" or "none") for GPUs and for NICs."""
    gpus: dict[str, int] = {}
    nics: dict[str, int] = {}
    for d in devices:
        kind = d.get("kind")
        if kind == "gpu":
            per_node = gpus
        elif kind == "nic":
            per_node = nics
        else:
            continue
        node = d.get("numa_node")
        key = "?" if node is None else str(node)
        per_node[key] = per_node.get(key, 0) + 1
    return tuple(", ".join(f"node {k}: {v}" for k, v in sorted(c.items())) or "none" for c in (gpus, nics))


def shape(doc: dict[str, Any]) -> dict[str, str]:
    """The fingerprinted properties of one node, as readable key -> value strings."""
    cpu = doc.get("cpu") or {}
    nodes = doc.get("nodes") or []
    out = {
        "sockets": str(len(cpu.get("sockets") or [])),
        "threads per core": str(cpu.get("threads_per_core")),
        "online cpus": str(len(cpu.get("online") or [])),
        "numa nodes": str(len(nodes)),
    }
    kinds = cpu_kinds_summary(doc)
    if kinds is not None:  # only on hybrid nodes: symmetric nodes keep the fingerprints they had
        out["cpu kinds"] = kinds
    for n in nodes:
        tier = f", tier {n['tier']}" if n.get("tier") is not None else ""
        out[f"node {n['id']}"] = (f"{len(n.get('cpus') or [])} cpus, {round_gib(n.get('memory_total_kib'))}, "
                                  f"{n.get('kind')}{tier}")
    ids = [str(n["id"]) for n in nodes]
    rows = []
    for n in nodes:
        dist = n.get("distances") or {}
        if len(dist) >= len(ids) and all(j in dist for j in ids):  # a whole row, as the kernel writes it
            rows.append(" ".join(str(dist[j]) for j in ids))
        else:  # what the row holds, not a dash for each node it lacks: 40,000 nodes without distances were N^2
            rows.append(" ".join(f"{j}:{v}" for j, v in dist.items()) or "-")
    out["distances"] = " / ".join(rows) if any(r.strip("- ") for r in rows) else "none"
    out["gpus"], out["nics"] = _placement(doc.get("devices") or [])
    pm = doc.get("path_matrix") or {}
    labels, cells = pm.get("labels") or [], pm.get("cells") or []
    nic_columns = [j for j, lab in enumerate(labels) if lab.startswith("NIC")]
    if nic_columns:
        from bisect import bisect_left

        paths: dict[str, int] = {}
        for i, lab in enumerate(labels):
            if not lab.startswith("GPU"):
                continue
            row = cells[i] if i < len(cells) else []
            found = [row[j] for j in nic_columns[:bisect_left(nic_columns, len(row))]]  # bounded by the row
            if found:
                best = min(found, key=lambda p: _PATH_RANK.get(p, 9))
                paths[best] = paths.get(best, 0) + 1
        if paths:
            out["gpu nearest nic"] = ", ".join(f"{p} x{c}" for p, c in sorted(paths.items()))
    return out


def fingerprint(parts: dict[str, str]) -> str:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


class _GroupTally:
    """One topology group while reports stream in: node indexes, kernels, findings (code -> nodes)."""

    __slots__ = ("shape", "members", "kernels", "findings", "example")

    def __init__(self, parts: dict[str, str], example: dict[str, Any]) -> None:
        self.shape = parts
        self.example = example
        self.members = array("I")
        self.kernels: dict[str, int] = {}
        self.findings: dict[str, tuple[str, str, array]] = {}  # code -> (severity, first message, node indexes)


class FleetTally:
    """Groups reports one at a time, keeping per group only what the fleet report shows."""

    __slots__ = ("names", "_groups", "_shape_cache", "_pooled", "_domains")

    def __init__(self) -> None:
        self._domains = DomainTally(keep_names=False)  # the NVLink domain and health of nodes with NVIDIA fabric
        self.names: list[str] = []  # node index -> name (made unique in `result`)
        self._groups: dict[str, _GroupTally] = {}  # fingerprint -> tally
        self._shape_cache: dict[str, tuple[str, dict[str, str]]] = {}  # canonical shape JSON -> (fp, shape)
        # (kind, serial or region UUID) -> [(node index, its view)]: only for reports with identified CXL memory
        self._pooled: dict[tuple[str, str], list[tuple[int, PoolHost]]] = {}

    def __len__(self) -> int:
        return len(self.names)

    def add(self, name: str, doc: dict[str, Any]) -> int:
        """Fold one numatune.inspect document in; returns the node's index (for `rename`)."""
        parts = shape(doc)
        blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
        known = self._shape_cache.get(blob)
        if known is None:  # one sha256 and one shape dict per distinct topology, not per node
            known = (hashlib.sha256(blob.encode()).hexdigest()[:12], parts)
            self._shape_cache[blob] = known
        fp = known[0]
        group = self._groups.get(fp)
        if group is None:
            group = self._groups[fp] = _GroupTally(known[1], doc)
        index = len(self.names)
        self.names.append(name)
        group.members.append(index)
        release = (doc.get("settings") or {}).get("release") or "unknown"
        group.kernels[release] = group.kernels.get(release, 0) + 1
        seen = set()
        for f in doc.get("findings") or []:
            code = f.get("code", "?")
            if code in seen:
                continue
            seen.add(code)
            entry = group.findings.get(code)
            if entry is None:
                entry = group.findings[code] = (f.get("severity", ""), f.get("message", ""), array("I"))
            entry[2].append(index)
        for key, view in cxl_identities(doc):
            self._pooled.setdefault(key, []).append((index, view))
        self._domains.add(name, doc.get("gpu_fabric"))
        return index

    def rename(self, index: int, name: str) -> None:
        self.names[index] = name

    def result(self) -> Fleet:
        """Groups largest first; the first group is the reference for outliers. Repeated names get #2, #3."""
        names = _unique(self.names)
        ordered = sorted(self._groups.items(), key=lambda kv: (-len(kv[1].members), names[kv[1].members[0]]))
        ref_shape = ordered[0][1].shape if ordered else {}
        rank = {"error": 0, "warning": 1, "info": 2}
        groups = []
        for i, (fp, g) in enumerate(ordered):
            findings = sorted(
                (FindingSummary(code, sev, msg, tuple(names[k] for k in idx))
                 for code, (sev, msg, idx) in g.findings.items()),
                key=lambda s: (rank.get(s.severity, 3), s.code))
            groups.append(Group(
                id=_group_id(i),
                fingerprint=fp,
                shape=g.shape,
                nodes=tuple(names[k] for k in g.members),
                kernels=dict(sorted(g.kernels.items(), key=lambda kv: (-kv[1], kv[0]))),
                findings=tuple(findings),
                differs=_differs(ref_shape, g.shape) if i else (),
                example=g.example,
            ))
        majority = len(ordered) < 2 or len(ordered[0][1].members) > len(ordered[1][1].members)
        outliers = tuple(n for g in groups[1:] for n in g.nodes)
        notes = () if majority else ("the largest groups are the same size: group A is the reference only because "
                                     "it comes first",)
        pools = []
        for (kind, key), seen in sorted(self._pooled.items()):
            if len({k for k, _ in seen}) < 2:
                continue  # one host only: not a pool
            pools.append(Pool(kind, key, tuple(replace(view, node=names[k]) for k, view in seen)))
        return Fleet(tuple(groups), majority, outliers, len(names), notes, tuple(pools),
                     self._domains.result(names))


def _serial(value: Any) -> str | None:
    """A memdev serial as one spelling ("0x4e540001"); 0, absent or malformed is unknown (emulators and
    some devices report 0 for every device, which does not make them one device)."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and len(value) <= 20:  # "0x" and 16 hex digits: a 64-bit serial
        number = maybe_int(value, "serial", base=0) or 0
    else:
        return None
    return f"{number:#x}" if number > 0 else None


def cxl_identities(doc: dict[str, Any]) -> list[tuple[tuple[str, str], PoolHost]]:
    """((kind, key), this host's view) for every identified CXL device (serial) and region (UUID) of a report."""
    cxl = doc.get("cxl") or {}
    memdevs = [m for m in cxl.get("memdevs") or [] if isinstance(m, dict)]
    regions = [r for r in cxl.get("regions") or [] if isinstance(r, dict)]
    if not memdevs and not regions:
        return []
    tiers = {n.get("id"): n.get("tier") for n in doc.get("nodes") or [] if isinstance(n, dict)}
    out: dict[tuple[str, str], PoolHost] = {}
    for m in memdevs:
        serial = _serial(m.get("serial"))
        if serial is None:
            continue
        mine = [r for r in regions if m.get("name") in (r.get("memdevs") or [])]
        sizes = [m.get(k) for k in ("ram_size", "pmem_size") if isinstance(m.get(k), int)]
        online = [r["size"] // max(r.get("interleave_ways") or 1, 1) for r in mine
                  if isinstance(r.get("size"), int) and r.get("nodes")]
        view = _view(mine, tiers, [m.get("name")], sum(sizes) if sizes else None, sum(online) if online else None)
        key = ("device", serial)
        if key in out:  # one device seen twice by one host (two paths): one view, both names
            old = out[key]
            view = PoolHost("", old.memdevs + view.memdevs, old.capacity_bytes, old.online_bytes, old.numa_nodes,
                            old.tiers, old.regions)
        out[key] = view
    for r in regions:
        uuid = r.get("uuid")
        if isinstance(uuid, str) and uuid.strip("0-"):  # a pmem region's UUID lives in the devices' labels
            online = r.get("size") if r.get("nodes") and isinstance(r.get("size"), int) else None
            out[("region", uuid)] = _view([r], tiers, list(r.get("memdevs") or []), r.get("size"), online)
    return list(out.items())


def _view(regions: list[dict[str, Any]], tiers: dict[Any, Any], memdevs: list[Any], capacity: int | None,
          online: int | None) -> PoolHost:
    nodes = sorted({n for r in regions for n in r.get("nodes") or [] if isinstance(n, int)})
    return PoolHost("", tuple(str(x) for x in memdevs), capacity, online, tuple(nodes),
                    tuple(tiers.get(n) for n in nodes), tuple(str(r.get("name")) for r in regions))


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        count = seen[n] = seen.get(n, 0) + 1
        out.append(n if count == 1 else f"{n}#{count}")
    return out


def _differs(ref: dict[str, str], other: dict[str, str]) -> tuple[tuple[str, str | None, str | None], ...]:
    keys = list(ref) + [k for k in other if k not in ref]
    return tuple((k, ref.get(k), other.get(k)) for k in keys if ref.get(k) != other.get(k))


def group_fleet(reports: list[NodeReport]) -> Fleet:
    """Groups by fingerprint, largest first; the first group is the reference for outliers."""
    tally = FleetTally()
    for r in reports:
        tally.add(r.name, r.doc)
    return tally.result()


def _group_id(i: int) -> str:
    letters = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        letters = chr(ord("A") + rem) + letters
    return letters
