"""Topology findings whose advice depends on the platform: NT001 (numa_node -1) on x86 servers, where the
firmware can be fixed, and on Grace superchips, where -1 is the platform's own answer for a C2C GPU."""

from __future__ import annotations

import pytest

from numatune.analysis.topology_findings import check_unknown_device_node
from numatune.model.findings import Severity
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root


def nt001(name: str) -> dict[str, object]:
    topo = read_topology(Host.open(fixture_root(name)))
    return {f.subject: f for f in check_unknown_device_node(topo)}


@pytest.mark.parametrize("name", ["handmade-gb200-numa", "handmade-gb200-cdmm"])
def test_grace_gpu_without_a_pci_node_is_info_and_names_the_node_not_the_bios(name):
    found = nt001(name)
    gpus = {b: f for b, f in found.items() if b.endswith(":01:00.0")}
    assert sorted(gpus) == ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"]
    for bdf, f in gpus.items():
        assert f.severity is Severity.INFO
        assert "BIOS" not in f.fix and f"numatune launch --gpu {bdf}" in f.fix
        assert "nothing to enable in the BIOS" in f.message
    # GPUs 2 and 3 hang off the second Grace: torchrun's reading of -1 (node 0) is wrong for them
    assert "the wrong node (numatune: 1)" in gpus["0018:01:00.0"].fix
    assert "(node 0)" in gpus["0008:01:00.0"].fix and "the same node" in gpus["0008:01:00.0"].fix


def test_x86_device_without_a_node_on_two_sockets_stays_a_warning_with_the_firmware_fix():
    found = nt001("intel-xeon-L5640-2node")
    assert found and all(f.severity is Severity.WARNING for f in found.values())
    assert all("_PXM/SRAT" in f.fix for f in found.values())


def test_one_node_device_without_a_node_is_info_with_nothing_to_fix():
    """A one-node VM: -1 cannot misplace anything, so no BIOS advice (the first inspect a newcomer runs)."""
    found = nt001("h100-vm-1gpu")
    assert found and all(f.severity is Severity.INFO and f.fix == "" for f in found.values())
    assert all("nothing is misplaced" in f.message for f in found.values())


# -- NT003: a CPU-less node in DRAM's tier, advice by the node's kind -------------------------------------------
def nt003(root) -> dict[str, object]:  # noqa: ANN001 - a path
    from numatune.analysis.topology_findings import check_cpuless_node_in_top_tier

    topo = read_topology(Host.open(root))
    return {f.subject: (f, topo.node(int(f.subject.split()[1])).kind) for f in check_cpuless_node_in_top_tier(topo)}


def test_nt003_cxl_node_is_told_about_hmat_cdat_and_dax(tmp_path):
    from tests.conftest import fixture_copy

    root = fixture_copy("vm-cxl", tmp_path)  # its CXL node 3 moved into DRAM's tier, as firmware without HMAT gives
    tiers = root / "sys" / "devices" / "virtual" / "memory_tiering"
    (tiers / "memory_tier4" / "nodelist").write_text("0-1,3\n")
    (tiers / "memory_tier22" / "nodelist").write_text("2\n")
    (finding, kind), = nt003(root).values()
    assert kind == "cxl" and finding.severity is Severity.WARNING
    assert "CDAT" in finding.fix and "daxctl reconfigure-device" in finding.fix and "GPU" not in finding.fix


def test_nt003_node_of_a_display_device_is_likely_its_memory_not_a_firmware_gap(tmp_path):
    """The real-kernel superchip tree with a display controller (bochs-display) as its stand-in: node 3 is its node,
    node 2 of nothing. Node 3's finding says GPU memory is in DRAM's tier by design (info); node 2's asks for HMAT."""
    from tests.plan.test_launch_vm_superchip import BOCHS_DISPLAY, superchip_tree

    found = nt003(superchip_tree(tmp_path, BOCHS_DISPLAY))
    (f3, kind3), (f2, kind2) = found["node 3"], found["node 2"]
    assert kind3 == kind2 == "unknown"
    assert f3.severity is Severity.INFO and "0000:61:00.0" in f3.message and "by design" in f3.fix
    assert f2.severity is Severity.WARNING and "HMAT" in f2.fix and "by design" not in f2.fix


def test_nt003_never_for_a_gpu_memory_node(tmp_path):
    """The same tree with an AMD VGA function (what QEMU's ati-vga presents) in place of the display controller:
    node 3 is that GPU's memory (inferred from its PCI node), kind gpu, and NT003 leaves it alone."""
    from tests.plan.test_launch_vm_superchip import gpu_superchip_tree

    found = nt003(gpu_superchip_tree(tmp_path))
    assert "node 3" not in found and found["node 2"][1] == "unknown"
