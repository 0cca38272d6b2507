"""The kernel's two ways of writing a set of CPUs or nodes: lists ("0-3,8") and hex masks ("ff,00000000").

Pure functions; every reader and writer goes through them so the traps (NUL bytes, empty lists,
masks wider than the CPU count) are handled once.
"""

from __future__ import annotations

TYPE_CHECKING = False  # annotations only: collections.abc imports collections (~5% of a start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable

#: No kernel numbers a CPU or node this high (NR_CPUS is at most 8192, MAX_NUMNODES 1024): a list or mask
#: beyond it comes from a damaged or hostile file, and parsing "0-4000000000" would fill memory.
MAX_ID = 1 << 16
#: Node ids: the kernel's MAX_NUMNODES is at most 1 << NODES_SHIFT, NODES_SHIFT at most 10.
MAX_NODES = 1 << 10


def parse_cpulist(text: str, limit: int = MAX_ID) -> frozenset[int]:
    """Parse "0-3,8,10-11" (also "0-7:2/4" strides, an empty line, NUL padding); ValueError for an id
    at or above `limit` (MAX_ID; MAX_NODES for a list of nodes), or for a list whose parts produce more than
    `limit` ids in all: the work is bounded by the ids produced, not by each range (a 160 KB list repeating
    "0-65535" would insert 1.3 billion)."""
    text = text.strip().strip("\x00").strip()
    if not text:
        return frozenset()
    out: set[int] = set()
    produced = 0
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ":" in part:
            span, _, stride_spec = part.partition(":")
            used, _, group = stride_spec.partition("/")
            lo, hi = _span(span, limit)
            used_n, group_n = int(used), int(group)
            if used_n <= 0 or group_n <= 0 or used_n > group_n:  # the kernel's bitmap_parselist refuses
                # used > group too: its groups overlap ("0-65535:65536/1" would insert 2^31 ids one by one)
                raise ValueError(f"bad stride in {part[:40]!r}: each group of {group_n} uses {used_n}")
            produced = _produced(produced, used_n * ((hi - lo) // group_n + 1), limit)
            for start in range(lo, hi + 1, group_n):
                out.update(range(start, min(start + used_n, hi + 1)))
        else:
            lo, hi = _span(part, limit)
            produced = _produced(produced, hi - lo + 1, limit)
            out.update(range(lo, hi + 1))
    return frozenset(out)


def _produced(before: int, more: int, limit: int) -> int:
    if before + more > limit:
        raise ValueError(f"a list naming more than {limit} ids in all (its parts overlap): no kernel writes one")
    return before + more


def _span(part: str, limit: int = MAX_ID) -> tuple[int, int]:
    lo_text, sep, hi_text = part.partition("-")
    lo = int(lo_text)
    hi = int(hi_text) if sep else lo
    if lo < 0 or hi < lo:
        raise ValueError(f"bad range {part!r}")
    if hi >= limit:
        raise ValueError(f"id {hi} in {part[:40]!r} is beyond {limit - 1}: no kernel numbers CPUs or nodes that high")
    return lo, hi


def parse_cpumask(text: str) -> frozenset[int]:
    """Parse "0000,00000000,0000003f": comma-separated 32-bit hex words, most significant first; linear in
    the mask's width, ValueError for a set bit at or above MAX_ID."""
    text = text.strip().strip("\x00").strip()
    if not text:
        return frozenset()
    digits = text.replace(",", "").lstrip("0") or "0"
    if len(digits) * 4 > MAX_ID:
        raise ValueError(f"a mask {len(digits) * 4} bits wide: no kernel numbers CPUs beyond {MAX_ID - 1}")
    bits = bin(int(digits, 16))[:1:-1]  # least significant first
    return frozenset(i for i, b in enumerate(bits) if b == "1")


def format_cpulist(cpus: Iterable[int]) -> str:
    """Write a set back in the kernel's compact list form ("0-3,8")."""
    ordered = sorted(set(cpus))
    if not ordered:
        return ""
    parts = []
    start = prev = ordered[0]
    for cpu in ordered[1:]:
        if cpu == prev + 1:
            prev = cpu
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = cpu
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)


def format_cpumask(cpus: Iterable[int], width_bits: int = 0) -> str:
    """Write a hex mask in the kernel's form: 32-bit words joined by commas."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    words = max(1, (max(value.bit_length(), width_bits) + 31) // 32)
    return ",".join(f"{(value >> (32 * i)) & 0xFFFFFFFF:08x}" for i in reversed(range(words)))
