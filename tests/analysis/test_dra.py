"""check --resource-slices: slices in the shapes real drivers publish (NVIDIA's GPU driver, resource.k8s.io/v1,
and the v1beta1 `basic` shape of AMD's; the example driver, which publishes no PCI address), correct and
wrong, against the node's standard attributes. Every slice built here validates against the API's types."""

from __future__ import annotations

import copy
import json

import pytest

from numatune.analysis.dra import check_slices, published_address, slice_devices
from numatune.model.topology import Cpu, NumaNode, Topology
from numatune.plan import dra
from tests.conftest import PROJECT
from tests.plan.test_dra import _dev, _topo, grace_hopper, snc2

SCHEMA = json.loads((PROJECT / "tests" / "data" / "dra" / "resource-v1.schema.json").read_text())


def api_errors(doc: dict) -> list[str]:
    """What the resource.k8s.io/v1 types (tests/data/dra) reject in `doc`; [] when it is valid."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def nvidia_slice(topo, node="node1", form="scalar", numa=True) -> dict:
    """A ResourceSlice as NVIDIA's DRA driver publishes one (kubernetes-sigs/dra-driver-nvidia-gpu
    cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.Attributes: devices gpu-<minor> with its own attributes and the
    standard pciBusID, pcieRoot and numaNode from the helper library, numaNode read from sysfs and left out at
    -1, a one-element list with DRAListTypeAttributes), for the GPUs of `topo`, with the standard attributes
    numatune derives (the list form's full list; see test_nvidias_one_element_list_...)."""
    devices = []
    for a in dra.standard_attributes(topo):
        if a.kind != "gpu":
            continue
        attrs = {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{a.label}"},
                 "productName": {"string": "NVIDIA H100 80GB HBM3"}, "brand": {"string": "Nvidia"},
                 "architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"},
                 "driverVersion": {"version": "580.95.5"}, "cudaDriverVersion": {"version": "13.0.0"}}
        std = a.attributes(form)
        if not numa:
            std.pop(dra.NUMA_NODE, None)
        devices.append({"name": f"gpu-{a.label[3:]}", "attributes": {**attrs, **std},
                        "capacity": {"memory": {"value": "80Gi"}}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.nvidia.com-x7k2p"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def example_slice(node="node1") -> dict:
    """kubernetes-sigs/dra-example-driver's published shape: no PCI address at all."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu.example"},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {
                         "driverVersion": {"version": "1.0.0"}, "index": {"int": i},
                         "model": {"string": "LATEST-GPU-MODEL"}, "uuid": {"string": f"gpu-{i}"}},
                         "capacity": {"memory": {"value": "80Gi"}}} for i in range(2)]}}


def _run(topo, *slices, needs=(dra.PCIE_ROOT, dra.NUMA_NODE)):
    r = check_slices([(s["metadata"]["name"], s["spec"]["driver"], slice_devices(s)) for s in slices],
                     dra.standard_attributes(topo), topo, needs)
    return [f.code for f in r.findings], list(r.findings), r.checked, r.unaddressed


@pytest.mark.parametrize("form", ["scalar", "list"])
def test_a_correct_slice_passes_and_is_valid_for_the_api(form):
    for topo in (grace_hopper(), snc2()):
        s = nvidia_slice(topo, form=form)
        assert api_errors(s) == []  # the list form's `ints` is an alpha field the 1.37 types have
        codes, _, checked, _ = _run(topo, s)
        assert codes == [] and checked == len(topo.gpus)


def test_the_hbm_node_published_as_numa_node_is_found():
    topo = grace_hopper()
    s = nvidia_slice(topo)
    s["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] = {"int": 1}  # what NVML reports on a GH200
    assert api_errors(s) == []
    codes, found, _, _ = _run(topo, s)
    assert codes == ["NT541"]
    msg, fix = found[0].message, found[0].fix
    assert "node 1 (CPU-less, gpu memory)" in msg and "numa_node is 0" in msg
    # whether a NIC still matches, from this node's NICs (no NIC slice given: the standard's values, NIC0 on 0)
    assert "1 is a CPU-less memory node; its CPUs are on node 0; no NIC's numaNode holds 1: a claim matching this " \
           "GPU and a NIC on numaNode can never be satisfied" in msg
    assert "publish resource.kubernetes.io/numaNode: 0" in fix
    # no NIC shares the GPU's root complex on this machine: the fix does not send the user to pcieRoot
    assert "no NIC shares its root complex pci0009:00, so resource.kubernetes.io/pcieRoot cannot pair it either" in fix
    assert "its NIC by numaNode == the GPU's CPU node (GPU0: node 0)" in fix


def test_the_hbm_node_in_list_form_still_matches_dranets_list():
    """GH200 in list form: the GPU published as [1] (NVML's node) and dranet's NIC list [0..8] share node 1, so a
    numaNode match is satisfied: it was "can never be satisfied"."""
    topo = grace_hopper()
    s = nvidia_slice(topo, form="list")
    s["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] = {"ints": [1]}
    net = dranet_slice(topo, form="list")
    assert api_errors(s) == [] and api_errors(net) == []
    assert net["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] == {"ints": list(range(9))}
    codes, found, _, _ = _run(topo, s, net)
    assert codes == ["NT541"]
    msg = found[0].message
    assert "NIC0's numaNode list [0, 1, 2, 3, 4, 5, 6, 7, 8] holds 1, so a numaNode match with NIC0 is satisfied" in msg
    assert "never be satisfied" not in msg
    # the same GPU against a NIC slice that publishes node 0 alone: never
    net["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] = {"ints": [0]}
    codes, found, _, _ = _run(topo, s, net)
    assert codes == ["NT541", "NT545"] and "no NIC's numaNode holds 1: a claim matching" in found[0].message


def test_another_root_complex_and_a_wrong_list_are_found():
    topo = snc2()
    s = nvidia_slice(topo, form="list")
    s["spec"]["devices"][0]["attributes"][dra.PCIE_ROOT] = {"string": "pci0000:97"}
    s["spec"]["devices"][1]["attributes"][dra.NUMA_NODE] = {"ints": [2, 3]}  # the other cluster first
    codes, found, _, _ = _run(topo, s)
    assert sorted(codes) == ["NT540", "NT541"]
    wrong_list = next(f for f in found if f.code == "NT541")
    assert "numa_node is 3, whose list form is [3, 2]" in wrong_list.message
    assert "publish resource.kubernetes.io/numaNode: {ints: [3, 2]}" in wrong_list.fix


def test_nvidias_one_element_list_is_a_warning_that_says_what_matches():
    """NVIDIA's GPU driver publishes `numaNode: [n]` on purpose with DRAListTypeAttributes (until it computes the
    same-socket nodes): it was NT541, an error whose message named node 3 as both published and true."""
    topo = snc2()
    s = nvidia_slice(topo, form="list")
    s["spec"]["devices"][1]["attributes"][dra.NUMA_NODE] = {"ints": [3]}
    assert api_errors(s) == []
    codes, found, _, _ = _run(topo, s)
    assert codes == ["NT545"] and found[0].severity.value == "warning"
    msg = found[0].message
    assert "publishes resource.kubernetes.io/numaNode [3], its PCI function's node alone" in msg
    assert "the standard's list form is [3, 2]" in msg and "matching still works" in msg
    assert "but not with one published on 2 alone" in msg and "{ints: [3, 2]}" in found[0].fix
    # the standard's list, and its members in another order after the device's own node, pass
    s["spec"]["devices"][1]["attributes"][dra.NUMA_NODE] = {"ints": [3, 2]}
    assert _run(topo, s)[0] == []
    # where the standard's list is the node alone, [n] is simply right
    t = snc2()
    t = t._replace(nodes=tuple(n._replace(distances={m: (10 if m == n.id else 21) for m in range(4)})
                               for n in t.nodes))
    assert _run(t, nvidia_slice(t, form="list"))[0] == []


def test_an_upper_case_pci_bus_id_is_found():
    topo = snc2()
    topo = topo._replace(devices=(_dev("0000:1a:00.0", "gpu", 0, "pci0000:16"),) + topo.devices[1:])
    s = nvidia_slice(topo)
    s["spec"]["devices"][0]["attributes"][dra.PCI_BUS_ID] = {"string": "0000:1A:00.0"}
    s["spec"]["devices"][1]["attributes"][dra.PCI_BUS_ID] = {"string": "98:00.0"}  # no domain
    codes, found, checked, _ = _run(topo, s)
    assert codes == ["NT546", "NT546"] and checked == 2  # still matched to their functions
    assert "publishes resource.kubernetes.io/pciBusID '0000:1A:00.0'; the standard's spelling is '0000:1a:00.0'" \
        in found[0].message and "lower-case hex" in found[0].message


@pytest.mark.parametrize("spelling", ["00000000:1b:00.0", "00000000:1B:00.0"])
def test_nvmls_spelling_of_a_bus_id_is_a_spelling_finding_not_a_stranger(spelling):
    """NVML writes busId with an 8-digit domain (00000000:1B:00.0): the same function, so NT546 (how it is
    spelt), never NT544 ("not a device of this node: restart the plugin")."""
    topo = snc2()
    topo = topo._replace(devices=(_dev("0000:1b:00.0", "gpu", 0, "pci0000:16"),) + topo.devices[1:])
    s = nvidia_slice(topo)
    s["spec"]["devices"][0]["attributes"][dra.PCI_BUS_ID] = {"string": spelling}
    codes, found, checked, _ = _run(topo, s)
    assert codes == ["NT546"] and checked == 2
    assert f"publishes resource.kubernetes.io/pciBusID '{spelling}', NVML's spelling" in found[0].message
    assert "the standard's spelling is '0000:1b:00.0'" in found[0].message
    assert "publish resource.kubernetes.io/pciBusID: '0000:1b:00.0'" in found[0].fix
    # NVIDIA's older driver-local attribute in NVML's spelling identifies the device too (no finding: not standard)
    del s["spec"]["devices"][0]["attributes"][dra.PCI_BUS_ID]
    s["spec"]["devices"][0]["attributes"]["pcieBusID"] = {"string": spelling}
    assert published_address(s["spec"]["devices"][0]["attributes"]) == ("0000:1b:00.0", "pcieBusID")


def amd_slice(topo, node="node1") -> dict:
    """A ResourceSlice as AMD's GPU DRA driver publishes one (ROCm/k8s-gpu-dra-driver cmd/gpu-kubeletplugin/
    deviceinfo.go, resource.k8s.io/v1): devices gpu-<card>-<render> with the driver's own pciAddr and the standard
    pcieRoot from the helper library, no standard pciBusID or numaNode; a partition names its GPU by
    parentPciAddr."""
    devices = []
    for i, a in enumerate(x for x in dra.standard_attributes(topo) if x.kind == "gpu"):
        attrs = {"type": {"string": "amdgpu"}, "pciAddr": {"string": a.bdf}, "cardIndex": {"int": i + 1},
                 "renderIndex": {"int": 128 + i}, "deviceID": {"string": "0x74a1"}, "family": {"string": "AI"},
                 "productName": {"string": "AMD Instinct MI300X"}, "driverVersion": {"version": "6.12.12"},
                 "driverSrcVersion": {"string": "7B29C9A3B0B1D5A0A4A1E4E"}, "partitionProfile": {"string": "spx_nps1"}}
        if a.pcie_root is not None:
            attrs[dra.PCIE_ROOT] = {"string": a.pcie_root}
        devices.append({"name": f"gpu-{i + 1}-{128 + i}", "attributes": attrs,
                        "capacity": {"memory": {"value": "192Gi"}}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.amd.com-4n2x"},
            "spec": {"driver": "gpu.amd.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def test_an_amd_slice_as_amd_writes_it_is_matched_by_pci_addr_and_its_partitions_by_the_parents():
    topo = snc2()
    s = amd_slice(topo)
    assert api_errors(s) == []
    codes, _, checked, unaddressed = _run(topo, s, needs=(dra.PCIE_ROOT,))
    assert codes == [] and checked == 2 and unaddressed == 0
    # a CPX partition of GPU0, published with its parent's address and (wrongly) another root complex
    part = copy.deepcopy(s["spec"]["devices"][0])
    part["name"] = "gpu-9-136"
    part["attributes"]["parentPciAddr"] = part["attributes"].pop("pciAddr")
    part["attributes"][dra.PCIE_ROOT] = {"string": "pci0000:97"}
    s["spec"]["devices"].append(part)
    codes, found, checked, _ = _run(topo, s, needs=(dra.PCIE_ROOT,))
    assert codes == ["NT540"] and checked == 3 and "device gpu-9-136" in found[0].message


def test_missing_attributes_a_numa_node_without_affinity_and_a_stranger():
    topo = snc2()
    topo = topo._replace(devices=(topo.devices[0]._replace(numa_node=None),) + topo.devices[1:])
    s = nvidia_slice(topo)
    attrs0 = s["spec"]["devices"][0]["attributes"]
    attrs0[dra.NUMA_NODE] = {"int": 0}  # the device's numa_node is -1
    del s["spec"]["devices"][1]["attributes"][dra.PCIE_ROOT]
    s["spec"]["devices"].append(copy.deepcopy(s["spec"]["devices"][1]))
    s["spec"]["devices"][2]["name"] = "gpu-9"
    s["spec"]["devices"][2]["attributes"][dra.PCI_BUS_ID] = {"string": "0000:ff:00.0"}
    codes, found, checked, _ = _run(topo, s)
    assert sorted(codes) == ["NT542", "NT543", "NT544"] and checked == 3
    assert "publishes no resource.kubernetes.io/pcieRoot" in next(f for f in found if f.code == "NT543").message


def test_v1beta1_basic_devices_and_driver_local_addresses_are_read():
    topo = grace_hopper()
    s = nvidia_slice(topo, numa=False)
    dev = s["spec"]["devices"][0]
    bdf = dev["attributes"].pop(dra.PCI_BUS_ID)["string"]
    dev["attributes"]["pciAddr"] = {"string": bdf.upper()}
    dev["attributes"]["numaNode"] = {"int": 0}  # AMD's own, unqualified numaNode
    s["apiVersion"] = "resource.k8s.io/v1beta1"
    s["spec"]["devices"] = [{"name": dev["name"], "basic": {"attributes": dev["attributes"]}}]
    codes, found, checked, _ = _run(topo, s)
    # no pciBusID is no finding (its own pciAddr identifies it); no standard numaNode is, when claims match on it
    assert checked == 1 and codes == ["NT543"]
    assert "numaNode (0) is the driver's own attribute" in found[0].message
    assert _run(topo, s, needs=(dra.PCIE_ROOT,))[0] == []  # a claim on pcieRoot needs no numaNode
    assert published_address({"dra.net/pciAddress": {"string": "0000:3a:00.0"}}) == ("0000:3a:00.0",
                                                                                      "dra.net/pciAddress")
    parts = {f"dra.net/pciAddress{k}": {"string": v} for k, v in
             (("Domain", "0000"), ("Bus", "c8"), ("Device", "00"), ("Function", "0"))}
    assert published_address(parts) == ("0000:c8:00.0", "dra.net/pciAddress*")  # dranet's older four parts


def dranet_slice(topo, node="node1", form="scalar") -> dict:
    """A ResourceSlice as kubernetes-sigs/dranet publishes one (pkg/inventory/db.go): device name
    pci-<address with dashes>, its own dra.net/pciAddress, ifName, legacy scalar dra.net/numaNode, and the
    standard pcieRoot and numaNode from the helper library; never resource.kubernetes.io/pciBusID."""
    devices = []
    for a in dra.standard_attributes(topo):
        if a.kind != "nic":
            continue
        attrs = {"dra.net/pciAddress": {"string": a.bdf}, "dra.net/ifName": {"string": f"ib{a.label[3:]}"},
                 "dra.net/rdma": {"bool": True}, "dra.net/virtual": {"bool": False}}
        std = a.attributes(form)
        std.pop(dra.PCI_BUS_ID)
        if a.numa_node is not None:
            attrs["dra.net/numaNode"] = {"int": a.numa_node}
        devices.append({"name": "pci-" + a.bdf.replace(":", "-").replace(".", "-"), "attributes": {**attrs, **std}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-dra.net-q8x2z"},
            "spec": {"driver": "dra.net", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


@pytest.mark.parametrize("form", ["scalar", "list"])
def test_a_dranet_slice_as_dranet_writes_it_passes(form):
    """dranet identifies NICs by dra.net/pciAddress and never publishes pciBusID: that was NT543 on every NIC."""
    for topo in (snc2(), grace_hopper()):
        s = dranet_slice(topo, form=form)
        assert api_errors(s) == [] and s["spec"]["devices"]
        codes, _, checked, unaddressed = _run(topo, s)
        assert codes == [] and checked == len(topo.nics) and unaddressed == 0


def test_per_device_node_selection_reads_the_devices_of_this_node():
    from numatune.analysis.dra import node_devices, slice_nodes

    s = nvidia_slice(snc2())
    del s["spec"]["nodeName"]
    s["spec"]["perDeviceNodeSelection"] = True
    s["spec"]["devices"][0]["nodeName"] = "node1"
    s["spec"]["devices"][1]["nodeName"] = "node2"
    assert api_errors(s) == []
    assert slice_nodes(s) == {"node1", "node2"}
    assert [d.name for d in node_devices(s, "node1")] == ["gpu-0"] and node_devices(s, "node3") is None
    s["spec"]["devices"][1]["basic"] = {"nodeName": "node1"}  # v1beta1 shape: nodeName inside basic
    assert [d.node_name for d in slice_devices({"spec": {"devices": [{"name": "x", "basic": {"nodeName": "n"}}]}})] \
        == ["n"]


def _selected(s, how):
    del s["spec"]["nodeName"]
    s["spec"]["perDeviceNodeSelection"] = True
    for dev, sel in zip(s["spec"]["devices"], how, strict=True):
        dev.update(sel)
    return s


def test_devices_offered_by_all_nodes_or_a_node_selector_are_read_and_judged():
    """perDeviceNodeSelection devices with allNodes or a nodeSelector were dropped without a word (a wrong
    pcieRoot among them unseen): now a selector on the node's name is evaluated, one on labels may select it,
    and each is judged where its PCI address is one of this node's functions."""
    from numatune.analysis.dra import node_devices, selects

    topo = snc2()
    by_name = {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node1", "node7"]}]}]}}
    by_label = {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "nvidia.com/gpu.clique", "operator": "In", "values": ["a1"]}]}]}}
    s = _selected(nvidia_slice(topo), [{"allNodes": True}, by_name])
    s["spec"]["devices"][0]["attributes"][dra.PCIE_ROOT] = {"string": "pci0000:97"}  # wrong
    assert api_errors(s) == []
    assert [(d.name, d.selection) for d in node_devices(s, "node1")] == [("gpu-0", "all"), ("gpu-1", "selector")]
    assert [d.name for d in node_devices(s, "node2")] == ["gpu-0"]  # the selector names node1 and node7 only
    r = check_slices([("s", "gpu.nvidia.com", node_devices(s, "node1"))], dra.standard_attributes(topo), topo,
                     (dra.PCIE_ROOT,))
    assert [f.code for f in r.findings] == ["NT540"] and r.checked == 2 and r.offered == 2
    # a selector on labels a saved tree does not hold may select the node: judged where the address is its own;
    # a device offered to every node whose address is no function here is counted, not NT544
    s = _selected(nvidia_slice(topo), [by_label, {"allNodes": True}])
    s["spec"]["devices"][1]["attributes"][dra.PCI_BUS_ID] = {"string": "0000:ee:00.0"}
    r = check_slices([("s", "gpu.nvidia.com", node_devices(s, "node1"))], dra.standard_attributes(topo), topo,
                     (dra.PCIE_ROOT,))
    assert [f.code for f in r.findings] == [] and r.checked == 1 and r.elsewhere == 1 and r.by_labels == 1
    # the selector's rules: terms ORed, requirements ANDed, an empty term selects nothing
    term = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node1"]}]}
    assert selects({"nodeSelectorTerms": [term]}, "node1") is False
    assert selects({"nodeSelectorTerms": [term, by_name["nodeSelector"]["nodeSelectorTerms"][0]]}, "node1") is True
    assert selects({"nodeSelectorTerms": [{}]}, "node1") is False
    host = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node1"]},
                                 {"key": "zone", "operator": "Exists"}]}
    assert selects({"nodeSelectorTerms": [host]}, "node1") is None and selects({"nodeSelectorTerms": [host]}, "x") \
        is False
    # a whole slice offered to every node (spec.allNodes)
    s = nvidia_slice(topo)
    del s["spec"]["nodeName"]
    s["spec"]["allNodes"] = True
    assert api_errors(s) == [] and {d.selection for d in node_devices(s, "anything")} == {"all"}


