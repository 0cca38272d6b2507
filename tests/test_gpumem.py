"""model.gpumem: each GPU's CPU node and memory node, and the machine's GPU-memory mode, on the superchip trees."""

from __future__ import annotations

from numatune.model.gpumem import gpu_memory_layout
from numatune.readers.topology import read_topology


def layout(host_of, name):
    return gpu_memory_layout(read_topology(host_of(name)))


def test_gh200_numa_mode_cpu_node_0_memory_node_1(host_of):
    lay = layout(host_of, "handmade-gh200-numa")
    assert lay.mode == "numa" and lay.clustering is None
    (g,) = lay.gpus
    assert (g.label, g.cpu_node, g.memory_node, g.placeholder_nodes) == ("GPU0", 0, 1, tuple(range(2, 9)))
    assert (g.sysfs_node, g.nvml_node) == (0, 1)
    assert any("NVML reports node 1" in n and "--cpunodebind=1 fails" in n for n in g.notes)


def test_gb200_numa_and_cdmm_give_the_same_cpu_nodes(host_of):
    numa, cdmm = layout(host_of, "handmade-gb200-numa"), layout(host_of, "handmade-gb200-cdmm")
    assert (numa.mode, cdmm.mode) == ("numa", "cdmm")
    assert [g.cpu_node for g in numa.gpus] == [g.cpu_node for g in cdmm.gpus] == [0, 0, 1, 1]
    assert [g.memory_node for g in numa.gpus] == [2, 10, 18, 26]
    assert [g.memory_node for g in cdmm.gpus] == [None] * 4
    assert dict(numa.nodes_per_socket) == {0: (0,), 1: (1,)}


def test_mi300a_apu(host_of):
    lay = layout(host_of, "handmade-mi300a-4apu")
    assert lay.mode == "apu" and lay.clustering is None
    assert [(g.cpu_node, g.memory_node) for g in lay.gpus] == [(s, s) for s in range(4)]


def test_snc4_same_socket_nodes(host_of):
    lay = layout(host_of, "handmade-snc4-8gpu")
    assert lay.mode == "discrete" and lay.clustering == "SNC-4"
    assert dict(lay.nodes_per_socket) == {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}
    assert lay.gpus[5].same_socket == (5, 4, 6, 7)


def test_a_sysfs_node_without_cpus_is_never_the_cpu_node(host_of):
    t = read_topology(host_of("handmade-gh200-numa"))
    gpu = t.device("0009:01:00.0")
    t = t._replace(devices=tuple(d._replace(numa_node=1) if d.bdf == gpu.bdf else d for d in t.devices))
    (g,) = gpu_memory_layout(t).gpus
    assert g.cpu_node == 0 and "nearest node with CPUs" in g.cpu_node_from
    assert any("sysfs numa_node 1" in n and "its GPU memory" in n for n in g.notes)


def test_clustering_needs_a_socket_whose_nodes_are_nearer_than_a_remote_node(host_of):
    """SNC-2 on a Cascade Lake (SLIT 11 within the socket), Naples's 4 dies (no SLIT here: named by vendor), an
    ARM socket's 2 clusters (16); not a QEMU guest whose 3 nodes sit on one socket at 20 (was "SNC-3") nor a
    firmware that left all 8 nodes of a socket at 10 (was "SNC-8")."""
    named = {name: layout(host_of, name).clustering for name in (
        "memorysidecaches", "x86_64-epyc_7451", "128arm-2pa2n8cluster4co", "fakeheteromemtiers",
        "8em64t-2s2ca2c-buggynuma")}
    assert named == {"memorysidecaches": "SNC-2", "x86_64-epyc_7451": "4 dies per socket (EPYC Naples)",
                     "128arm-2pa2n8cluster4co": "2 nodes per socket", "fakeheteromemtiers": None,
                     "8em64t-2s2ca2c-buggynuma": None}


def test_naples_has_dies_not_nps_and_later_epycs_have_nps(host_of):
    """The EPYC 7451 (Naples) was labelled NPS4: Naples's dies are NUMA nodes by construction, it has no NPS
    setting (that came with Rome, the 7002 series). The same layout with a Rome model name is NPS4."""
    from numatune.model.gpumem import clustering, naples

    topo = read_topology(host_of("x86_64-epyc_7451"))
    assert topo.cpu.model == "AMD EPYC 7451 24-Core Processor"
    rome = topo._replace(cpu=topo.cpu._replace(model="AMD EPYC 7452 32-Core Processor"))
    assert clustering(rome)[0] == "NPS4"
    assert [m for m in ("AMD EPYC 7551P 32-Core Processor", "AMD EPYC 7281 16-Core Processor", "AMD EPYC 3251 8-Core",
                        "AMD EPYC 7H12 64-Core Processor", "AMD EPYC 7763 64-Core Processor",
                        "AMD EPYC 9654 96-Core Processor") if naples(m)] == [
        "AMD EPYC 7551P 32-Core Processor", "AMD EPYC 7281 16-Core Processor", "AMD EPYC 3251 8-Core"]
