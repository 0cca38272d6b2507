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
    with pytest.raises(BindingError, match="not a NUMA node here"):  # no driver named this device's memory
        plan("vm-superchip", gpu=GPU, mem_policy="gpu-memory")


def test_a_cpu_less_node_asked_for_is_refused():
    with pytest.raises(BindingError, match="node 3 has no CPUs"):
        plan("vm-superchip", node=3)
