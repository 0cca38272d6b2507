"""CPU cache sizes from sysfs (cpuN/cache/indexK): probe sizes its buffers well beyond the last level."""

from __future__ import annotations

from numatune.numbers import maybe_int
from numatune.system.host import Host


def parse_size(text: str | None, where: str = "size") -> int | None:
    """"49152K" / "1280K" / "32M" → bytes."""
    if not text:
        return None
    text = text.strip()
    mult = {"K": 1024, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if mult != 1 else text
    value = maybe_int(digits, where) if digits.isdigit() else None
    return None if value is None else value * mult


def last_level_cache(host: Host, cpus: list[int] | tuple[int, ...]) -> int | None:
    """Bytes of the largest data/unified cache level seen from these CPUs, summed over its distinct
    instances (an L3 per die or CCX counts once per shared_cpu_list)."""
    best: dict[int, dict[str, int]] = {}
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/cache"
        for idx in host.listdir(base):
            if not idx.startswith("index"):
                continue
            kind = (host.read_optional(f"{base}/{idx}/type") or "").strip()
            level = host.read_int(f"{base}/{idx}/level")
            size = parse_size(host.read_optional(f"{base}/{idx}/size"), f"{base}/{idx}/size")
            if kind == "Instruction" or level is None or size is None:
                continue
            shared = (host.read_optional(f"{base}/{idx}/shared_cpu_list") or str(cpu)).strip()
            best.setdefault(level, {})[shared] = size
    if not best:
        return None
    return sum(best[max(best)].values())


def llc_groups(host: Host, cpus: list[int] | tuple[int, ...]) -> tuple[frozenset[int], ...]:
    """The last-level-cache groups of these CPUs: for each CPU, the shared_cpu_list of its highest
    data/unified cache level (an AMD CCX/CCD's L3, a GB10 cluster's L3, a socket's L3 on most Intel
    parts), read once per group. () when the tree has no cache information."""
    groups: list[frozenset[int]] = []
    covered: set[int] = set()
    found = False
    for cpu in sorted(cpus):
        if cpu in covered:
            continue
        base = f"/sys/devices/system/cpu/cpu{cpu}/cache"
        best: tuple[int, str] | None = None
        for idx in host.listdir(base):
            if not idx.startswith("index") or not idx[5:].isdigit():
                continue
            if (host.read_optional(f"{base}/{idx}/type") or "").strip() not in ("Unified", "Data"):
                continue
            level = host.read_int(f"{base}/{idx}/level")
            if level is not None and (best is None or level > best[0]):
                best = (level, idx)
        shared = host.read_cpulist(f"{base}/{best[1]}/shared_cpu_list") if best else None
        found |= bool(shared)
        group = frozenset(shared or ()) | {cpu}
        covered |= group
        groups.append(group)
    return tuple(groups) if found else ()
