"""Compare two nodes' topologies: what a BIOS update, a new kernel or a swapped card changed.

Both sides are `numatune.inspect/4` (or /3, /2, /1) documents (a root or snapshot is turned into one first), so a
live node, a saved tree and a report gathered last month compare the same way. A document is
flattened into a *view*: ordered keys ("node 1 cpus", "device 0000:18:00.0") with short string
values; the difference of two views is the list of keys whose values differ. Fields that change
from minute to minute (free memory, the source path, the numatune version) are left out.
"""

from __future__ import annotations

from numatune.cpulist import format_cpulist
from numatune.errors import InputError
from numatune.model._record import record
from numatune.model.document import MAX_COUNT, MAX_ID, MAX_SIZE, Doc, shown
from numatune.model.schemas import SCHEMAS
from numatune.numbers import MAX_DIGITS

TYPE_CHECKING = False  # typing and dataclasses cost ~20 ms to import; diff starts without them
if TYPE_CHECKING:
    from typing import Any

INSPECT_SCHEMA = SCHEMAS["inspect"]
READABLE_SCHEMAS = ("numatune.inspect/1", "numatune.inspect/2", "numatune.inspect/3", INSPECT_SCHEMA)  # /2 added
# fabric links and cpu_kinds (absent from /1); /3 renumbered GPUi (numatune.model.order): devices are compared by BDF,
# never by label; /4 keeps NVSwitch GPUs as one group (path_matrix.nvswitch), not pairs in path_matrix.links
PLACED_KINDS = ("gpu", "nic", "nvme", "accelerator", "cxl")
MEMORY_TOLERANCE = 0.02  # node memory within 2% is "the same" (firmware and kernels reserve a little)


@record
class Difference:
    key: str  # "node 1 cpus"
    category: str  # cpu | numa | distances | memory | tiers | devices | kernel
    a: str | None  # None: absent on that side
    b: str | None


def check_inspect_document(doc: Any, where: str) -> dict[str, Any]:
    """Accept only inspect reports of a schema version this code understands, whose every field diff's view,
    fleet's fingerprint and CXL pools read has the type and range `inspect --json` writes (model.document:
    one line naming WHERE and the field, exit 3, never a Python error deep in the comparison)."""
    if not isinstance(doc, dict) or "schema" not in doc:
        raise InputError(f"{where} is not a numatune JSON report (no \"schema\" field)")
    schema = doc["schema"]
    label = schema[:80] if isinstance(schema, str) else shown(schema)
    if not isinstance(schema, str) or not schema.startswith("numatune.inspect/"):
        raise InputError(f"{where} is a {label} report; expected {INSPECT_SCHEMA} (made by `numatune inspect --json`)")
    if schema not in READABLE_SCHEMAS:
        raise InputError(f"{where} has schema {label}; this numatune reads {', '.join(READABLE_SCHEMAS)}")
    for key in ("cpu", "nodes", "devices", "settings"):
        if key not in doc:
            raise InputError(f"{where}: the report has no {key!r} field")
    _check_fields(Doc(doc, where))
    return doc


MAX_KIB = MAX_SIZE >> 10
SLIT_MAX = 255  # ACPI SLIT entries are one byte
DEVICE_NAMES = ("netdevs", "rdma", "nvme")
SETTINGS = ("release", "numa_balancing", "transparent_hugepage", "thp_defrag", "zone_reclaim_mode",
            "demotion_enabled", "weighted_interleave_auto")


