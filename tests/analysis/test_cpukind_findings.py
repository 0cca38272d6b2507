"""NT020/NT021 on the real GB10 CPU tree. The GPU and the two-node split in the NT021 tests are HAND-MADE
model records (no public tree has a GPU next to a hybrid CPU): GB10's CPUs with node 0 = the A725 cores."""

from __future__ import annotations

import pytest

from numatune.analysis.topology_findings import check_capacity_frequency, check_gpu_on_efficiency_cores
from numatune.model.topology import NumaNode, PciDevice
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root

A725 = (0, 1, 2, 3, 4, 10, 11, 12, 13, 14)
X925 = (5, 6, 7, 8, 9, 15, 16, 17, 18, 19)


@pytest.fixture(scope="module")
def gb10():
    return read_topology(Host.open(fixture_root("nvidia-dgx-gb10")))


def gpu_on(node: int) -> PciDevice:
    return PciDevice(bdf="000f:01:00.0", path="/sys/devices/pci000f:00/000f:01:00.0", class_code=0x030200,
                     vendor_id=0x10DE, device_id=0x2E12, kind="gpu", numa_node=node)


def split(topo):
    nodes = (NumaNode(0, A725, 1 << 20), NumaNode(1, X925, 1 << 20))
    return topo._replace(nodes=nodes)


def test_nt020_names_the_capacities_that_share_a_frequency(gb10):
    (f,) = check_capacity_frequency(gb10)
    assert f.code == "NT020" and f.subject == "cpu_capacity"
    assert "718 (CPUs 0-4); 731 (CPUs 10-14) at 2808 MHz" in f.message
    assert "997 (CPUs 5-9); 1017 (CPUs 15-18); 1024 (CPUs 19) at 3900 MHz" in f.message


def test_nt020_silent_when_capacity_and_frequency_agree():
    topo = read_topology(Host.open(fixture_root("arm-A510-A710-A715-X3")))
    assert list(check_capacity_frequency(topo)) == []


def test_nt021_gpu_whose_node_has_only_a725_cores(gb10):
    topo = split(gb10)._replace(devices=(gpu_on(0),))
    (f,) = check_gpu_on_efficiency_cores(topo)
    assert f.code == "NT021" and f.severity.value == "warning"
    assert "node 0 has only efficiency cores (Cortex-A725, CPUs 0-4,10-14)" in f.message
    assert "performance cores on node(s) 1" in f.fix


def test_nt021_silent_for_a_gpu_near_x925_cores(gb10):
    assert list(check_gpu_on_efficiency_cores(split(gb10)._replace(devices=(gpu_on(1),)))) == []
    assert list(check_gpu_on_efficiency_cores(gb10._replace(devices=(gpu_on(0),)))) == []  # node 0 has both kinds
