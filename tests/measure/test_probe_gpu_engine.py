"""measure.gpu's engine without a GPU: a stand-in torch module (labelled fake) checks what is never done.

The real copies are covered by the opt-in live test (NUMATUNE_TEST_GPU=1, run on a lent H100) and the
recorded H100 output (tests/render/test_probe_gpu.py).
"""

from __future__ import annotations

import sys
import types

import pytest

from numatune.readers.topology import read_topology
from numatune.system.host import Host


def fake_torch(calls: list[str]) -> types.ModuleType:
    """Just enough of torch for measure(): one GPU at a made-up PCI address; any copy or tensor is an error."""
    t = types.ModuleType("torch")
    t.__version__ = "0-fake"
    t.version = types.SimpleNamespace(cuda="0-fake")
    t.uint8 = "uint8"
    props = types.SimpleNamespace(name="Fake GPU", pci_domain_id=0xFFFF, pci_bus_id=0xFF, pci_device_id=0x1F)
    rt = types.SimpleNamespace(cudaHostRegister=lambda *a: calls.append("register") or 0,
                               cudaHostUnregister=lambda *a: calls.append("unregister") or 0)

    def refuse(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a skipped pair must not touch the GPU")

    t.cuda = types.SimpleNamespace(is_available=lambda: True, cudart=lambda: rt, device_count=lambda: 1,
                                   get_device_properties=lambda i: props, device=refuse, Event=refuse,
                                   synchronize=refuse, empty_cache=refuse)
    t.empty = t.frombuffer = refuse
    return t


@pytest.fixture
def torch_calls(monkeypatch):
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "torch", fake_torch(calls))
    return calls


def test_a_node_without_room_is_skipped_before_any_placement_or_pinning(torch_calls):
    from numatune.measure.gpu import measure

    topo = read_topology(Host.open("/"), devices=True, cxl=False, settings=False)
    node0 = topo.nodes[0]._replace(memory_free_kib=1024)  # 1 MiB free: a 256 MiB buffer cannot be placed
    topo = topo._replace(nodes=(node0, *topo.nodes[1:]))
    gp = measure(topo, [node0.id], "fake")
    assert gp.measured and gp.gpus[0].bdf == "ffff:ff:1f.0" and gp.gpus[0].numa_node is None
    (pair,) = gp.pairs
    assert pair.status == "skipped" and "1 MiB free, 320 MiB needed" in pair.reason
    assert pair.h2d == pair.d2h == {} and pair.placement is None
    assert torch_calls == []  # nothing registered, so nothing to unregister


def test_copies_for_a_cpu_less_node_are_issued_from_its_nearest_cpu_node():
    from numatune.measure.gpu import issuing_node
    from tests.conftest import fixture_root

    gh200 = read_topology(Host.open(fixture_root("handmade-gh200-numa")), devices=True, cxl=False, settings=False)
    assert [issuing_node(gh200, n) for n in (0, 1)] == [0, 0]  # the HBM node 1: Grace's node 0 (SLIT 80)
    gb200 = read_topology(Host.open(fixture_root("handmade-gb200-numa")), devices=True, cxl=False, settings=False)
    # GPU 2 and 3's HBM (nodes 18, 26) are 80 from Grace 1 and 120 from Grace 0
    assert [issuing_node(gb200, n) for n in (1, 2, 10, 18, 26)] == [1, 0, 0, 1, 1]
    assert issuing_node(gb200, 99) is None


def test_a_grace_gpu_names_its_memory_node_and_a_skipped_hbm_pair_its_issuing_node(monkeypatch):
    from numatune.measure.gpu import measure
    from tests.conftest import fixture_root

    calls: list[str] = []
    torch = fake_torch(calls)
    torch.cuda.get_device_properties = lambda i: types.SimpleNamespace(
        name="NVIDIA GH200 480GB", pci_domain_id=0x0009, pci_bus_id=0x01, pci_device_id=0x00)
    monkeypatch.setitem(sys.modules, "torch", torch)
    topo = read_topology(Host.open(fixture_root("handmade-gh200-numa")), devices=True, cxl=False, settings=False)
    hbm = topo.node(1)._replace(memory_free_kib=1024)  # no room: skipped before any placement
    topo = topo._replace(nodes=tuple(hbm if n.id == 1 else n for n in topo.nodes))
    gp = measure(topo, [1], "fake")
    (gpu,) = gp.gpus
    assert (gpu.bdf, gpu.numa_node, gpu.memory_node) == ("0009:01:00.0", 0, 1)
    (pair,) = gp.pairs
    assert (pair.node, pair.cpu_node, pair.status) == (1, 0, "skipped") and calls == []


def test_probe_targets_on_gb200_include_the_hbm_nodes_not_the_empty_placeholders(host_of):
    from numatune.commands.probe import choose_pairs
    from numatune.model.probe import ProbeOptions

    topo = read_topology(host_of("handmade-gb200-numa"))
    initiators, targets = choose_pairs(topo, ProbeOptions(), frozenset(range(144)), None)
    assert initiators == (0, 1) and targets == (0, 1, 2, 10, 18, 26)
