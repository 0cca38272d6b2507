"""launch on the 2026 shapes: Grace in NUMA and CDMM mode, MI300A APUs, SNC-4. CPUs always on a node with CPUs,
default memory on that node, the GPU's HBM or the socket's nodes only when asked."""

from __future__ import annotations

import pytest

from numatune.errors import BindingError
from numatune.model.launch import CpuBind
from numatune.readers.caches import llc_groups
from numatune.system.host import Host
from tests.conftest import fixture_root
from tests.plan.test_launch import load, plan

MACHINES = {  # fixture -> the CPU node of each GPU (GPU0..), as the published readings put them
    "handmade-gh200-numa": [0],
    "handmade-gb200-numa": [0, 0, 1, 1],
    "handmade-gb200-cdmm": [0, 0, 1, 1],
    "handmade-mi300a-4apu": [0, 1, 2, 3],
    "handmade-snc4-8gpu": [0, 1, 2, 3, 4, 5, 6, 7],
}


@pytest.mark.parametrize("mode", ["node", "socket", "exclusive", "core-complex"])
@pytest.mark.parametrize("name", sorted(MACHINES))
def test_every_rank_every_mode_binds_cpus_of_a_cpu_node(name, mode):
    topo, _ = load(name)
    homes = MACHINES[name]
    groups = llc_groups(Host.open(fixture_root(name)), list(topo.cpu.online))
    for rank, home in enumerate(homes):
        p = plan(name, {"LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(len(homes))}, cpu_bind=CpuBind(mode),
                 fkw={"cache_groups": groups})
        assert p.node == home, (rank, p.reasons)
        assert p.cpus and all(topo.node_of_cpu(c) is not None for c in p.cpus)
        if mode != "socket":
            assert set(p.cpus) <= set(topo.node(home).cpus)
        assert p.memory.nodes == (home,)  # default memory: the CPU node's DRAM/LPDDR/HBM, never a GPU-memory node
        assert "--membind=" + str(home) in p.argv


def test_grace_says_the_gpu_memory_node_and_uses_the_cpu_node():
    p = plan("handmade-gb200-numa", gpu="3")
    assert p.node == 1
    line = next(r for r in p.reasons if r.startswith("gpu memory:"))
    assert "node 26" in line and "MIG placeholders 27-33" in line and "go to node 1" in line
    torch = next(r for r in p.reasons if r.startswith("torchrun"))
    assert "node 0" in torch and "numa_node -1" in torch  # torch reads -1 as 0: the other socket


def test_sysfs_naming_the_hbm_node_still_binds_the_cpu_node(tmp_path):
    from tests.conftest import fixture_copy

    root = fixture_copy("handmade-gh200-numa", tmp_path)
    (root / "sys/devices/pci0009:00/0009:00:00.0/0009:01:00.0/numa_node").write_text("1\n")
    from numatune.live.bind import read_launch_devices, read_launch_topology
    from numatune.model.launch import LaunchOptions
    from numatune.plan.launch import plan_launch
    from numatune.system.host import Host
    from tests.plan.test_launch import facts

    host = Host.open(root)
    topo = read_launch_topology(host, node_kinds=False)
    p = plan_launch(topo, read_launch_devices(host, topo), facts(), LaunchOptions(gpu="0"), ("python",))
    assert p.node == 0 and p.memory.nodes == (0,)
    assert "numa_node of 0009:01:00.0 is node 1, its GPU memory without CPUs" in p.node_source


def test_gpu_memory_policy_binds_the_hbm_node_or_says_why_not():
    p = plan("handmade-gb200-numa", gpu="2", mem_policy="gpu-memory")
    assert p.node == 1 and p.memory.nodes == (18,) and "--membind=18" in p.argv
    apu = plan("handmade-mi300a-4apu", gpu="2", mem_policy="gpu-memory")
    assert apu.memory.nodes == (2,) and any("APU's HBM" in r for r in apu.reasons)
    with pytest.raises(BindingError, match="not a NUMA node here.*cdmm"):
        plan("handmade-gb200-cdmm", gpu="2", mem_policy="gpu-memory")
    with pytest.raises(BindingError, match="not a NUMA node here.*discrete"):
        plan("handmade-snc4-8gpu", gpu="2", mem_policy="gpu-memory")


def test_snc4_socket_policies_use_the_sockets_clusters():
    p = plan("handmade-snc4-8gpu", gpu="6", mem_policy="socket")
    assert p.node == 6 and p.memory.nodes == (6, 4, 5, 7) and "--membind=4-7" in p.argv
    p = plan("handmade-snc4-8gpu", gpu="1", mem_policy="socket-interleave")
    assert p.memory.nodes == (1, 0, 2, 3) and "--interleave=0-3" in p.argv
    p = plan("handmade-gb200-numa", gpu="0", mem_policy="socket")  # HBM nodes are not the socket's CPU nodes
    assert p.memory.nodes == (0,) and any("only node of its socket" in w for w in p.warnings)


def test_torchrun_view_says_why_torch_fails_on_a_gpu_whose_sysfs_node_is_its_hbm(tmp_path):
    from numatune.live.bind import read_launch_devices, read_launch_topology
    from numatune.model.launch import LaunchOptions
    from numatune.plan.launch import plan_launch
    from numatune.system.host import Host
    from tests.conftest import fixture_copy
    from tests.plan.test_launch import facts

    root = fixture_copy("handmade-gh200-numa", tmp_path)
    (root / "sys/devices/pci0009:00/0009:00:00.0/0009:01:00.0/numa_node").write_text("1\n")
    host = Host.open(root)
    topo = read_launch_topology(host, node_kinds=False)
    p = plan_launch(topo, read_launch_devices(host, topo), facts(), LaunchOptions(gpu="0"), ("python",))
    assert p.torch is not None and not p.torch.same and p.node == 0
    assert "would fail" in p.torch.error and "numa_node 1 as the rank's node: the GPU's own memory (HBM)" \
        in p.torch.error