def test_an_unknown_numa_node_is_not_judged_and_no_affinity_is():
    """A GPU whose numa_node the tree does not hold (the MI210 KFD capture) is unknown: a driver publishing 0
    for it is not told to stop (it was NT542, "numa_node is -1"); a real -1 still is."""
    topo = snc2()
    unknown = topo._replace(devices=(topo.devices[0]._replace(numa_node=None, numa_unknown=True),) + topo.devices[1:])
    s = nvidia_slice(topo)  # publishes 0 for the first GPU
    r = check_slices([("s", "gpu.nvidia.com", slice_devices(s))], dra.standard_attributes(unknown), unknown,
                     (dra.NUMA_NODE,))
    assert [f.code for f in r.findings] == [] and r.numa_unknown == 1
    none = topo._replace(devices=(topo.devices[0]._replace(numa_node=None),) + topo.devices[1:])
    codes, found, _, _ = _run(none, s)
    assert codes == ["NT542"] and "numa_node is -1 (no NUMA affinity)" in found[0].message
    a = dra.standard_attributes(unknown)[0]
    assert a.numa_state == "unknown" and "unknown" in dict(a.omitted)[dra.NUMA_NODE]
    assert "-1" not in dict(a.omitted)[dra.NUMA_NODE]


def holes() -> Topology:
    """Node ids 0, 2, 3 (1 offline or absent): socket 0 is node 0, socket 1 the SNC-2 pair 2, 3. The kernel's
    distance rows have three columns, for nodes 0, 2 and 3."""
    d = {0: {0: 10, 2: 21, 3: 21}, 2: {0: 21, 2: 10, 3: 11}, 3: {0: 21, 2: 11, 3: 10}}
    nodes = [NumaNode(n, (2 * i, 2 * i + 1), 1 << 30, distances=d[n], kind="dram") for i, n in enumerate((0, 2, 3))]
    cpus = [Cpu(i, True, 0 if i < 2 else 1, i % 2, node=(0, 2, 3)[i // 2]) for i in range(6)]
    devices = [_dev("0000:17:00.0", "gpu", 0, "pci0000:16"), _dev("0000:98:00.0", "gpu", 2, "pci0000:97")]
    return _topo(nodes, cpus, devices)


def test_the_helpers_column_reading_is_recognised_on_node_id_holes():
    topo = holes()
    assert dra.numa_node_list(topo, 0) == (0,) and dra.numa_node_list(topo, 2) == (2, 3)
    # the helper: column 1 is "node 1" (absent, so no socket: included); node 2's own column is read as node 3's
    assert dra.helper_numa_node_list(topo, 0) == (0, 1) and dra.helper_numa_node_list(topo, 2) == (2, 1)
    s = nvidia_slice(topo, form="list")
    s["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] = {"ints": [0, 1]}
    s["spec"]["devices"][1]["attributes"][dra.NUMA_NODE] = {"ints": [2, 1]}
    codes, found, _, _ = _run(topo, s)
    assert codes == ["NT547", "NT547"]
    assert "the upstream helper's reading of node 2's distance row (column i taken as node i)" in found[1].message
    assert "online nodes are 0, 2, 3" in found[1].message and "by node id the list is [2, 3]" in found[1].message
    # without holes the two readings agree
    for t in (snc2(), grace_hopper()):
        assert all(dra.helper_numa_node_list(t, n.id) == dra.numa_node_list(t, n.id) for n in t.nodes)


def test_a_gb200_gpu_published_on_its_hbm_node_says_why_no_nic_matches():
    from tests.plan.test_dra import grace_blackwell

    topo = grace_blackwell()
    s = nvidia_slice(topo)
    for dev, hbm in zip(s["spec"]["devices"], (2, 10), strict=True):
        dev["attributes"][dra.NUMA_NODE] = {"int": hbm}  # NVML's node: the builds that read nvmlDeviceGetNumaNodeId
    codes, found, _, _ = _run(topo, s)
    assert codes == ["NT542", "NT542"]
    msg, fix = found[0].message, found[0].fix
    assert "numa_node is -1 (no NUMA affinity); 2 is the GPU's own memory node (CPU-less HBM)" in msg
    assert "its CPUs are on node 0" in msg and "no NIC's numaNode holds 2" in msg and "can never be satisfied" in msg
    # what NVIDIA's driver really does (go-nvlib's sysfs numa_node, omitted at -1), not "builds that publish NVML's"
    assert "NVIDIA's DRA driver publishes the PCI function's numa_node from sysfs (none where it is -1)" in msg
    # no NIC shares a GPU's root complex here (what emit dra says too): not "match on pcieRoot"
    assert "pcieRoot is the attribute to match" not in msg + fix
    assert fix.startswith("do not publish resource.kubernetes.io/numaNode for it; no NIC shares its root complex "
                          "pci0008:00, so resource.kubernetes.io/pcieRoot cannot pair it either: pair them by CEL")
    assert "(GPU0: node 0)" in fix
    assert not any("own CPU-less memory node" in n and "pcieRoot is the attribute to match" in n
                   for n in dra.dra_plan(topo).notes)
    # where a NIC does share the GPU's root complex, the fix says to match on it, naming the NIC
    t = topo._replace(devices=topo.devices + (_dev("0008:02:00.0", "nic", 0, "pci0008:00", 0x15B3),))
    codes, found, _, _ = _run(t, s)
    assert "resource.kubernetes.io/pcieRoot is the attribute to match: NIC1 shares its root complex pci0008:00" \
        in found[0].fix


def test_the_api_types_reject_a_misspelt_field():
    s = nvidia_slice(snc2())
    s["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] = {"integer": 0}
    s["spec"]["nodename"] = "node1"
    errors = api_errors(s)
    assert any("integer" in e for e in errors) and any("nodename" in e for e in errors)


def test_devices_without_a_pci_address_are_counted_not_passed():
    codes, _, checked, unaddressed = _run(snc2(), example_slice())
    assert codes == [] and checked == 0 and unaddressed == 2
    assert api_errors(example_slice()) == []


def test_gpus_published_on_memory_nodes_are_judged_in_linear_time():
    """Each GPU published on a CPU-less node asks whether a NIC's numaNode holds it, which NIC shares its root
    complex and where its CPU node's NICs are: answered from indexes built once, not a scan of every NIC per GPU."""
    from tests.limits import growth

    def make(n: int):
        nodes = [NumaNode(0, (0, 1), 1 << 30, distances={0: 10, 1: 80}, kind="dram"),
                 NumaNode(1, (), 1 << 30, distances={0: 80, 1: 10}, kind="gpu")]
        cpus = [Cpu(i, True, 0, i, node=0) for i in range(2)]
        devices = []
        for i in range(n):
            devices += [_dev(f"{i + 1:04x}:01:00.0", "gpu", None, f"pci{i + 1:04x}:00")._replace(inferred_node=0),
                        _dev(f"{i + 1:04x}:02:00.0", "nic", 0, f"pci{i + 0x8001:04x}:00", 0x15B3)]
        topo = _topo(nodes, cpus, devices)
        s = nvidia_slice(topo)
        for dev in s["spec"]["devices"]:
            dev["attributes"][dra.NUMA_NODE] = {"int": 1}
        return topo, dra.standard_attributes(topo), [("s", "gpu.nvidia.com", slice_devices(s))]

    def run(made) -> None:
        topo, truth, slices = made
        r = check_slices(slices, truth, topo, (dra.PCIE_ROOT,))
        assert len(r.findings) == len(slices[0][2])

    assert growth(make, run, 250) < 8