def _check_fields(doc: Doc) -> None:
    """Every field diff's view, fleet's shape and fleet's CXL pools read, by type and range (absent or null is
    allowed wherever they read `or`). The values stay in the dict and are read afterwards as proven here: one
    pass at C-like cost per report (fleet reads 10,000 of them), not a view per access."""
    doc.str("hostname")
    cpu = doc.mapping("cpu")
    cpu.scalar("model")
    cpu.list("sockets")
    cpu.int("threads_per_core", 0, MAX_ID)
    cpu.ints("online", 0, MAX_ID)
    cpu.ints("offline", 0, MAX_ID)
    for kind in doc.mapping("cpu_kinds").records("kinds"):
        kind.ints("cpus", 0, MAX_ID)
        for key in ("name", "role", "rank"):
            kind.scalar(key)
    for node in doc.records("nodes"):
        node.int("id", 0, MAX_ID, required=True)
        node.ints("cpus", 0, MAX_ID)
        node.scalar("kind")
        node.number("memory_total_kib", 0, MAX_KIB)
        node.int("tier", 0, MAX_COUNT)
        for _, distance in node.items("distances"):
            distance.int(lo=0, hi=SLIT_MAX, required=True)
    for device in doc.records("devices"):
        if device.scalar("kind") in PLACED_KINDS:
            device.str("bdf", required=True)
        device.int("numa_node", -1, MAX_ID)
        device.int("inferred_node", -1, MAX_ID)
        for key in DEVICE_NAMES:
            device.strs(key)
    pm = doc.mapping("path_matrix")
    labels = pm.strs("labels")
    if pm.length("devices") != len(labels):
        pm.fail(f"{pm.length('devices'):,} devices for {len(labels):,} labels (inspect --json writes one a label)",
                "devices")
    pm.strs("devices")
    rows = pm.list("cells")
    if len(rows) > len(labels):
        pm.fail(f"{len(rows):,} rows for {len(labels):,} labels", "cells")
    for row in rows:
        if len(row.strs(required=True)) > len(labels):
            row.fail(f"{len(row.value):,} cells for {len(labels):,} labels")
    for finding in doc.records("findings"):
        for key in ("code", "severity", "message"):
            finding.str(key, required=True)
    settings = doc.mapping("settings")
    for key in SETTINGS:
        settings.scalar(key)
    cxl = doc.mapping("cxl")
    for memdev in cxl.records("memdevs"):
        memdev.scalar("serial")
        memdev.scalar("name")
        memdev.int("ram_size", 0, MAX_SIZE)
        memdev.int("pmem_size", 0, MAX_SIZE)
    for region in cxl.records("regions"):
        region.scalar("name")
        region.scalar("uuid")
        region.strs("memdevs")
        region.int("size", 0, MAX_SIZE)
        region.int("interleave_ways", 0, MAX_ID)
        region.ints("nodes", 0, MAX_ID)


def _id_key(key: str) -> tuple[int, int | str]:
    """A node id from a report's keys in number order ("10" after "9"); any other key after them, as text."""
    if key.isascii() and key.isdigit() and len(key) <= MAX_DIGITS:
        return (0, int(key))
    return (1, key)


