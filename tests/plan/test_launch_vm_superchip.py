"""launch's plans on the real-kernel superchip tree (fixtures/vm-superchip), the same the VM harness ran in that
guest and proved with the workload's numa_maps (tests/vm/guest/checks_superchip.py): a device whose sysfs node is
a CPU-less memory node (as a Grace GPU's HBM node is published) binds the nearest node with CPUs."""

from __future__ import annotations

import pytest

from numatune.errors import BindingError
from tests.plan.test_launch import plan

GPU = "0000:61:00.0"  # the stand-in GPU: sysfs numa_node 3, a CPU-less node 80 from node 1 and 120 from node 0


def test_a_device_on_a_cpu_less_node_gets_the_nearest_cpu_nodes_cpus_and_memory():
    p = plan("vm-superchip", gpu=GPU)
    assert p.node == 1 and p.cpus == (2, 3) and p.memory.nodes == (1,)
    assert "is node 3" in p.node_source and "node 1 is the nearest node with CPUs" in p.node_source
    assert "--physcpubind=2-3" in p.argv and "--membind=1" in p.argv


def test_its_memory_goes_to_the_cpu_less_node_only_when_asked():
    p = plan("vm-superchip", gpu=GPU, mem_policy="gpu-memory", mem_nodes=(3,))
    assert p.cpus == (2, 3) and p.memory.nodes == (3,) and "--membind=3" in p.argv
    p = plan("vm-superchip", node=1, mem_policy="bind", mem_nodes=(3,))
    assert p.cpus == (2, 3) and p.memory.nodes == (3,)


def test_a_display_controller_on_the_node_is_no_gpu_and_owns_no_memory(tmp_path):
    """The stand-in as the first captures had it (bochs-display, 1234:1111, class 0x0380): `--gpu BDF` takes any
    PCI function, but its memory is no NUMA node: gpu-memory without --mem-nodes is refused."""
    root = superchip_tree(tmp_path, BOCHS_DISPLAY)
    assert _plan_on(root, gpu=GPU).node == 1
    with pytest.raises(BindingError, match="not a NUMA node here"):
        _plan_on(root, gpu=GPU, mem_policy="gpu-memory")


def test_a_cpu_less_node_asked_for_is_refused():
    with pytest.raises(BindingError, match="node 3 has no CPUs"):
        plan("vm-superchip", node=3)


# -- the same tree with a GPU-class stand-in: the VM's ati-vga (tests/vm/topologies/superchip.toml) ---------------
ATI_VGA = {"vendor": "0x1002\n", "device": "0x5046\n", "class": "0x030000\n"}  # QEMU's ati-vga (Rage 128 Pro)
BOCHS_DISPLAY = {"vendor": "0x1234\n", "device": "0x1111\n", "class": "0x038000\n"}  # QEMU's bochs-display


def superchip_tree(tmp_path, ids):  # noqa: ANN001, ANN201 - a path and sysfs values in, a path out
    """A copy of vm-superchip whose stand-in at 0000:61:00.0 carries these PCI ids."""
    from tests.conftest import fixture_copy

    root = fixture_copy("vm-superchip", tmp_path)
    dev = root / "sys/devices/pci0000:60/0000:60:00.0/0000:61:00.0"
    for name, value in ids.items():
        (dev / name).write_text(value)
    return root


def gpu_superchip_tree(tmp_path):  # noqa: ANN001, ANN201 - a path in, a path out
    """vm-superchip with the stand-in as QEMU's ati-vga presents it (AMD vendor, VGA class): a GPU on the CPU-less
    node 3, with no driver (no KFD, no NVIDIA numa_status) to name its memory."""
    return superchip_tree(tmp_path, ATI_VGA)


def _plan_on(root, **opts):  # noqa: ANN001, ANN202
    from numatune.live.bind import read_launch_devices, read_launch_topology
    from numatune.model.launch import LaunchOptions
    from numatune.plan.launch import plan_launch
    from numatune.system.host import Host
    from tests.plan.test_launch import facts

    host = Host.open(root)
    topo = read_launch_topology(host, node_kinds=False)
    devices = read_launch_devices(host, topo, opts.get("gpu"))  # --gpu BDF: any PCI function, as launch reads it
    return plan_launch(topo, devices, facts(), LaunchOptions(**opts), ("python",))


def test_a_gpu_on_a_cpu_less_node_owns_it_as_inferred_gpu_memory(tmp_path):
    from numatune.model.topology import MEMORY_FROM_PCI
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    topo = read_topology(Host.open(gpu_superchip_tree(tmp_path)))
    gpu = next(d for d in topo.devices if d.bdf == GPU)
    assert gpu.kind == "gpu" and gpu.numa_node == 3
    assert gpu.memory_node == 3 and gpu.memory_node_from == MEMORY_FROM_PCI
    node3, node2 = topo.node(3), topo.node(2)
    assert node3.kind == "gpu" and node3.gpu == GPU and "inferred" in node3.kind_evidence
    assert node2.kind == "unknown" and node2.gpu is None  # no device names it: still of no known kind


def test_launch_without_options_binds_the_gpus_cpu_node_and_gpu_memory_is_the_inferred_node(tmp_path):
    root = gpu_superchip_tree(tmp_path)
    p = _plan_on(root)  # rank 0 → GPU0, the only GPU
    assert p.gpu.bdf == GPU and p.node == 1 and p.cpus == (2, 3) and p.memory.nodes == (1,)
    assert any(r.startswith("gpu memory:") and "inferred" in r for r in p.reasons)
    p = _plan_on(root, mem_policy="gpu-memory")
    assert p.node == 1 and p.memory.nodes == (3,) and "--membind=3" in p.argv
    assert any("memory node inferred for 0000:61:00.0" in r for r in p.reasons)


def test_two_gpus_on_one_cpu_less_node_are_not_guessed_between(tmp_path):
    import shutil

    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    root = gpu_superchip_tree(tmp_path)
    bus = root / "sys/devices/pci0000:60/0000:60:00.0"
    shutil.copytree(bus / "0000:61:00.0", bus / "0000:61:00.1")
    (root / "sys/bus/pci/devices/0000:61:00.1").symlink_to("../../../devices/pci0000:60/0000:60:00.0/0000:61:00.1")
    topo = read_topology(Host.open(root))
    assert len([d for d in topo.devices if d.kind == "gpu" and d.numa_node == 3]) == 2
    assert topo.node(3).kind == "unknown" and all(d.memory_node is None for d in topo.devices)
