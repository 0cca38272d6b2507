"""GPUDirect RDMA readiness: the peer-memory module, ACS on the bridges where GPU-NIC traffic turns,
and a NIC reached through the CPU. Hand-made trees (labelled as such): no fixture captured as root has
the extended config space, and none has an RDMA NIC beside an NVIDIA GPU."""

from __future__ import annotations

import os
import struct

from numatune.analysis.topology_findings import topology_findings
from numatune.readers.fabric import acs_redirect, read_peer_memory
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_copy


def config_space(acs_control: int | None, *, size: int = 4096) -> bytes:
    """A PCIe function's config space as the kernel's `config` file shows it to root (hand-made): an
    AER capability at 0x100 chaining to ACS (ID 0x000d) at 0x148 with the given control register."""
    data = bytearray(size)
    data[0:4] = struct.pack("<HH", 0x8086, 0x1234)
    if size > 0x100:
        nxt = 0x148 if acs_control is not None else 0
        data[0x100:0x104] = struct.pack("<I", 0x0001 | (1 << 16) | (nxt << 20))  # AER, next -> ACS
        if acs_control is not None:
            data[0x148:0x14C] = struct.pack("<I", 0x000D | (1 << 16))
            data[0x14C:0x150] = struct.pack("<HH", 0x005F, acs_control)
    return bytes(data)


def test_acs_control_register_is_read_from_the_extended_capabilities():
    assert acs_redirect(config_space(0x001D)) is True  # SV, RR, CR, UF: the Linux default with an IOMMU
    assert acs_redirect(config_space(0x0001)) is False  # source validation only: P2P may turn in the switch
    assert acs_redirect(config_space(None)) is None  # no ACS capability
    assert acs_redirect(config_space(0x001D, size=64)) is None  # not root: 64 bytes, no extended space
    looped = bytearray(config_space(None))
    looped[0x100:0x104] = struct.pack("<I", 0x0001 | (1 << 16) | (0x100 << 20))  # next points to itself
    assert acs_redirect(bytes(looped)) is None


def test_peer_memory_module_from_the_real_h100_modules_file(host_of):
    assert read_peer_memory(host_of("h100-vm-1gpu")) == ""  # nvidia, nvidia_uvm: no peermem
    assert read_peer_memory(host_of("vm-two-socket")) is None  # no /proc/modules in that tree


def _write(path, text: str | bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(text, bytes) else "w") as fh:
        fh.write(text)


def switch_tree(root, *, acs: int | None, peermem: bool) -> None:
    """Hand-made: one node (CPUs 0-3), a PCIe switch (01:00.0 up, 02:00.0/02:01.0 down) under root port
    00:01.0 with an NVIDIA GPU (03:00.0) and a Mellanox RDMA NIC (04:00.0, mlx5_0) below it."""
    _write(f"{root}/sys/devices/system/node/node0/cpulist", "0-3\n")
    _write(f"{root}/sys/devices/system/node/online", "0\n")
    for cpu in range(4):
        _write(f"{root}/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", "0\n")
        _write(f"{root}/sys/devices/system/cpu/cpu{cpu}/topology/core_id", f"{cpu}\n")
    _write(f"{root}/sys/devices/system/cpu/online", "0-3\n")
    base = f"{root}/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    funcs = {
        "0000:00:01.0": (f"{root}/sys/devices/pci0000:00/0000:00:01.0", "0x060400", "0x8086"),
        "0000:01:00.0": (base, "0x060400", "0x10b5"),
        "0000:02:00.0": (f"{base}/0000:02:00.0", "0x060400", "0x10b5"),
        "0000:02:01.0": (f"{base}/0000:02:01.0", "0x060400", "0x10b5"),
        "0000:03:00.0": (f"{base}/0000:02:00.0/0000:03:00.0", "0x030200", "0x10de"),
        "0000:04:00.0": (f"{base}/0000:02:01.0/0000:04:00.0", "0x020700", "0x15b3"),
    }
    os.makedirs(f"{root}/sys/bus/pci/devices", exist_ok=True)
    for bdf, (path, cls, vendor) in funcs.items():
        _write(f"{path}/class", cls + "\n")
        _write(f"{path}/vendor", vendor + "\n")
        _write(f"{path}/device", "0x1234\n")
        _write(f"{path}/numa_node", "0\n")
        _write(f"{path}/local_cpulist", "0-3\n")
        _write(f"{path}/config", config_space(acs if bdf.startswith("0000:02:") else None))
        os.symlink(os.path.relpath(path, f"{root}/sys/bus/pci/devices"), f"{root}/sys/bus/pci/devices/{bdf}")
    _write(f"{funcs['0000:04:00.0'][0]}/infiniband/mlx5_0/.keep", "")
    _write(f"{root}/proc/modules", "nvidia_peermem 16384 0 - Live 0x0\n" * peermem + "nvidia 1 0 - Live 0x0\n")


def codes(root) -> set[str]:
    return {f.code for f in topology_findings(read_topology(Host.open(root), pci_ids=None))}


def test_acs_redirect_on_the_switch_between_gpu_and_nic_is_nt017(tmp_path):
    switch_tree(tmp_path, acs=0x001D, peermem=True)
    topo = read_topology(Host.open(tmp_path), pci_ids=None)
    # Only the switch's downstream ports have an ACS capability in this tree.
    assert topo.fabric.acs == {"0000:02:00.0": "redirect", "0000:02:01.0": "redirect"}
    assert topo.fabric.peer_memory == "nvidia_peermem"
    found = [f for f in topology_findings(topo) if f.code == "NT017"]
    assert len(found) == 1 and "0000:02:00.0, 0000:02:01.0" in found[0].message
    assert "NT016" not in codes(tmp_path) and "NT018" not in codes(tmp_path)  # module loaded, PXB path


def test_no_redirect_and_no_peermem(tmp_path):
    switch_tree(tmp_path, acs=0x0001, peermem=False)
    found = codes(tmp_path)
    assert "NT017" not in found and "NT016" in found


def test_nic_through_the_cpu_is_nt018_on_a_real_layout(tmp_path):
    # The hand-made launch fixture's GPU 86:00.0 and NIC 87:00.0 hang off two root ports of one host
    # bridge (PHB); give the NIC an RDMA name and GPUDirect reaches it through the CPU.
    root = fixture_copy("handmade-launch-2s4gpu-cxl", tmp_path)
    _write(f"{root}/sys/devices/pci0000:85/0000:85:01.0/0000:87:00.0/infiniband/mlx5_0/.keep", "")
    topo = read_topology(Host.open(root), pci_ids=None)
    nt018 = [f for f in topology_findings(topo) if f.code == "NT018"]
    assert {f.subject: "PHB" in f.message or "NODE" in f.message for f in nt018} == {
        "0000:86:00.0": True, "0000:af:00.0": True}  # PHB and NODE: through the CPU
    assert "PHB" in next(f.message for f in nt018 if f.subject == "0000:86:00.0")
    nt002 = {f.subject for f in topology_findings(topo) if f.code == "NT002"}
    assert nt002 == {"0000:18:00.0", "0000:3b:00.0"}  # socket 0's GPUs: across the socket link instead
