"""Group a fleet's inspect reports by topology and find the nodes that differ from the rest.

Nodes bought together should look alike. The fingerprint keeps what placement depends on:
sockets, SMT, NUMA nodes with their CPU counts, memory (rounded, so a few MiB reserved by another
kernel do not split a group), kind and tier, the distance matrix, where GPUs and NICs sit and how
far each GPU's nearest NIC is. It leaves out what legitimately differs between identical nodes
(hostnames, serials, free memory, PCI bus numbers) and the kernel, which is reported per group
instead. The largest group is the reference; every node outside it is an outlier, listed with
what differs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from numatune.analysis.diff import _best_nic_path, cpu_kinds_summary


@dataclass(frozen=True)
class NodeReport:
    name: str  # hostname, file name or pdsh/clush prefix
    doc: dict[str, Any]  # numatune.inspect/1 or /2


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


@dataclass(frozen=True)
class Fleet:
    groups: tuple[Group, ...]
    reference_is_majority: bool  # False when the largest groups tie
    outliers: tuple[str, ...] = ()
    total: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def round_gib(kib: int | None) -> str:
    """Memory to two significant digits of GiB (503.7 -> "500 GiB", 15.6 -> "16 GiB", 0.37 -> "0.37 GiB")."""
    if not kib or kib <= 0:
        return "0 GiB"
    gib = kib / 1048576
    value = round(gib, 1 - math.floor(math.log10(gib)))
    return f"{int(value)} GiB" if value >= 10 else f"{value:g} GiB"


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
    ids = [n["id"] for n in nodes]
    rows = []
    for n in nodes:
        dist = n.get("distances") or {}
        rows.append(" ".join(str(dist.get(str(j), "-")) for j in ids))
    out["distances"] = " / ".join(rows) if any(r.strip("- ") for r in rows) else "none"
    for kind in ("gpu", "nic"):
        per_node = Counter(
            "?" if d.get("numa_node") is None else str(d["numa_node"])
            for d in doc.get("devices") or []
            if d.get("kind") == kind
        )
        out[f"{kind}s"] = ", ".join(f"node {k}: {v}" for k, v in sorted(per_node.items())) or "none"
    pm = doc.get("path_matrix") or {}
    labels, cells = pm.get("labels") or [], pm.get("cells") or []
    paths = Counter(
        p for i, lab in enumerate(labels) if lab.startswith("GPU")
        for p in [_best_nic_path(labels, cells[i] if i < len(cells) else [])] if p
    )
    if paths:
        out["gpu nearest nic"] = ", ".join(f"{p} x{c}" for p, c in sorted(paths.items()))
    return out


def fingerprint(parts: dict[str, str]) -> str:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def _findings(reports: list[NodeReport]) -> tuple[FindingSummary, ...]:
    seen: dict[str, tuple[str, str, list[str]]] = {}
    for r in reports:
        for f in r.doc.get("findings") or []:
            code = f.get("code", "?")
            entry = seen.setdefault(code, (f.get("severity", ""), f.get("message", ""), []))
            if r.name not in entry[2]:
                entry[2].append(r.name)
    rank = {"error": 0, "warning": 1, "info": 2}
    out = [FindingSummary(code, sev, msg, tuple(names)) for code, (sev, msg, names) in seen.items()]
    return tuple(sorted(out, key=lambda s: (rank.get(s.severity, 3), s.code)))


def _differs(ref: dict[str, str], other: dict[str, str]) -> tuple[tuple[str, str | None, str | None], ...]:
    keys = list(ref) + [k for k in other if k not in ref]
    return tuple((k, ref.get(k), other.get(k)) for k in keys if ref.get(k) != other.get(k))


def group_fleet(reports: list[NodeReport]) -> Fleet:
    """Groups by fingerprint, largest first; the first group is the reference for outliers."""
    by_fp: dict[str, list[NodeReport]] = {}
    shapes: dict[str, dict[str, str]] = {}
    for r in reports:
        parts = shape(r.doc)
        fp = fingerprint(parts)
        by_fp.setdefault(fp, []).append(r)
        shapes.setdefault(fp, parts)
    ordered = sorted(by_fp.items(), key=lambda kv: (-len(kv[1]), kv[1][0].name))
    groups = []
    ref_shape = shapes[ordered[0][0]] if ordered else {}
    for i, (fp, members) in enumerate(ordered):
        kernels = Counter((m.doc.get("settings") or {}).get("release") or "unknown" for m in members)
        groups.append(Group(
            id=_group_id(i),
            fingerprint=fp,
            shape=shapes[fp],
            nodes=tuple(m.name for m in members),
            kernels=dict(sorted(kernels.items(), key=lambda kv: (-kv[1], kv[0]))),
            findings=_findings(members),
            differs=_differs(ref_shape, shapes[fp]) if i else (),
        ))
    majority = len(ordered) < 2 or len(ordered[0][1]) > len(ordered[1][1])
    outliers = tuple(n for g in groups[1:] for n in g.nodes)
    notes = () if majority else ("the largest groups are the same size: group A is the reference only because "
                                 "it comes first",)
    return Fleet(tuple(groups), majority, outliers, len(reports), notes)


def _group_id(i: int) -> str:
    letters = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        letters = chr(ord("A") + rem) + letters
    return letters
