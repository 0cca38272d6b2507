"""check --resource-slices: slices in the shapes real drivers publish (NVIDIA's GPU driver, resource.k8s.io/v1,
and the v1beta1 `basic` shape of AMD's; the example driver, which publishes no PCI address), correct and
wrong, against the node's standard attributes. Every slice built here validates against the API's types."""

from __future__ import annotations

import copy
import json

import pytest

from numatune.analysis.dra import check_slices, published_address
from numatune.model.document import Doc
from numatune.plan import dra
from tests.conftest import PROJECT
from tests.plan.test_dra import grace_hopper, snc2

SCHEMA = json.loads((PROJECT / "tests" / "data" / "dra" / "resource-v1.schema.json").read_text())


def api_errors(doc: dict) -> list[str]:
    """What the resource.k8s.io/v1 types (tests/data/dra) reject in `doc`; [] when it is valid."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def nvidia_slice(topo, node="node1", form="scalar", numa=True) -> dict:
    """A ResourceSlice as NVIDIA's DRA driver publishes one (devices gpu-N with its own attributes and the
    standard ones), for the GPUs of `topo`, with the standard attributes numatune derives."""
    devices = []
    for a in dra.standard_attributes(topo):
        if a.kind != "gpu":
            continue
        attrs = {"architecture": {"string": "Hopper"}, "brand": {"string": "Nvidia"},
                 "cudaComputeCapability": {"version": "9.0.0"}, "driverVersion": {"version": "570.124.6"},
                 "index": {"int": int(a.label[3:])}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                 "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{a.label}"}}
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


def _run(topo, *slices):
    found, checked, unaddressed = check_slices(
        [(s["metadata"]["name"], s["spec"]["driver"], Doc(s, "slices.yaml")) for s in slices],
        dra.standard_attributes(topo), topo)
    return [f.code for f in found], found, checked, unaddressed


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
    assert "node 1 (CPU-less, gpu memory)" in found[0].message and "numa_node is 0" in found[0].message
    assert "no NIC or CPU shares" in found[0].message and "publish resource.kubernetes.io/numaNode: 0" in found[0].fix


def test_another_root_complex_and_a_wrong_list_are_found():
    topo = snc2()
    s = nvidia_slice(topo, form="list")
    s["spec"]["devices"][0]["attributes"][dra.PCIE_ROOT] = {"string": "pci0000:97"}
    s["spec"]["devices"][1]["attributes"][dra.NUMA_NODE] = {"ints": [3]}
    codes, found, _, _ = _run(topo, s)
    assert sorted(codes) == ["NT540", "NT541"]
    wrong_list = next(f for f in found if f.code == "NT541")
    assert "list form is [3, 2]" in wrong_list.message


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
    s["apiVersion"] = "resource.k8s.io/v1beta1"
    s["spec"]["devices"] = [{"name": dev["name"], "basic": {"attributes": dev["attributes"]}}]
    codes, found, checked, _ = _run(topo, s)
    assert checked == 1 and sorted(codes) == ["NT543", "NT543"]  # no pciBusID, no numaNode
    assert published_address({"dra.net/pciAddress": {"string": "0000:3a:00.0"}}) == ("0000:3a:00.0",
                                                                                      "dra.net/pciAddress")


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
