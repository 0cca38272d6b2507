"""Compare numatune's CXL tree (inspect --json's `cxl`) with what ndctl's `cxl list` reports.

Standard library only: the guest check (checks_cxl.py) runs it live, and the quick loop runs it on
the captured fixture beside the `cxl list` output saved in the same boot
(cxl-list.json inside fixtures/vm-cxl-switch.tar.gz), so both compare the same facts.
"""

from __future__ import annotations

from typing import Any

#: The `cxl list` commands saved by the guest check, by key.
CXL_LIST_COMMANDS = {
    "memdevs": ["cxl", "list", "-M"],
    "ports": ["cxl", "list", "-P", "-T"],
    "endpoints": ["cxl", "list", "-E"],
    "regions": ["cxl", "list", "-R", "-T"],
    "decoders": ["cxl", "list", "-D"],
}


def objects(data: Any, key: str) -> list[dict[str, Any]]:
    """Every object carrying `key` anywhere in a `cxl list` answer (it nests by object type)."""
    out: list[dict[str, Any]] = []
    if isinstance(data, dict):
        if key in data:
            out.append(data)
        for value in data.values():
            out.extend(objects(value, key))
    elif isinstance(data, list):
        for item in data:
            out.extend(objects(item, key))
    return out


def _serial(value: Any) -> int | None:
    try:
        return int(value, 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        return None


def _matched(data: Any, key: str, ours: dict[str, dict[str, Any]], problems: list[str]) -> list[tuple[dict, dict]]:
    """(theirs, ours) for every `cxl list` object named by `key`; the ones numatune lacks are problems."""
    pairs = []
    for theirs in objects(data, key):
        mine = ours.get(theirs[key])
        if mine is None:
            problems.append(f"{key} {theirs[key]} missing from numatune")
        else:
            pairs.append((theirs, mine))
    return pairs


def compare(cxl: dict[str, Any], lists: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """(problems, facts compared) between numatune's `cxl` object and the `cxl list` answers."""
    problems: list[str] = []
    facts: dict[str, Any] = {}
    ours_mem = {m["name"]: m for m in cxl.get("memdevs") or []}
    for m, mine in _matched(lists.get("memdevs"), "memdev", ours_mem, problems):
        if _serial(mine.get("serial")) != _serial(m.get("serial")):
            problems.append(f"{m['memdev']}: serial {mine.get('serial')} != cxl list {m.get('serial')}")
        if m.get("host") and mine.get("pci_bdf") != m["host"]:
            problems.append(f"{m['memdev']}: PCI {mine.get('pci_bdf')} != cxl list host {m['host']}")
    facts["memdevs"] = sorted(ours_mem)
    ours_port = {p["name"]: p for p in cxl.get("ports") or []}
    switches = []
    for p, mine in _matched(lists.get("ports"), "port", ours_port, problems):
        if mine.get("uport") != p.get("host"):
            problems.append(f"{p['port']}: uport {mine.get('uport')} != cxl list host {p.get('host')}")
        theirs = sorted(d["dport"] for d in p.get("dports") or [])
        ours = sorted(d["target"] for d in mine.get("dport_targets") or [])
        if theirs and theirs != ours:
            problems.append(f"{p['port']}: dports {ours} != cxl list {theirs}")
        if mine.get("role") == "switch":
            switches.append({"port": p["port"], "upstream": p.get("host"), "downstream": theirs})
    facts["switches"] = switches
    for e, _mine in _matched(lists.get("endpoints"), "endpoint", ours_port, problems):
        mem = ours_mem.get(e.get("host", ""), {})
        if mem.get("port") != e["endpoint"]:
            problems.append(f"{e.get('host')}: endpoint {mem.get('port')} != cxl list {e['endpoint']}")
        if e.get("parent_dport") and mem.get("parent_dport") != e["parent_dport"]:
            problems.append(f"{e.get('host')}: behind {mem.get('parent_dport')} != cxl list {e['parent_dport']}")
    ours_region = {r["name"]: r for r in cxl.get("regions") or []}
    regions = []
    for r, mine in _matched(lists.get("regions"), "region", ours_region, problems):
        for key in ("interleave_ways", "interleave_granularity", "size"):
            if key in r and mine.get(key) != r[key]:
                problems.append(f"{r['region']}: {key} {mine.get(key)} != cxl list {r[key]}")
        theirs = sorted((m["position"], m["memdev"], m["decoder"]) for m in r.get("mappings") or [])
        ours = sorted((m["position"], m["memdev"], m["decoder"]) for m in mine.get("members") or [])
        if theirs != ours:
            problems.append(f"{r['region']}: members {ours} != cxl list mappings {theirs}")
        regions.append({"region": r["region"], "ways": r.get("interleave_ways"), "members": theirs})
    facts["regions"] = regions
    return problems, facts


def compare_links(cxl: dict[str, Any], sysfs: dict[str, dict[str, str]]) -> list[str]:
    """numatune's links against the PCI functions' link files (BDF -> {file: text})."""
    problems = []
    for link in cxl.get("links") or []:
        files = sysfs.get(link["downstream"])
        if files is None:
            problems.append(f"link to {link['downstream']}: no such PCI function in sysfs")
            continue
        width = files.get("current_link_width")
        if width is not None and str(link.get("width")) != width.strip():
            problems.append(f"link to {link['downstream']}: width {link.get('width')} != sysfs {width.strip()}")
        speed = files.get("current_link_speed")
        if speed is not None and link.get("speed") != speed.strip():
            problems.append(f"link to {link['downstream']}: speed {link.get('speed')} != sysfs {speed.strip()}")
    return problems
