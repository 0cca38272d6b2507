"""Hand-made CXL trees for the link-budget rules, built from the real vm-cxl-switch capture.

`eight_gpus_one_x8_link(root)` edits a copy of fixtures/vm-cxl-switch (a real 6.12 kernel behind an
emulated CXL switch, two memdevs in a 2-way region onlined as node 2) into a HAND-MADE machine: the CXL
links are rewritten to x8 at 32 GT/s (the emulator trains them x1 2.5 GT/s) and eight NVIDIA GPUs are
added, four under a host bridge on node 0 and four on node 1, each at x16 32 GT/s. Nothing else changes.
fixtures/handmade-cxl-8gpu-x8link.tar.gz is this tree, packed by

    .venv/bin/python -m tests.handmade_cxl DIR    # prints DIR/vm-cxl-switch, edited
    .venv/bin/python -c "from tests.fixture_archives import pack, FIXTURES; \\
        pack('DIR/vm-cxl-switch', FIXTURES / 'handmade-cxl-8gpu-x8link.tar.gz')"
"""

from __future__ import annotations

import sys
from pathlib import Path

CXL_FUNCTIONS = ("0000:80:00.0", "0000:81:00.0", "0000:82:00.0", "0000:82:01.0", "0000:83:00.0", "0000:84:00.0")
LINK_FILES = ("current_link_width", "current_link_speed", "max_link_width", "max_link_speed")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def set_link(root: Path, bdf: str, width: int, speed: str, max_width: int | None = None,
             max_speed: str | None = None) -> None:
    dev = (root / "sys/bus/pci/devices" / bdf).resolve()
    values = (str(width), speed, str(max_width or width), max_speed or speed)
    for name, value in zip(LINK_FILES, values, strict=True):
        _write(dev / name, value)


def _pci(root: Path, rel: str, bdf: str, cls: str, vendor: str, device: str, node: int, cpus: str) -> Path:
    dev = root / "sys/devices" / rel
    for name, value in (("class", cls), ("vendor", vendor), ("device", device), ("numa_node", str(node)),
                        ("local_cpulist", cpus)):
        _write(dev / name, value)
    link = root / "sys/bus/pci/devices" / bdf
    link.symlink_to(Path("../../../devices") / rel)
    return dev


def eight_gpus_one_x8_link(root: Path) -> Path:
    """Edit the extracted vm-cxl-switch tree at `root` in place (see the module doc); returns root."""
    (root / "cxl-list.json").unlink(missing_ok=True)  # the capture's ndctl view: no longer this tree's
    for bdf in CXL_FUNCTIONS:
        set_link(root, bdf, 8, "32.0 GT/s PCIe")
    for node, bridge in ((0, 0x20), (1, 0x40)):
        cpus = (root / f"sys/devices/system/node/node{node}/cpulist").read_text().strip()
        for i in range(4):
            port = f"0000:{bridge:02x}:{i:02x}.0"
            gpu = f"0000:{bridge + 1 + i:02x}:00.0"
            rel = f"pci0000:{bridge:02x}/{port}"
            _pci(root, rel, port, "0x060400", "0x8086", "0x352a", node, cpus)
            dev = _pci(root, f"{rel}/{gpu}", gpu, "0x030200", "0x10de", "0x2330", node, cpus)
            for name, value in zip(LINK_FILES, ("16", "32.0 GT/s PCIe", "16", "32.0 GT/s PCIe"), strict=True):
                _write(dev / name, value)
    note = root / "PROVENANCE.md"
    note.write_text("# HAND-MADE: fixtures/vm-cxl-switch edited by tests/handmade_cxl.py (not a capture)\n\n"
                    + (__doc__ or "") + "\n---\nThe capture it was made from:\n\n" + note.read_text())
    return root


def main(argv: list[str]) -> int:
    from tests.fixture_archives import fixture_archive, unpack

    out = Path(argv[0])
    root = eight_gpus_one_x8_link(unpack(fixture_archive("vm-cxl-switch"), out))
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
