"""readers.nodes on the real-kernel superchip tree (fixtures/vm-superchip: QEMU 7.2, Debian 6.12, captured by the
VM harness): CPU-less memory nodes at the Grace SLIT, and HMAT figures the kernel writes as 0 when none is given."""

from __future__ import annotations

from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root


def superchip():
    return read_topology(Host.open(fixture_root("vm-superchip")), devices=True, cxl=False, settings=False)


def test_cpu_less_memory_nodes_keep_the_grace_distances():
    topo = superchip()
    assert [(n.id, n.cpus) for n in topo.nodes] == [(0, (0, 1)), (1, (2, 3)), (2, ()), (3, ())]
    assert all(n.memory_total_kib > 400 * 1024 for n in topo.nodes)
    assert topo.node(0).distances == {0: 10, 1: 40, 2: 80, 3: 120}
    assert topo.node(2).distances[3] == 255  # a SLIT byte at its maximum, kept as given
    # no HMAT figure, no CXL or DAX link: never DRAM; node 3 is the node of the stand-in GPU (ati-vga), taken as its
    # memory (inferred), node 2 no device's: memory of unknown kind
    assert [topo.node(n).kind for n in (2, 3)] == ["unknown", "gpu"]
    assert topo.node(3).gpu == "0000:61:00.0" and "inferred" in topo.node(3).kind_evidence


def test_an_hmat_figure_of_zero_is_unknown():
    # QEMU's hmat=on without hmat-lb: the kernel links each target to its initiator and writes 0 for every figure
    topo = superchip()
    entries = [e for n in topo.nodes for e in n.hmat]
    assert entries and {e.initiators for e in entries} == {(0,), (1,)}
    assert all(e.read_latency_ns is None and e.read_bandwidth_mbps is None and e.write_latency_ns is None
               and e.write_bandwidth_mbps is None for e in entries)


def test_a_device_behind_a_cpu_less_node_reads_that_node():
    dev = next(d for d in superchip().devices if d.bdf == "0000:61:00.0")
    assert (dev.kind, dev.numa_node, dev.local_cpus) == ("gpu", 3, ())  # QEMU's ati-vga: AMD's id, VGA class
    assert (dev.vendor_id, dev.class_code) == (0x1002, 0x030000) and dev.memory_node == 3
