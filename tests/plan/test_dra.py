"""DRA standard attributes: numatune's derivation against an independent reading of each fixture's sysfs
(the helper library's rules: pcieRoot from the device link's target, numaNode from numa_node, the list from
the distance rows and each node's first CPU's package), and the pairing and claim rules on hand-built shapes
(a Grace Hopper node, sub-NUMA clustering, a NIC shared by two GPUs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from numatune.cpulist import parse_cpulist
from numatune.model.topology import Cpu, CpuSummary, NumaNode, PciDevice, Topology
from numatune.plan import dra
from tests.conftest import fixture_root, tree_fixtures

PUBLISHED_CLASSES = {0x02: "nic", 0x01: "nvme", 0x12: "accelerator"}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _independent(root: Path, bdf: str) -> dict:
    """What the helper library would derive for `bdf` in the tree `root`, read here without numatune."""
    link = root / "sys/bus/pci/devices" / bdf
    out: dict = {"pcie_root": None, "numa_node": None, "numa_nodes": None}
    if link.is_symlink():
        target = os.path.normpath(os.path.join("/sys/bus/pci/devices", os.readlink(link)))
        if target.startswith("/sys/devices/pci") and os.path.basename(target) == bdf:
            out["pcie_root"] = target.split("/")[3]
    numa = _read(link / "numa_node")
    if numa is None or int(numa) < 0:
        return out
    node = int(numa)
    out["numa_node"] = node
    nodes_dir = root / "sys/devices/system/node"
    online = sorted(parse_cpulist(_read(nodes_dir / "online") or "")) or sorted(
        int(p.name[4:]) for p in nodes_dir.glob("node[0-9]*"))
    row = (_read(nodes_dir / f"node{node}/distance") or "").split()
    if len(row) != len(online):
        out["numa_nodes"] = [node]
        return out
    dist = dict(zip(online, map(int, row), strict=True))

    def socket(n: int) -> str | None:
        cpus = sorted(parse_cpulist(_read(nodes_dir / f"node{n}/cpulist") or ""))
        return _read(root / f"sys/devices/system/cpu/cpu{cpus[0]}/topology/physical_package_id") if cpus else None

    others = {n: d for n, d in dist.items() if n != node}
    if not others:
        out["numa_nodes"] = [node]
        return out
    low = min(others.values())
    mine = socket(node)
    same = [n for n, d in others.items() if d == low and not (mine is not None and socket(n) not in (None, mine))]
    out["numa_nodes"] = [node, *sorted(same)]
    return out


@pytest.mark.parametrize("name", tree_fixtures())
def test_emit_dra_matches_an_independent_reading_of_sysfs(cli, name):
    root = fixture_root(name)
    result = cli("--root", str(root), "emit", "dra", "--numa-form", "list", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "numatune.emit/1" and doc["target"] == "dra" and doc["form"] == "list"
    for dev in doc["devices"]:
        truth = _independent(root, dev["bdf"])
        attrs = dev["attributes"]
        assert attrs[dra.PCI_BUS_ID] == {"string": dev["bdf"]}
        assert attrs.get(dra.PCIE_ROOT) == ({"string": truth["pcie_root"]} if truth["pcie_root"] else None), dev
        if truth["numa_node"] is None:
            assert dra.NUMA_NODE not in attrs and dra.NUMA_NODE in dev["omitted"], dev
        else:
            assert attrs[dra.NUMA_NODE] == {"ints": truth["numa_nodes"]}, dev
    # every network controller of the tree is there (the kinds DRA drivers publish)
    devices = root / "sys/bus/pci/devices"
    nets = {p.name for p in devices.iterdir() if (_read(p / "class") or "0x0").startswith("0x02")} \
        if devices.is_dir() else set()
    assert nets <= {d["bdf"] for d in doc["devices"] if d["kind"] == "nic"}


def _topo(nodes, cpus, devices) -> Topology:
    summary = CpuSummary(None, None, None, tuple(sorted({c.package for c in cpus})), len(cpus), 1,
                         tuple(c.id for c in cpus), (), tuple(c.id for c in cpus))
    return Topology("hand-made", False, summary, tuple(cpus), tuple(nodes), True, tuple(devices))


def _dev(bdf: str, kind: str, node: int | None, root: str, vendor: int = 0x10DE) -> PciDevice:
    cls = {"gpu": 0x030200, "nic": 0x020000}[kind]
    return PciDevice(bdf, f"/sys/devices/{root}/{root[3:]}:00.0/{bdf}", cls, vendor, 0x2342, kind, node)


def grace_hopper() -> Topology:
    """A GH200 in NUMA mode as published (numactl -H: node 0 the Grace CPUs and LPDDR5X, node 1 the H100's
    HBM, CPU-less, at distance 80; nodes 2-8 the MIG placeholders, empty): the GPU's PCI function and the
    NIC sit on node 0's root complexes."""
    ids = range(9)
    dist = {i: {j: 10 if i == j else 80 for j in ids} for i in ids}
    nodes = [NumaNode(0, tuple(range(4)), 1 << 30, distances=dist[0], kind="dram")]
    nodes += [NumaNode(i, (), (96 << 20) if i == 1 else 0, distances=dist[i], kind="gpu") for i in ids if i]
    cpus = [Cpu(i, True, 0, i, node=0) for i in range(4)]
    devices = [_dev("0009:01:00.0", "gpu", 0, "pci0009:00"), _dev("0000:01:00.0", "nic", 0, "pci0000:00", 0x15B3)]
    return _topo(nodes, cpus, devices)


