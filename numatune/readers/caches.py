"""CPU cache sizes from sysfs (cpuN/cache/indexK): probe sizes its buffers well beyond the last level."""

from __future__ import annotations

from numatune.system.host import Host


def parse_size(text: str | None) -> int | None:
    """"49152K" / "1280K" / "32M" → bytes."""
    if not text:
        return None
    text = text.strip()
    mult = {"K": 1024, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if mult != 1 else text
    return int(digits) * mult if digits.isdigit() else None


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
            size = parse_size(host.read_optional(f"{base}/{idx}/size"))
            if kind == "Instruction" or level is None or size is None:
                continue
            shared = (host.read_optional(f"{base}/{idx}/shared_cpu_list") or str(cpu)).strip()
            best.setdefault(level, {})[shared] = size
    if not best:
        return None
    return sum(best[max(best)].values())
