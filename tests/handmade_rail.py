"""A HAND-MADE rail-aligned GPU node for the `launch --nic` tests: not a capture of any machine.

The CPUs and NUMA nodes are those of the hand-made `handmade-launch-2s4gpu-cxl` tree (2 sockets × 4 cores ×
2 threads, nodes 0 and 1); its PCI devices are replaced by the DGX/HGX layout: four PCIe switches (two per
socket), each with two GPUs (10de:2330, class 0x030200) and `nics` ConnectX NICs (15b3:1021, class 0x020700)
on its downstream ports. NIC j is `mlx5_j` (one verbs port, 1) with the netdev `ibpNs0`. GPU i and NIC i
share switch i // 2. Listed as hand-made in fixtures/README.md ("Hand-made"); built in a test's tmp_path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import fixture_copy

BASE = "handmade-launch-2s4gpu-cxl"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _function(sysfs: Path, chain: list[str], bdf: str, cls: str, vendor: str, device: str, node: int,
              cpus: str) -> Path:
    """The device directory under its bridges, with the bus link the kernel makes."""
    d = sysfs / "devices" / chain[0] / Path(*chain[1:]) / bdf if len(chain) > 1 else sysfs / "devices" / chain[0] / bdf
    for name, value in (("class", cls), ("vendor", vendor), ("device", device), ("numa_node", str(node)),
                        ("local_cpulist", cpus)):
        _write(d / name, value)
    link = sysfs / "bus/pci/devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("../../..") / d.relative_to(sysfs))
    return d


def build_rail(dest: Path, *, nics: int = 2, nic_sockets: tuple[int, ...] = (0, 1)) -> Path:
    """Write the tree under `dest` and return its root. `nics` per switch (2: one per GPU, rail-aligned;
    1: two GPUs per NIC); `nic_sockets`: the sockets whose switches carry NICs."""
    root = fixture_copy(BASE, dest)
    sysfs = root / "sys"
    for old in [*sysfs.glob("devices/pci*"), sysfs / "bus/pci/devices", sysfs / "class/net",
                sysfs / "class/infiniband", root / "proc/driver/nvidia"]:
        if old.is_symlink() or old.is_file():
            old.unlink()
        elif old.exists():
            shutil.rmtree(old)
    cpus = {0: "0-3,8-11", 1: "4-7,12-15"}
    gpu = nic = 0
    for switch in range(4):
        socket = switch // 2
        bus = 0x10 + 0x40 * switch
        host = f"pci0000:{bus:02x}"
        root_port = f"0000:{bus:02x}:01.0"
        upstream = f"0000:{bus + 1:02x}:00.0"
        bridge = ("0x060400", "0x8086", "0x352a")
        _function(sysfs, [host], root_port, *bridge, socket, cpus[socket])
        _function(sysfs, [host, root_port], upstream, "0x060400", "0x1000", "0xc030", socket, cpus[socket])
        ends = [("gpu", 0), ("gpu", 1)]
        if socket in nic_sockets:
            ends += [("nic", k) for k in range(nics)]
        for port, (kind, _) in enumerate(ends):
            down = f"0000:{bus + 2:02x}:{port:02x}.0"
            _function(sysfs, [host, root_port, upstream], down, "0x060400", "0x1000", "0xc030", socket, cpus[socket])
            bdf = f"0000:{bus + 3 + port:02x}:00.0"
            chain = [host, root_port, upstream, down]
            if kind == "gpu":
                _function(sysfs, chain, bdf, "0x030200", "0x10de", "0x2330", socket, cpus[socket])
                gpu += 1
            else:
                d = _function(sysfs, chain, bdf, "0x020700", "0x15b3", "0x1021", socket, cpus[socket])
                rdma, netdev = f"mlx5_{nic}", f"ibp{bus + 3 + port}s0"
                (d / "infiniband" / rdma).mkdir(parents=True)
                (d / "net" / netdev).mkdir(parents=True)
                (sysfs / "class/infiniband" / rdma / "ports/1").mkdir(parents=True)
                nic += 1
    return root
