"""PCIe/CXL link arithmetic: a link's data rate per direction from its trained speed and width.

Per lane and direction: 2.5 and 5 GT/s carry 8b/10b (80% payload), 8 to 32 GT/s 128b/130b, 64 GT/s
(PCIe 6 / CXL 3) is PAM4 with FLIT mode (242 of every 256 bytes carry data after FEC and CRC).
CXL 1.1 and 2.0 run on the PCIe 5 physical layer (32 GT/s), CXL 3.x on PCIe 6 (64 GT/s); a CXL link
trained slower is running in a lower PCIe generation's mode.
"""

from __future__ import annotations

# GT/s -> (payload fraction, generation label)
_GENERATIONS = {
    2.5: (8 / 10, "PCIe 1"),
    5.0: (8 / 10, "PCIe 2"),
    8.0: (128 / 130, "PCIe 3"),
    16.0: (128 / 130, "PCIe 4"),
    32.0: (128 / 130, "PCIe 5 / CXL 2.0"),
    64.0: (242 / 256, "PCIe 6 / CXL 3"),
}

#: The reference link of the "one CXL 2.0 x16 link per four GPUs" rule: 32 GT/s x16, per direction.
CXL2_X16_GBPS = round(32.0 * 128 / 130 / 8 * 16, 1)


def parse_gts(speed: str | None) -> float | None:
    """ "32.0 GT/s PCIe" -> 32.0; "Unknown", "" or None -> None."""
    if not speed:
        return None
    head = speed.split()[0]
    try:
        value = float(head)
    except ValueError:
        return None
    return value if value > 0 else None


def generation(gts: float | None) -> str | None:
    if gts is None:
        return None
    return _GENERATIONS.get(gts, (None, f"{gts:g} GT/s"))[1]


def gbps(gts: float | None, width: int | None) -> float | None:
    """GB/s per direction of a link trained at `gts` x `width` (None when either is unknown or 0)."""
    if gts is None or not width or width < 0:
        return None
    efficiency = _GENERATIONS.get(gts, (128 / 130 if gts < 64 else 242 / 256, ""))[0]
    return round(gts * efficiency / 8 * width, 2)
