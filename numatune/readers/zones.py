"""/proc/zoneinfo: how much of each node's memory is in which zone (ZONE_MOVABLE matters for pinning).

Memory that daxctl onlines (CXL, PMem as system RAM) is ZONE_MOVABLE by default, and long-term
pinning (cudaHostRegister, RDMA registration) migrates pages out of ZONE_MOVABLE first: a pinned
buffer placed on such a node silently ends up in DRAM.
"""

from __future__ import annotations

import re

from numatune.numbers import parse_int
from numatune.pieces import MAX_RECORDS, lines
from numatune.system.host import Host

ZONEINFO = "/proc/zoneinfo"
_HEAD = re.compile(r"^Node\s+(\d+),\s+zone\s+(\S+)")


def parse_zoneinfo(text: str, where: str = "/proc/zoneinfo") -> dict[int, dict[str, int]]:
    """{node: {zone: managed pages}} (present pages where a kernel has no `managed` line)."""
    out: dict[int, dict[str, int]] = {}
    node = zone = None
    present: int | None = None
    for number, line in enumerate(lines(text, where, MAX_RECORDS), 1):
        m = _HEAD.match(line)
        if m:
            node, zone, present = parse_int(m.group(1), where, line=number), m.group(2), None
            out.setdefault(node, {})[zone] = 0
            continue
        if node is None or zone is None:
            continue
        parts = line.split(None, 2)
        if len(parts) == 2 and parts[1].isdigit():
            if parts[0] == "managed":
                out[node][zone] = parse_int(parts[1], where, line=number)
            elif parts[0] == "present":
                present = parse_int(parts[1], where, line=number)
                out[node][zone] = out[node][zone] or present
    return out


def read_zones(host: Host) -> dict[int, dict[str, int]]:
    return parse_zoneinfo(host.read_optional(ZONEINFO) or "")


def movable_share(zones: dict[int, dict[str, int]], node: int) -> float | None:
    """Fraction of the node's managed pages in ZONE_MOVABLE; None when zoneinfo does not list the node."""
    z = zones.get(node)
    if not z:
        return None
    total = sum(z.values())
    return (z.get("Movable", 0) / total) if total else 0.0