def test_grace_hopper_gpu_publishes_its_pci_functions_node_never_the_hbm_node():
    attrs = {a.kind: a for a in dra.standard_attributes(grace_hopper())}
    gpu = attrs["gpu"]
    assert gpu.numa_node == 0 and gpu.attributes()[dra.NUMA_NODE] == {"int": 0}
    # the list form follows the helper: CPU-less nodes at the minimum distance have no socket and are included
    assert gpu.numa_nodes == tuple(range(9)) and gpu.memory_nodes == tuple(range(1, 9))
    pairs = dra.pairings(dra.standard_attributes(grace_hopper()))
    assert [(p.gpu.label, p.nic.label if p.nic else None, p.match) for p in pairs] == [("GPU0", "NIC0", dra.NUMA_NODE)]
    assert "no NIC under its root complex pci0009:00" in pairs[0].reason


def snc2() -> Topology:
    """Two sockets with SNC-2: nodes 0,1 on socket 0 and 2,3 on socket 1 (SLIT 10/11 within, 21 across)."""
    d = {0: {0: 10, 1: 11, 2: 21, 3: 21}, 1: {0: 11, 1: 10, 2: 21, 3: 21},
         2: {0: 21, 1: 21, 2: 10, 3: 11}, 3: {0: 21, 1: 21, 2: 11, 3: 10}}
    nodes = [NumaNode(n, (2 * n, 2 * n + 1), 1 << 30, distances=d[n], kind="dram") for n in range(4)]
    cpus = [Cpu(i, True, i // 4, i % 4, node=i // 2) for i in range(8)]
    devices = [_dev("0000:17:00.0", "gpu", 0, "pci0000:16"), _dev("0000:3a:00.0", "nic", 1, "pci0000:39", 0x15B3),
               _dev("0000:98:00.0", "gpu", 3, "pci0000:97"), _dev("0000:b1:00.0", "nic", 2, "pci0000:b0", 0x15B3)]
    return _topo(nodes, cpus, devices)


def test_list_form_names_the_same_socket_nodes_and_pairs_across_sub_numa_clusters():
    attrs = {a.bdf: a for a in dra.standard_attributes(snc2())}
    assert attrs["0000:17:00.0"].numa_nodes == (0, 1) and attrs["0000:98:00.0"].numa_nodes == (3, 2)
    assert dra.pairings(tuple(attrs.values()), "scalar")[0].nic is None  # scalar: node 0 vs node 1
    listed = dra.pairings(tuple(attrs.values()), "list")
    assert [(p.gpu.label, p.nic.label, p.match) for p in listed] == [("GPU0", "NIC0", dra.NUMA_NODE),
                                                                      ("GPU1", "NIC1", dra.NUMA_NODE)]
    e = dra.dra_plan(snc2(), form="list")
    assert e.match == dra.NUMA_NODE and e.count == 2
    assert e.claim["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": ["gpu-0", "nic-0"], "matchAttribute": dra.NUMA_NODE},
        {"requests": ["gpu-1", "nic-1"], "matchAttribute": dra.NUMA_NODE}]
    scalar = dra.dra_plan(snc2(), form="scalar", count=1)
    assert scalar.match is None and "only 0 GPU(s) of this node can be paired" in scalar.match_reason
    assert "constraints" not in scalar.claim["spec"]["spec"]["devices"]


def test_two_gpus_sharing_one_nic_are_said_to_need_a_nic_each():
    t = snc2()
    t = t._replace(devices=t.devices[:1] + (_dev("0000:18:00.0", "gpu", 0, "pci0000:16"),
                                            _dev("0000:16:00.0", "nic", 0, "pci0000:16", 0x15B3)))
    e = dra.dra_plan(t)
    assert e.match == dra.PCIE_ROOT
    assert any("GPU0, GPU1 share one NIC, NIC0" in n for n in e.notes)


def test_a_count_above_the_gpus_is_refused():
    with pytest.raises(ValueError, match="2 GPU"):
        dra.dra_plan(snc2(), count=3)


def test_a_path_outside_a_pci_root_publishes_no_pcie_root():
    assert dra.pcie_root("/sys/devices/LNXSYSTM:00/VMBUS:00/abc/pci1234:00/1234:00:00.0", "1234:00:00.0")[0] is None
    assert dra.pcie_root("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", "0000:01:00.0") == ("pci0000:00", "")
    assert dra.pcie_root("/sys/bus/pci/devices/0000:01:00.0", "0000:01:00.0")[0] is None


def grace_blackwell() -> Topology:
    """Two GB200 GPUs of one Grace (cut down from the published tray): node 0 the Grace (CPUs 0-3), nodes 2 and
    10 the GPUs' HBM (CPU-less; SLIT 80 from the Grace, 40 between them as numactl -H prints); the GPUs'
    functions have numa_node -1 on their own root complexes, the NIC is on node 0 under pci0000:00."""
    ids = (0, 2, 10)
    dist = {a: {b: 10 if a == b else 80 if 0 in (a, b) else 40 for b in ids} for a in ids}
    nodes = [NumaNode(0, tuple(range(4)), 1 << 30, distances=dist[0], kind="dram")]
    nodes += [NumaNode(n, (), 1 << 30, distances=dist[n], kind="gpu") for n in (2, 10)]
    cpus = [Cpu(i, True, 0, i, node=0) for i in range(4)]
    gpus = [_dev(bdf, "gpu", None, root)._replace(memory_node=hbm, memory_node_from="numa_status", inferred_node=0,
                                                   inferred_from="GPU memory node")
            for bdf, root, hbm in (("0008:01:00.0", "pci0008:00", 2), ("0009:01:00.0", "pci0009:00", 10))]
    return _topo(nodes, cpus, [*gpus, _dev("0000:01:00.0", "nic", 0, "pci0000:00", 0x15B3)])


def test_grace_blackwell_emit_says_why_numa_node_cannot_pair_gpu_and_nic():
    """On GB200 NVML reports the HBM node, but NVIDIA's driver reads the PCI function's numa_node from sysfs and
    publishes nothing where it is -1: a numaNode constraint can never be satisfied; the note says so, what a slice
    with NVML's node would match (derived from the NICs), and what to match on instead."""
    e = dra.dra_plan(grace_blackwell())
    assert e.match is None  # no NIC shares a GPU's root complex, and the GPUs have no numaNode
    (note,) = [n for n in e.notes if "own CPU-less memory node" in n]
    assert "GPU0, GPU1: each has its own CPU-less memory node (2, 10" in note
    assert "NVML reports as the GPU's node (nvmlDeviceGetNumaNodeId); NVIDIA's DRA driver publishes the PCI " \
           "function's numa_node from sysfs, and no numaNode where that is -1" in note
    assert "GPU0, GPU1 publish no numaNode (-1 here), so a claim that matches GPU and NIC on numaNode can never be " \
           "satisfied with them" in note
    assert "GPU0 on 2: no NIC's numaNode holds 2; GPU1 on 10: no NIC's numaNode holds 10" in note
    assert "no NIC here shares the root complex of GPU0, GPU1 (pcieRoot cannot pair them either)" in note
    assert "pcieRoot is the attribute to match" not in note
    assert "its NIC by numaNode == the GPU's CPU node (GPU0: node 0, GPU1: node 0)" in note
    # a machine whose GPUs share their root complex with a NIC: the template already matches on pcieRoot
    t = grace_blackwell()
    t = t._replace(devices=t.devices + (_dev("0008:02:00.0", "nic", 0, "pci0008:00", 0x15B3),
                                       _dev("0009:02:00.0", "nic", 0, "pci0009:00", 0x15B3)))
    e = dra.dra_plan(t)
    assert e.match == dra.PCIE_ROOT
    assert any(n.endswith("pcieRoot is the attribute to match, as this template does") for n in e.notes)
    assert not any("own CPU-less memory node" in n for n in dra.dra_plan(snc2()).notes)


def test_grace_hopper_in_list_form_says_what_the_driver_and_nvml_would_match():
    """GH200 in list form: NVIDIA's driver publishes [0] (the node alone), a slice with NVML's node [1]; dranet's
    NIC list holds both, so neither is "never satisfied"."""
    t = grace_hopper()
    t = t._replace(devices=(t.devices[0]._replace(memory_node=1, memory_node_from="numa"),) + t.devices[1:])
    (note,) = [n for n in dra.dra_plan(t, form="list").notes if "own CPU-less memory node" in n]
    assert "for GPU0 it publishes [0]: NIC0's numaNode list [0, 1, 2, 3, 4, 5, 6, 7, 8] holds 0" in note
    assert "GPU0 on [1]: NIC0's numaNode list [0, 1, 2, 3, 4, 5, 6, 7, 8] holds 1" in note
    assert "never" not in note
    (note,) = [n for n in dra.dra_plan(t).notes if "own CPU-less memory node" in n]
    assert "for GPU0 it publishes 0: NIC0 publishes numaNode 0 too" in note and "GPU0 on 1: no NIC's numaNode holds 1" \
        in note


def many_gpus(count: int) -> Topology:
    """A synthetic machine with `count` GPUs, each with a NIC under its own root complex, half on each node."""
    d = {0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}}
    nodes = [NumaNode(n, (2 * n, 2 * n + 1), 1 << 30, distances=d[n], kind="dram") for n in range(2)]
    cpus = [Cpu(i, True, i // 2, i % 2, node=i // 2) for i in range(4)]
    devices = []
    for i in range(count):
        root = f"pci{i + 1:04x}:00"
        devices += [_dev(f"{i + 1:04x}:01:00.0", "gpu", 2 * i // count, root),
                    _dev(f"{i + 1:04x}:02:00.0", "nic", 2 * i // count, root, 0x15B3)]
    return _topo(nodes, cpus, devices)


@pytest.mark.parametrize(("count", "sizes"), [(16, (16,)), (17, (9, 8)), (20, (10, 10)), (33, (11, 11, 11))])
def test_claims_are_split_within_the_apis_limits(count, sizes):
    """More than 16 GPU+NIC pairs are more than 32 devices and requests (AllocationResultsMaxSize,
    DeviceRequestsMaxSize): one template for 20 pairs had 40 requests, which the API server rejects."""
    from tests.analysis.test_dra import api_errors

    e = dra.dra_plan(many_gpus(count))
    assert e.count == count and e.match == dra.PCIE_ROOT
    assert tuple(len(c["spec"]["spec"]["devices"]["requests"]) // 2 for c in e.claims) == sizes
    for c in e.claims:
        devices = c["spec"]["spec"]["devices"]
        assert len(devices["requests"]) <= dra.DEVICE_REQUESTS_MAX
        assert sum(r["exactly"]["count"] for r in devices["requests"]) <= dra.ALLOCATION_RESULTS_MAX
        assert len(devices["constraints"]) <= dra.DEVICE_CONSTRAINTS_MAX
        assert api_errors(c) == []
    names = [c["metadata"]["name"] for c in e.claims]
    assert names == ([f"gpu-nic-pairs-{count}"] if len(sizes) == 1 else
                     [f"gpu-nic-pairs-{count}-{i}" for i in range(1, len(sizes) + 1)])
    assert (e.claim is None) == (len(sizes) > 1)
    assert any("spec.resourceClaims" in n for n in e.notes) == (len(sizes) > 1)


def test_two_nics_under_one_root_complex_serve_two_gpus():
    """Two GPUs and two NICs under one root complex: each GPU gets a NIC of its own. Every GPU took the first NIC
    of its root complex, so the note said "GPU0, GPU1 share one NIC" and a 2-pair claim looked impossible."""
    t = snc2()
    t = t._replace(devices=(_dev("0000:17:00.0", "gpu", 0, "pci0000:16"), _dev("0000:18:00.0", "gpu", 0, "pci0000:16"),
                            _dev("0000:19:00.0", "nic", 0, "pci0000:16", 0x15B3),
                            _dev("0000:1a:00.0", "nic", 0, "pci0000:16", 0x15B3)))
    e = dra.dra_plan(t)
    assert [(p.gpu.label, p.nic.label, p.match, p.shared) for p in e.pairs] == [
        ("GPU0", "NIC0", dra.PCIE_ROOT, False), ("GPU1", "NIC1", dra.PCIE_ROOT, False)]
    assert not any("share one NIC" in n for n in e.notes)
    assert e.match == dra.PCIE_ROOT and e.match_reason == "every GPU of this node has a NIC under its own root complex"
    # three GPUs on that root complex: the third shares, and a claim for all three cannot match on pcieRoot
    t = t._replace(devices=t.devices + (_dev("0000:1b:00.0", "gpu", 0, "pci0000:16"),))
    e = dra.dra_plan(t)
    assert [(p.gpu.label, p.nic.label, p.shared) for p in e.pairs][2] == ("GPU2", "NIC0", True)
    assert any(n.startswith("GPU0, GPU2 share one NIC, NIC0") for n in e.notes)
    assert e.count == 3 and e.nic_count == 2 and e.match == dra.PCIE_ROOT  # 2 NIC requests, each can be paired
    assert dra.capacities(e.devices) == (2, 2)


def test_a_template_requests_only_the_nics_the_node_has():
    """8 GPUs and no NIC (the MI210, SNC-4, MI300A and CXL trees) were 8 NIC requests no node could satisfy; 8
    GPUs and 4 NICs were 8 NIC requests too."""
    t = many_gpus(8)
    nicless = t._replace(devices=tuple(d for d in t.devices if d.kind != "nic"))
    e = dra.dra_plan(nicless)
    requests = e.claim["spec"]["spec"]["devices"]["requests"]
    assert e.count == 8 and e.nic_count == 0 and e.device_classes == () and e.match is None
    assert [r["name"] for r in requests] == [f"gpu-{i}" for i in range(8)]
    assert "constraints" not in e.claim["spec"]["spec"]["devices"]
    assert any(n.startswith("the node has no NIC: the template requests 8 GPU(s) alone") for n in e.notes)
    four = t._replace(devices=tuple(d for i, d in enumerate(t.devices) if d.kind != "nic" or i % 4 == 1))
    e = dra.dra_plan(four)
    devices = e.claim["spec"]["spec"]["devices"]
    assert e.nic_count == 4 and sum(r["name"].startswith("nic-") for r in devices["requests"]) == 4
    assert len(devices["requests"]) == 12 and len(devices["constraints"]) == 4 and e.match == dra.PCIE_ROOT
    assert any("the node has 4 NIC(s) for 8 GPU(s): the template requests 4 NIC(s)" in n for n in e.notes)


def test_the_nic_class_the_template_names_is_written_with_an_rdma_selector():
    """dranet installs no DeviceClass: a template naming `dranet` was refused by the scheduler (class not found);
    and its NIC requests did not ask for RDMA, which GPU+NIC pairs are for."""
    from tests.analysis.test_dra import api_errors

    e = dra.dra_plan(many_gpus(2))
    (cls,) = e.device_classes
    assert api_errors(cls) == [] and cls["kind"] == "DeviceClass" and cls["metadata"]["name"] == "dranet"
    assert [s["cel"]["expression"] for s in cls["spec"]["selectors"]] == [
        'device.driver == "dra.net"', 'device.attributes["dra.net"].rdma == true']
    nic = e.claim["spec"]["spec"]["devices"]["requests"][1]["exactly"]
    assert nic["deviceClassName"] == "dranet" and nic["selectors"] == [
        {"cel": {"expression": 'device.attributes["dra.net"].rdma == true'}}]
    # a class the user names is theirs: not written, no selector added
    e = dra.dra_plan(many_gpus(2), nic_device_class="sriov.example.com")
    assert e.device_classes == ()
    assert e.claim["spec"]["spec"]["devices"]["requests"][1]["exactly"] == {"deviceClassName": "sriov.example.com",
                                                                            "count": 1}


def test_the_cel_hint_names_the_gpus_cpu_node_never_its_memory_node():
    """A superchip whose GPU function sits on its own CPU-less memory node (the superchip VM: GPU on node 3, its
    CPUs on node 1, the NIC on node 0): the hint said "numaNode == the GPU's CPU node (GPU0: node 3)"."""
    d = {0: {0: 10, 1: 40, 2: 80, 3: 120}, 1: {0: 40, 1: 10, 2: 120, 3: 80}, 2: {0: 80, 1: 120, 2: 10, 3: 255},
         3: {0: 120, 1: 80, 2: 255, 3: 10}}
    nodes = [NumaNode(0, (0, 1), 1 << 30, distances=d[0], kind="dram"), NumaNode(1, (2, 3), 1 << 30, distances=d[1],
                                                                                 kind="dram"),
             NumaNode(2, (), 1 << 29, distances=d[2], kind="unknown"), NumaNode(3, (), 1 << 29, distances=d[3],
                                                                               kind="gpu")]
    cpus = [Cpu(i, True, i // 2, i % 2, node=i // 2) for i in range(4)]
    gpu = _dev("0000:61:00.0", "gpu", 3, "pci0000:60", 0x1002)._replace(memory_node=3, memory_node_from="numa")
    t = _topo(nodes, cpus, [gpu, _dev("0000:41:00.0", "nic", 0, "pci0000:40", 0x8086)])
    (a,) = [x for x in dra.standard_attributes(t) if x.kind == "gpu"]
    assert a.numa_node == 3 and a.cpu_node == 1 and a.gpu_memory_node == 3
    (note,) = [n for n in dra.dra_plan(t).notes if "own CPU-less memory node" in n]
    assert "node == the GPU's CPU node (GPU0: node 3)" not in note
    assert "no NIC is on the CPU node (GPU0's is node 1; the NICs are on node(s) 0)" in note
    assert "for GPU0 it publishes 3: no NIC's numaNode holds 3, so a claim that matches it with a NIC on numaNode " \
           "can never be satisfied" in note
