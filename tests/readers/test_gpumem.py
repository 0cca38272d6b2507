"""GPU memory nodes on the hand-made superchip trees and POWER9: owner GPU, MIG placeholders, inferred CPU node."""

from __future__ import annotations

from numatune.model.topology import NumaNode, NvmlGpu, PciDevice
from numatune.readers.gpumem import attach_gpu_memory
from numatune.readers.topology import read_topology


def test_gh200_hbm_node_and_seven_placeholders(host_of):
    t = read_topology(host_of("handmade-gh200-numa"))
    gpu = t.device("0009:01:00.0")
    assert (gpu.memory_node, gpu.memory_node_from, gpu.placeholder_nodes) == (1, "numa_status", tuple(range(2, 9)))
    assert t.node(1).kind == "gpu" and t.node(1).gpu == "0009:01:00.0" and not t.node(1).mig_placeholder
    assert all(t.node(n).mig_placeholder and t.node(n).gpu == "0009:01:00.0" for n in range(2, 9))
    assert t.node(0).kind == "dram" and t.node(0).gpu is None
    nvml = {g.bdf: g for g in t.fabric.nvml_gpus}["0009:01:00.0"]
    assert nvml.numa_node == 1 and nvml.cpu_affinity == tuple(range(72))


def test_gb200_each_gpu_owns_its_hbm_node_and_the_seven_after_it(host_of):
    t = read_topology(host_of("handmade-gb200-numa"))
    want = {"0008:01:00.0": (2, 0), "0009:01:00.0": (10, 0), "0018:01:00.0": (18, 1), "0019:01:00.0": (26, 1)}
    for bdf, (hbm, cpu_node) in want.items():
        d = t.device(bdf)
        assert d.numa_node is None  # sysfs -1
        assert d.memory_node == hbm and d.placeholder_nodes == tuple(range(hbm + 1, hbm + 8))
        assert d.inferred_node == cpu_node and "GPU memory node" in d.inferred_from
        assert t.node(hbm).gpu == bdf and t.node(hbm).memory_total_kib > 0
    assert sum(1 for n in t.nodes if n.mig_placeholder) == 28
    assert [n.id for n in t.nodes if n.cpus] == [0, 1]


def test_cdmm_infers_the_node_from_nvml_cpu_affinity(host_of):
    t = read_topology(host_of("handmade-gb200-cdmm"))
    assert [(d.bdf, d.inferred_node, d.inferred_from, d.memory_node) for d in t.gpus] == [
        ("0008:01:00.0", 0, "NVML CPU affinity", None), ("0009:01:00.0", 0, "NVML CPU affinity", None),
        ("0018:01:00.0", 1, "NVML CPU affinity", None), ("0019:01:00.0", 1, "NVML CPU affinity", None)]


def test_mi300a_gpu_memory_is_its_cpu_node(host_of):
    t = read_topology(host_of("handmade-mi300a-4apu"))
    assert [(d.numa_node, d.memory_node, d.memory_node_from) for d in t.gpus] == [(s, s, "apu") for s in range(4)]
    assert all(n.kind == "dram" for n in t.nodes)


def test_power9_gpu_nodes_named_without_placeholders(host_of):
    t = read_topology(host_of("nvidiagpunumanodes"))
    assert {n.id: n.gpu for n in t.nodes if n.kind == "gpu"} == {
        250: "0035:05:00.0", 251: "0035:04:00.0", 252: "0007:00:00.0", 253: "0006:00:00.0", 254: "0004:06:00.0",
        255: "0004:05:00.0"}
    assert not any(d.placeholder_nodes for d in t.gpus)


def _node(i, cpus=(), kib=0, dist=None):
    return NumaNode(id=i, cpus=cpus, memory_total_kib=kib, distances=dist or {})


def test_placeholders_stop_at_a_node_with_memory_and_at_seven():
    nodes = (_node(0, (0,), 1, {0: 10, 1: 80}), _node(1, (), 100, {0: 80, 1: 10}),
             *(_node(i) for i in range(2, 11)), _node(11, (), 5))
    gpu = PciDevice(bdf="0009:01:00.0", path="", class_code=0x030200, vendor_id=0x10DE, device_id=0x2342,
                    kind="gpu", numa_node=None)
    new_nodes, (d,) = attach_gpu_memory(nodes, (gpu,), {"0009:01:00.0": 1})
    assert d.placeholder_nodes == tuple(range(2, 9)) and d.inferred_node == 0
    assert [n.id for n in new_nodes if n.mig_placeholder] == list(range(2, 9))
    # NVML naming a node with CPUs is not GPU memory; NVML naming an empty node is not either
    for nvml_node in (0, 3):
        _, (d,) = attach_gpu_memory(nodes, (gpu,), {}, (NvmlGpu(index=0, bdf="0009:01:00.0", numa_node=nvml_node),))
        assert d.memory_node is None
