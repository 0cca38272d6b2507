"""HAND-MADE roots for the irq tests: no corpus tree has /proc/irq together with sys/, so these small
trees are built in tmp_path by this code (they are not captures of a real machine).

Layout: 2 nodes x 4 CPUs (node 0: 0-3, node 1: 4-7), SMT pairs (0,1) (2,3) (4,5) (6,7).
- NIC 0000:81:00.0 (mlx5, eth1 / mlx5_0) on node 1: IRQ 40 mlx5_async, 41-44 mlx5_comp0-3; all routed
  to node-0 CPUs 0-3 and firing on CPU 0 (remote).
- NVMe 0000:01:00.0 (nvme0) on node 0: IRQ 50 nvme0q0 (admin), 51-52 nvme0q1-2 (I/O queues, managed).
- GPU 0000:41:00.0 (nvidia) on node 0: IRQ 60.
- IRQ 70 `i40e-ens9-TxRx-0`: a NIC known only by its action name.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from numatune.cpulist import format_cpulist, format_cpumask

NCPU = 8
NODES = {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}
NIC = "0000:81:00.0"
NVME = "0000:01:00.0"
GPU = "0000:41:00.0"

# irq -> (actions, per-CPU counts, smp_affinity_list, effective_affinity_list)
IRQS: dict[int, tuple[str, list[int], str, str]] = {
    0: ("timer", [50, 0, 0, 0, 0, 0, 0, 0], "0-7", "0"),
    40: ("mlx5_async@pci:0000:81:00.0", [12, 0, 0, 0, 0, 0, 0, 0], "0-3", "0"),
    41: ("mlx5_comp0@pci:0000:81:00.0", [9000, 0, 0, 0, 0, 0, 0, 0], "0-3", "0"),
    42: ("mlx5_comp1@pci:0000:81:00.0", [8000, 0, 0, 0, 0, 0, 0, 0], "0-3", "0"),
    43: ("mlx5_comp2@pci:0000:81:00.0", [0, 0, 0, 0, 0, 0, 0, 0], "0-3", "1"),
    44: ("mlx5_comp3@pci:0000:81:00.0", [0, 0, 0, 0, 700, 0, 0, 0], "4", "4"),
    50: ("nvme0q0", [3, 0, 0, 0, 0, 0, 0, 0], "0-7", "0"),
    51: ("nvme0q1", [100, 0, 0, 0, 0, 0, 0, 0], "0-3", "0"),
    52: ("nvme0q2", [0, 0, 0, 0, 90, 0, 0, 0], "4-7", "4"),
    60: ("nvidia", [0, 0, 55, 0, 0, 0, 0, 0], "0-3", "2"),
    70: ("i40e-ens9-TxRx-0", [0, 0, 0, 0, 0, 0, 4, 0], "0-7", "6"),
}


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def interrupts_text(irqs: dict[int, tuple[str, list[int], str, str]] = IRQS) -> str:
    """/proc/interrupts in the kernel's layout ("%*d:" then " %10u" per CPU)."""
    lines = ["     " + "".join(f"CPU{c:<7}" for c in range(NCPU)).rstrip()]
    lines[0] = "           " + "       ".join(f"CPU{c}" for c in range(NCPU))
    for irq, (name, counts, _, _) in sorted(irqs.items()):
        cols = "".join(f" {n:10d}" for n in counts)
        lines.append(f"{irq:4d}:{cols}  IR-PCI-MSI {irq * 4096}-edge      {name}")
    lines.append(" NMI:" + "".join(f" {0:10d}" for _ in range(NCPU)) + "   Non-maskable interrupts")
    lines.append(" ERR:          0")
    lines.append(" MIS:          0")
    return "\n".join(lines) + "\n"


