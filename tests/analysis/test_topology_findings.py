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
