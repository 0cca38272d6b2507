"""Writes the HAND-MADE tree `handmade-dgx-h100-ids`: a DGX H100's eight GPU and eight compute-NIC PCI
addresses on two sockets, to check numatune's GPU/NIC numbering against that machine's public
`nvidia-smi topo -m` (fixtures/nvidia-smi-topo.md, block dgx-h100-nvswitch-gpu-block).

    python -m tests.handmade_dgx_h100 /tmp/handmade-dgx-h100-ids
    python -m tests.fixture_archives pack /tmp/handmade-dgx-h100-ids

Facts, with their sources (fixtures/README.md lists them too):
- GPU bus ids 1b, 43, 52, 61 (socket 0) and 9d, c3, d1, df (socket 1): the Bus-Id column of `nvidia-smi`
  on DGX H100 systems as published (nvidia-smi numbers them GPU0-GPU7 in that order);
- compute NICs: the NVIDIA DGX H100/H200 User Guide, "Network Modules" table: each OSFP port's ConnectX-7,
  its default netdev (ibp24s0, ibp64s0, ibp79s0, ibp94s0, ibp154s0, ibp192s0, ibp206s0, ibp220s0: the
  predictable name carries the PCI bus in decimal, so buses 18, 40, 4f, 5e, 9a, c0, ce, dc), its RDMA
  device (mlx5_0, 3, 4, 5, 6, 9, 10, 11) and the GPU it serves (0-7 in that order);
- CPUs 0-55,112-167 on node 0 and 56-111,168-223 on node 1 (2 x 56 cores x 2 threads): the CPU and NUMA
  affinity columns of the same `nvidia-smi topo -m`.
Made up (not checked against anything): each GPU and its NIC hang off one PCIe switch under their own
root port and host bridge (the bridges' bus numbers are invented), which gives the PXB the vendor's
matrix shows; node memory sizes; no storage NICs, no NVSwitch, no /proc/driver/nvidia (no invented UUIDs).
"""

from __future__ import annotations

import sys
from pathlib import Path

# (GPU bus, NIC bus, RDMA device, netdev, node): GPUi serves the NIC on its row (User Guide table).
PAIRS = [
    (0x1B, 0x18, "mlx5_0", "ibp24s0", 0),
    (0x43, 0x40, "mlx5_3", "ibp64s0", 0),
    (0x52, 0x4F, "mlx5_4", "ibp79s0", 0),
    (0x61, 0x5E, "mlx5_5", "ibp94s0", 0),
    (0x9D, 0x9A, "mlx5_6", "ibp154s0", 1),
    (0xC3, 0xC0, "mlx5_9", "ibp192s0", 1),
    (0xD1, 0xCE, "mlx5_10", "ibp206s0", 1),
    (0xDF, 0xDC, "mlx5_11", "ibp220s0", 1),
]
NODE_CPUS = {0: "0-55,112-167", 1: "56-111,168-223"}


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _cpus(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def _function(sysfs: Path, rel: str, cls: str, vendor: str, device: str, node: int) -> Path:
    d = sysfs / "devices" / rel
    for name, value in (("class", cls), ("vendor", vendor), ("device", device), ("numa_node", str(node)),
                        ("local_cpulist", NODE_CPUS[node])):
        _w(d / name, value + "\n")
    bdf = rel.rsplit("/", 1)[-1]
    link = sysfs / "bus" / "pci" / "devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("../../../devices") / rel)
    return d


def build(root: Path) -> Path:
    sysfs = root / "sys"
    for gpu, nic, rdma, netdev, node in PAIRS:
        host = nic - 3  # invented: root port on the host bridge's bus, switch ports on the next two buses
        rp = f"pci0000:{host:02x}/0000:{host:02x}:01.0"
        up = f"{rp}/0000:{host + 1:02x}:00.0"
        bridge = ("0x060400", "0x1000", "0xc030")  # PCIe switch ports (class 0604)
        _function(sysfs, rp, "0x060400", "0x8086", "0x352a", node)
        _function(sysfs, up, *bridge, node)
        nic_port, gpu_port = f"{up}/0000:{host + 2:02x}:00.0", f"{up}/0000:{host + 2:02x}:03.0"
        _function(sysfs, nic_port, *bridge, node)
        _function(sysfs, gpu_port, *bridge, node)
        nic_dir = _function(sysfs, f"{nic_port}/0000:{nic:02x}:00.0", "0x020700", "0x15b3", "0x1021", node)
        (nic_dir / "net" / netdev).mkdir(parents=True)
        (nic_dir / "infiniband" / rdma).mkdir(parents=True)
        _function(sysfs, f"{gpu_port}/0000:{gpu:02x}:00.0", "0x030200", "0x10de", "0x2330", node)
    nodes = sysfs / "devices" / "system" / "node"
    for node, spec in NODE_CPUS.items():
        _w(nodes / f"node{node}" / "cpulist", spec + "\n")
        _w(nodes / f"node{node}" / "distance", ("10 21" if node == 0 else "21 10") + "\n")
        _w(nodes / f"node{node}" / "meminfo", f"Node {node} MemTotal:       1056000000 kB\n"
                                              f"Node {node} MemFree:        1000000000 kB\n")
    for name in ("possible", "online", "has_cpu", "has_memory", "has_normal_memory"):
        _w(nodes / name, "0-1\n")
    cpu_dir = sysfs / "devices" / "system" / "cpu"
    for node, spec in NODE_CPUS.items():
        for cpu in _cpus(spec):
            core = cpu % 112
            sibling = core + 112
            topo = cpu_dir / f"cpu{cpu}" / "topology"
            _w(cpu_dir / f"cpu{cpu}" / "online", "1\n")
            _w(topo / "physical_package_id", f"{node}\n")
            _w(topo / "core_id", f"{core % 56}\n")
            _w(topo / "thread_siblings_list", f"{core},{sibling}\n")
            _w(topo / "core_siblings_list", spec + "\n")
            _w(topo / "package_cpus_list", spec + "\n")
    for name in ("online", "possible", "present"):
        _w(cpu_dir / name, "0-223\n")
    _w(root / "proc" / "sys" / "kernel" / "osrelease", "5.15.0-1042-nvidia\n")
    return root


if __name__ == "__main__":
    build(Path(sys.argv[1]))