def _s(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _gib(kib: int | None) -> str | None:
    return None if kib is None else f"{kib / 1048576:.1f} GiB"


def view(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """key -> (category, value): everything diff compares, in report order."""
    out: dict[str, tuple[str, str | None]] = {}
    cpu = doc.get("cpu") or {}
    out["cpu model"] = ("cpu", _s(cpu.get("model")))
    out["sockets"] = ("cpu", _s(len(cpu.get("sockets") or [])))
    out["threads per core"] = ("cpu", _s(cpu.get("threads_per_core")))
    out["online cpus"] = ("cpu", format_cpulist(cpu.get("online") or []) or "none")
    out["offline cpus"] = ("cpu", format_cpulist(cpu.get("offline") or []) or "none")
    kinds = cpu_kinds_summary(doc)
    if kinds is not None:
        out["cpu kinds"] = ("cpu", kinds)
    nodes = doc.get("nodes") or []
    out["numa nodes"] = ("numa", f"{len(nodes)} ({format_cpulist(n['id'] for n in nodes) or 'none'})")
    for n in nodes:
        nid = n["id"]
        out[f"node {nid} cpus"] = ("numa", format_cpulist(n.get("cpus") or []) or "none")
        out[f"node {nid} kind"] = ("numa", _s(n.get("kind")))
        out[f"node {nid} memory"] = ("memory", _gib(n.get("memory_total_kib")))
        dist = n.get("distances") or {}
        row = " ".join(f"{k}:{v}" for k, v in sorted(dist.items(), key=lambda kv: _id_key(kv[0])))
        out[f"node {nid} distances"] = ("distances", row or None)
        out[f"node {nid} tier"] = ("tiers", _s(n.get("tier")))
    for d in doc.get("devices") or []:
        if d.get("kind") not in PLACED_KINDS:
            continue
        node = d.get("numa_node")
        where = f"node {node}" if node is not None else (
            f"node ? (inferred {d['inferred_node']})" if d.get("inferred_node") is not None else "node ?")
        names = ",".join((d.get("netdevs") or []) + (d.get("rdma") or []) + (d.get("nvme") or []))
        out[f"device {d['bdf']}"] = ("devices", f"{d['kind']} on {where}" + (f" ({names})" if names else ""))
    pm = doc.get("path_matrix") or {}
    labels, devs, cells = pm.get("labels") or [], pm.get("devices") or [], pm.get("cells") or []
    nics = [j for j, lab in enumerate(labels) if lab.startswith("NIC")]  # found once, not once a GPU
    for i, label in enumerate(labels):
        if not label.startswith("GPU"):
            continue
        best = _best_nic_path(nics, cells[i] if i < len(cells) else [])
        if best is not None:
            out[f"device {devs[i]} nearest NIC path"] = ("devices", best)
    settings = doc.get("settings") or {}
    out["kernel release"] = ("kernel", _s(settings.get("release")))
    for key in ("numa_balancing", "transparent_hugepage", "thp_defrag", "zone_reclaim_mode", "demotion_enabled",
                "weighted_interleave_auto"):
        out[f"kernel {key}"] = ("kernel", _s(settings.get(key)))
    return out


def cpu_kinds_summary(doc: dict[str, Any]) -> str | None:
    """"10 Cortex-X925 (5-9,15-19) > 10 Cortex-A725 (0-4,10-14)" when a node has several CPU kinds, else None.

    None for one kind (and for inspect/1 reports, which have no kinds), so symmetric nodes compare and
    fingerprint as they always did.
    """
    kinds = ((doc.get("cpu_kinds") or {}).get("kinds")) or []
    if len(kinds) < 2:
        return None
    parts = [f"{len(k.get('cpus') or [])} {k.get('name') or k.get('role')} ({format_cpulist(k.get('cpus') or [])})"
             for k in kinds]
    out = parts[0]
    for prev, k, text in zip(kinds, kinds[1:], parts[1:], strict=False):
        out += (" = " if k.get("rank") == prev.get("rank") else " > ") + text
    return out


_PATH_RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


def _best_nic_path(nics: list[int], row: list[str]) -> str | None:
    """The shortest path kind in `row` to a NIC (`nics`: the NIC columns, ascending): work bounded by the row."""
    from bisect import bisect_left

    paths = [row[j] for j in nics[:bisect_left(nics, len(row))]]
    return min(paths, key=lambda p: _PATH_RANK.get(p, 9)) if paths else None


def _memory_equal(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    x, y = float(a.split()[0]), float(b.split()[0])
    return abs(x - y) <= MEMORY_TOLERANCE * max(x, y, 1e-9)


def diff_views(
    a: dict[str, tuple[str, str | None]], b: dict[str, tuple[str, str | None]], ignore: tuple[str, ...] = ()
) -> list[Difference]:
    """Keys whose values differ, in A's order then B-only keys; `ignore`: categories or key prefixes."""
    keys = list(a) + [k for k in b if k not in a]
    out = []
    for key in keys:
        cat = a[key][0] if key in a else b[key][0]
        va = a[key][1] if key in a else None
        vb = b[key][1] if key in b else None
        if cat in ignore or any(key.startswith(p) for p in ignore):
            continue
        if va == vb or (cat == "memory" and _memory_equal(va, vb)):
            continue
        out.append(Difference(key, cat, va, vb))
    return out


CATEGORIES = ("cpu", "numa", "memory", "distances", "tiers", "devices", "kernel")
