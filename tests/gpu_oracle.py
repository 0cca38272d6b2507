"""The GPU numbering worked out from a tree's own files, not by numatune's ordering code (so tests that
compare against it can catch that code going wrong): NVIDIA GPUs by PCI address read as hex numbers
(nvidia-smi's order), AMD GPUs by KFD topology node id (ROCm's enumeration) read straight from
/sys/class/kfd/kfd/topology/nodes/N/properties, the rest by PCI address; and what a CUDA/ROCR/HIP
visible-devices variable plus a local rank select from that numbering, as the runtimes document it."""

from __future__ import annotations

import re
from pathlib import Path

NVIDIA, AMD = 0x10DE, 0x1002
VISIBLE = {"CUDA_VISIBLE_DEVICES": NVIDIA, "ROCR_VISIBLE_DEVICES": AMD, "HIP_VISIBLE_DEVICES": AMD}


def hex_key(bdf: str) -> tuple[int, ...]:
    return tuple(int(x, 16) for x in re.split(r"[:.]", bdf if bdf.count(":") == 2 else "0:" + bdf))


def kfd_nodes(root: Path) -> dict[str, int]:
    """BDF -> KFD node id of each GPU agent (simd_count > 0), from the properties files."""
    out: dict[str, int] = {}
    base = root / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for props in sorted(base.glob("*/properties"), key=lambda p: int(p.parent.name)) if base.is_dir() else ():
        fields = dict(line.split()[:2] for line in props.read_text().splitlines() if len(line.split()) == 2)
        if int(fields.get("simd_count", "0")) == 0:
            continue
        loc, domain = int(fields["location_id"]), int(fields.get("domain", "0"))
        bdf = f"{domain:04x}:{loc >> 8 & 0xFF:02x}:{loc >> 3 & 0x1F:02x}.{loc & 7}"
        out.setdefault(bdf, int(props.parent.name))
    return out


def gpu_numbering(root: Path, gpus: list[tuple[str, int | None]]) -> list[str]:
    """BDFs of `gpus` ((bdf, vendor id) pairs, in any order) as GPU0, GPU1, ..."""
    kfd = kfd_nodes(root)
    nvidia = sorted((b for b, v in gpus if v == NVIDIA), key=hex_key)
    amd = sorted((b for b, v in gpus if v == AMD), key=lambda b: (b not in kfd, kfd.get(b, 0), hex_key(b)))
    rest = sorted((b for b, v in gpus if v not in (NVIDIA, AMD)), key=hex_key)
    return nvidia + amd + rest


def selected(env: dict[str, str], rank: int | None, order: list[str], vendor: dict[str, int | None],
             uuid: dict[str, str]) -> str | None:
    """The BDF a rank's environment selects from `order`, or None where it selects nothing valid."""
    for var, want in VISIBLE.items():
        if var not in env:
            continue
        pool = [b for b in order if vendor.get(b) == want] or list(order)  # a runtime counts its own GPUs
        visible = []
        for entry in (e.strip() for e in env[var].split(",") if e.strip()):
            if entry.isdigit():
                if int(entry) >= len(pool):
                    return None
                visible.append(pool[int(entry)])
            else:
                hits = [b for b in pool if uuid.get(b, "").lower().startswith(entry.lower())]
                if len(hits) != 1:
                    return None
                visible.append(hits[0])
        if len(visible) == 1:
            return visible[0]
        return visible[rank] if rank is not None and rank < len(visible) else None
    return order[rank] if rank is not None and rank < len(order) else None