def _pci(root: Path, bdf: str, bridge: str, host: str, cls: str, vendor: str, node: int, msi: list[int]) -> Path:
    dev = root / "sys/devices" / host / bridge / bdf
    _w(root / "sys/devices" / host / bridge / "class", "0x060400\n")
    _w(dev / "class", cls + "\n")
    _w(dev / "vendor", vendor + "\n")
    _w(dev / "device", "0x1017\n")
    _w(dev / "numa_node", f"{node}\n")
    _w(dev / "local_cpulist", format_cpulist(NODES[node]) + "\n")
    _w(dev / "irq", f"{msi[0] if msi else 0}\n")
    for irq in msi:
        _w(dev / "msi_irqs" / str(irq), "msix\n")
    link = root / "sys/bus/pci/devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(dev, link.parent), link)
    return dev


def build_root(base: Path, *, irqbalance: bool = False, isolated: str = "", proc_irq: bool = True) -> Path:
    """Write the hand-made tree under base/root and return it."""
    root = base / "root"
    cpu = root / "sys/devices/system/cpu"
    _w(cpu / "online", f"0-{NCPU - 1}\n")
    _w(cpu / "possible", f"0-{NCPU - 1}\n")
    _w(cpu / "present", f"0-{NCPU - 1}\n")
    _w(cpu / "isolated", isolated + "\n")
    for c in range(NCPU):
        first = c - c % 2
        t = cpu / f"cpu{c}/topology"
        _w(t / "thread_siblings_list", f"{first}-{first + 1}\n")
        _w(t / "core_id", f"{first // 2}\n")
        _w(t / "physical_package_id", f"{c // 4}\n")
        _w(t / "core_siblings_list", "0-3\n" if c < 4 else "4-7\n")
    node_dir = root / "sys/devices/system/node"
    _w(node_dir / "online", "0-1\n")
    _w(node_dir / "possible", "0-1\n")
    for nid, cpus in NODES.items():
        _w(node_dir / f"node{nid}/cpulist", format_cpulist(cpus) + "\n")
        _w(node_dir / f"node{nid}/distance", "10 21\n" if nid == 0 else "21 10\n")
        _w(node_dir / f"node{nid}/meminfo", f"Node {nid} MemTotal:       16384000 kB\nNode {nid} MemFree: 1000 kB\n")
    nic = _pci(root, NIC, "0000:80:01.0", "pci0000:80", "0x020000", "0x15b3", 1, [40, 41, 42, 43, 44])
    (nic / "net/eth1").mkdir(parents=True)
    (nic / "infiniband/mlx5_0").mkdir(parents=True)
    nvme = _pci(root, NVME, "0000:00:01.0", "pci0000:00", "0x010802", "0x144d", 0, [50, 51, 52])
    (nvme / "nvme/nvme0").mkdir(parents=True)
    _pci(root, GPU, "0000:40:01.0", "pci0000:40", "0x030200", "0x10de", 0, [60])
    _w(root / "proc/interrupts", interrupts_text())
    if proc_irq:
        for irq, (name, _, smp, eff) in IRQS.items():
            d = root / f"proc/irq/{irq}"
            cpus = _cpus(smp)
            _w(d / "smp_affinity", format_cpumask(cpus) + "\n")
            _w(d / "smp_affinity_list", smp + "\n")
            _w(d / "effective_affinity_list", eff + "\n")
            _w(d / "effective_affinity", format_cpumask(_cpus(eff)) + "\n")
            _w(d / "affinity_hint", "00\n")
            _w(d / "node", "1\n" if irq in (40, 41, 42, 43, 44) else "0\n")
            (d / name.split("@")[0]).mkdir(exist_ok=True)
        _w(root / "proc/irq/default_smp_affinity", "ff\n")
    if irqbalance:
        _w(root / "proc/4242/comm", "irqbalance\n")
        _w(root / "proc/4242/environ", "SECRET_TOKEN=hunter2\x00IRQBALANCE_BANNED_CPULIST=6-7\x00")
    _w(root / "proc/1/comm", "systemd\n")
    return root


def _cpus(text: str) -> list[int]:
    from numatune.cpulist import parse_cpulist

    return sorted(parse_cpulist(text))


def tree_digest(root: Path, skip: tuple[str, ...] = ("var",)) -> dict[str, str]:
    """Relative path -> sha256 of every file (the state files under var/ excluded)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in skip or path.is_symlink() or not path.is_file():
            continue
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
