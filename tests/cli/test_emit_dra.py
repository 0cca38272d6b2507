"""numatune emit dra and check --resource-slices, end to end on the fixture machines."""

from __future__ import annotations

import json

import pytest

from numatune.plan import dra
from tests.analysis.test_dra import api_errors, dranet_slice, example_slice, nvidia_slice
from tests.conftest import fixture_copy, fixture_root, tree_fixtures

yaml = pytest.importorskip("yaml")
DGX = "handmade-dgx-h100-ids"


def _topo(name: str):
    from numatune.commands.emit import read_emit_topology
    from numatune.system.host import Host

    return read_emit_topology(Host.open(fixture_root(name)))


@pytest.mark.parametrize("name", tree_fixtures())
def test_every_claim_passes_the_api_types_and_the_text_is_that_yaml(cli, name):
    result = cli("--root", str(fixture_root(name)), "emit", "dra", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    docs = [d for d in yaml.safe_load_all(doc["text"]) if d is not None]
    if not doc["claims"]:
        assert docs == [] and doc["count"] == 0 and doc["claim"] is None
        return
    assert docs == doc["device_classes"] + doc["claims"] and all(api_errors(c) == [] for c in docs)
    assert doc["claim"] == (doc["claims"][0] if len(doc["claims"]) == 1 else None)
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    nics = [d for d in doc["devices"] if d["kind"] == "nic"]
    requests = [r for c in doc["claims"] for r in c["spec"]["spec"]["devices"]["requests"]]
    # a template requests only what the node has: a GPU each, and a NIC each while the node's NICs last
    assert doc["count"] == len(gpus) and doc["nic_count"] == min(len(gpus), len(nics))
    assert len(requests) == doc["count"] + doc["nic_count"]
    named = {r["exactly"]["deviceClassName"] for r in requests if r["name"].startswith("nic-")}
    # the NIC class a template names exists: dranet installs none, so it is written with the templates
    assert named == ({"dranet"} if nics else set())
    assert [c["metadata"]["name"] for c in doc["device_classes"]] == (["dranet"] if nics else [])
    assert all(d["numa_node_state"] in ("node", "none", "unknown") for d in doc["devices"])


def test_dgx_h100_pairs_each_gpu_with_the_nic_under_its_root_complex(cli):
    doc = json.loads(cli("--root", str(fixture_root(DGX)), "emit", "dra", "--gpus", "2", "--json").stdout)
    assert doc["match"] == dra.PCIE_ROOT and doc["count"] == 2
    assert [(p["gpu"], p["nic"]) for p in doc["pairs"]] == [(f"GPU{i}", f"NIC{i}") for i in range(8)]
    cons = doc["claim"]["spec"]["spec"]["devices"]["constraints"]
    assert cons == [{"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": dra.PCIE_ROOT} for i in range(2)]
    assert doc["claim"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"


def test_more_gpus_than_the_node_has_is_a_usage_error(cli):
    result = cli("--root", str(fixture_root(DGX)), "emit", "dra", "--gpus", "9")
    assert result.exit_code == 2 and "--gpus 9: the node has 8 GPU(s)" in result.stderr


def _check(cli, tmp_path, text: str, *extra: str):
    f = tmp_path / "slices.yaml"
    f.write_text(text)
    return cli("--root", str(fixture_root(DGX)), "check", "--resource-slices", str(f), *extra, "--json")


def _kubectl_list(*slices) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(slices), "metadata": {}})


def test_check_passes_correct_slices_and_flags_the_hbm_node(cli, tmp_path):
    topo = _topo(DGX)
    good = nvidia_slice(topo, node="dgx01")
    result = _check(cli, tmp_path, _kubectl_list(good, example_slice("dgx01"), nvidia_slice(topo, node="dgx02")),
                    "--node-name", "dgx01")
    doc = json.loads(result.stdout)
    (res,) = [r for r in doc["checks"] if r["name"] == "scheduler.resource_slices"]
    assert res["status"] == "passed" and "8 device(s) with a PCI address" in res["description"]
    assert "2 without a PCI address not checkable" in res["description"]
    bad = nvidia_slice(topo, node="dgx01")
    bad["spec"]["devices"][3]["attributes"][dra.NUMA_NODE] = {"int": 1}
    result = _check(cli, tmp_path, json.dumps(bad), "--node-name", "dgx01", "--fail-on", "error")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    (res,) = [r for r in doc["checks"] if r["name"] == "scheduler.resource_slices"]
    assert [f["code"] for f in res["findings"]] == ["NT541"] and "GPU3" in res["findings"][0]["message"]


@pytest.mark.parametrize(("text", "words"), [
    ("spec: [1, 2\n", "is not valid YAML"),
    ("kind: ConfigMap\n", "holds no ResourceSlice"),
])
def test_check_refuses_what_is_not_slices(cli, tmp_path, text, words):
    result = _check(cli, tmp_path, text)
    assert result.exit_code == 3 and words in result.stderr and "Traceback" not in result.stderr


def test_check_with_no_slice_for_the_node_names_the_nodes_it_has(cli, tmp_path):
    result = _check(cli, tmp_path, _kubectl_list(nvidia_slice(_topo(DGX), node="dgx02")), "--node-name", "dgx01")
    assert result.exit_code == 3 and "no ResourceSlice for node 'dgx01' (its slices are for dgx02)" in result.stderr


@pytest.mark.parametrize(("edit", "words"), [
    (lambda s: s["spec"].update(devices=5), "spec.devices: expected a list, got an integer"),
    (lambda s: s["spec"].update(devices="gpu-0"), "spec.devices: expected a list, got a string"),
    (lambda s: s.update(metadata=["slice"]), "metadata: expected a mapping, got a list"),
    (lambda s: s.update(metadata="slice"), "metadata: expected a mapping, got a string"),
    (lambda s: s["spec"]["devices"][0].update(attributes=[1]), "spec.devices[0].attributes: expected a mapping"),
    (lambda s: s["spec"].update(nodeName=["dgx01"]), "spec.nodeName: expected a string or a number, got a list"),
])
def test_check_refuses_a_slice_with_mistyped_fields_naming_the_field(cli, tmp_path, edit, words):
    """devices as a number or text, metadata as a list or text (a Python error, exit 70, then a slice taken as
    publishing nothing): exit 3 naming the file and the field (issue 41)."""
    s = nvidia_slice(_topo(DGX), node="dgx01")
    edit(s)
    result = _check(cli, tmp_path, json.dumps(s), "--node-name", "dgx01")
    assert result.exit_code == 3, result.stderr
    assert f"slices.yaml: {words}" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_check_names_a_few_of_the_nodes_of_a_cluster_file(cli, tmp_path):
    slices = [{"kind": "ResourceSlice", "spec": {"nodeName": f"n{i:05}", "driver": "d", "devices": []}}
              for i in range(10_000)]
    result = _check(cli, tmp_path, json.dumps({"kind": "List", "items": slices}), "--node-name", "dgx01")
    assert result.exit_code == 3
    assert "(its slices are for n00000, n00001, n00002, n00003, n00004, n00005, n00006, n00007 and 9992 more)" \
        in result.stderr and len(result.stderr) < 400


@pytest.mark.parametrize(("option", "value"), [
    ("--name", "Bad_Name"), ("--name", "-"), ("--name", "a" * 254), ("--gpu-class", ""), ("--nic-class", "x\ny"),
    ("--nic-class", "gpu.nvidia.com."),
])
def test_a_name_kubernetes_would_refuse_is_a_usage_error(cli, option, value):
    """--name and the classes end up as metadata.name and deviceClassName, which Kubernetes takes only as DNS
    subdomains: the template was written (an empty --gpu-class silently the default, a newline folded into a
    space by YAML) and `kubectl apply` refused it."""
    result = cli("--root", str(fixture_root(DGX)), "emit", "dra", option, value)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"{option} {value[:80]!r}: not a Kubernetes object name" in result.stderr


def test_a_dotted_name_and_class_are_written_as_given(cli):
    result = cli("--root", str(fixture_root(DGX)), "emit", "dra", "--name", "team-a.pairs", "--nic-class",
                 "sriovnetwork.openshift.io")
    doc = yaml.safe_load(result.stdout.split("\n---\n", 1)[1])
    assert doc["metadata"]["name"] == "team-a.pairs"
    assert doc["spec"]["spec"]["devices"]["requests"][1]["exactly"]["deviceClassName"] == "sriovnetwork.openshift.io"


def test_grace_and_snc_fixtures_publish_the_pci_functions_node_and_the_socket_list(cli):
    """GH200: the GPU's numaNode is its PCI function's node 0, never its HBM node 1; SNC-4: the list form names
    the socket's four clusters, the device's own first."""
    doc = json.loads(cli("--root", str(fixture_root("handmade-gh200-numa")), "emit", "dra", "--json").stdout)
    gpu = next(d for d in doc["devices"] if d["kind"] == "gpu")
    assert gpu["attributes"][dra.NUMA_NODE] == {"int": 0}
    doc = json.loads(cli("--root", str(fixture_root("handmade-snc4-8gpu")), "emit", "dra", "--numa-form", "list",
                         "--json").stdout)
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    assert gpus[1]["attributes"][dra.NUMA_NODE] == {"ints": [1, 0, 2, 3]}


def _resource_slices(cli, tmp_path, root, text: str, *extra: str):
    f = tmp_path / "slices.yaml"
    f.write_text(text)
    result = cli("--root", str(root), "check", "--resource-slices", str(f), *extra, "--json")
    checks = json.loads(result.stdout)["checks"] if result.stdout else []
    return result, next((r for r in checks if r["name"] == "scheduler.resource_slices"), None)


def test_a_dranet_slice_as_dranet_publishes_it_passes_check(cli, tmp_path):
    """dranet publishes dra.net/pciAddress with the standard pcieRoot and numaNode but never pciBusID: each of
    the DGX's 8 NICs was NT543 (8 warnings, exit 1); the claim matches on pcieRoot, which dranet publishes."""
    topo = _topo(DGX)
    slices = _kubectl_list(dranet_slice(topo, node="dgx01"), nvidia_slice(topo, node="dgx01"))
    result, res = _resource_slices(cli, tmp_path, fixture_root(DGX), slices, "--node-name", "dgx01")
    assert result.exit_code == 0, result.stdout
    assert res["status"] == "passed" and res["findings"] == []
    assert "(dra.net, gpu.nvidia.com): 16 device(s) with a PCI address" in res["description"]


def test_a_per_device_node_selection_slice_is_read(cli, tmp_path):
    """spec.perDeviceNodeSelection with devices[].nodeName: it was exit 3, "none of its slices names a node"."""
    s = nvidia_slice(_topo(DGX), node="dgx01")
    del s["spec"]["nodeName"]
    s["spec"]["perDeviceNodeSelection"] = True
    for i, dev in enumerate(s["spec"]["devices"]):
        dev["nodeName"] = "dgx01" if i < 6 else "dgx02"
    s["spec"]["devices"][2]["attributes"][dra.PCIE_ROOT] = {"string": "pci0000:97"}
    assert api_errors(s) == []
    result, res = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx01")
    assert result.exit_code == 1 and "6 device(s) with a PCI address" in res["description"]
    assert [f["code"] for f in res["findings"]] == ["NT540"]
    result, _ = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx03")
    assert result.exit_code == 3 and "(its slices are for dgx01, dgx02)" in result.stderr


def test_nvidias_one_element_list_is_a_warning_on_the_snc4_machine(cli, tmp_path):
    topo = _topo("handmade-snc4-8gpu")
    s = nvidia_slice(topo, node="snc01", form="list")
    for dev in s["spec"]["devices"]:
        dev["attributes"][dra.NUMA_NODE]["ints"] = dev["attributes"][dra.NUMA_NODE]["ints"][:1]
    root = fixture_root("handmade-snc4-8gpu")
    result, res = _resource_slices(cli, tmp_path, root, json.dumps(s), "--node-name", "snc01", "--fail-on", "error")
    assert result.exit_code == 0, result.stdout  # warnings only
    assert [f["code"] for f in res["findings"]] == ["NT545"] * 8
    assert all(f["severity"] == "warning" for f in res["findings"])
    assert "publishes resource.kubernetes.io/numaNode [1], its PCI function's node alone; the standard's list " \
           "form is [1, 0, 2, 3]" in res["findings"][1]["message"]


def test_a_slice_beyond_the_apis_device_limits_is_refused(cli, tmp_path):
    s = nvidia_slice(_topo(DGX), node="dgx01")
    base = s["spec"]["devices"][0]
    s["spec"]["devices"] = [dict(base, name=f"gpu-{i}") for i in range(65)]
    result, _ = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx01")
    assert result.exit_code == 0  # 65 plain devices: under 128
    s["spec"]["devices"][0] = dict(base, name="gpu-0", taints=[{"key": "k", "effect": "NoSchedule"}])
    result, _ = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx01")
    assert result.exit_code == 3
    assert "lists 65 devices; the API allows at most 64 in one slice where a device uses taints" in result.stderr
    s["spec"]["devices"] = [dict(base, name=f"gpu-{i}") for i in range(129)]
    result, _ = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx01")
    assert result.exit_code == 3 and "lists 129 devices; the API allows at most 128 in one slice," in result.stderr


def test_gb200_emit_and_check_say_why_numa_node_never_pairs_gpu_and_nic(cli, tmp_path):
    root = fixture_root("handmade-gb200-numa")
    doc = json.loads(cli("--root", str(root), "emit", "dra", "--json").stdout)
    (note,) = [n for n in doc["notes"] if "own CPU-less memory node" in n]
    assert "GPU0, GPU1, GPU2, GPU3: each has its own CPU-less memory node (2, 10, 18, 26" in note
    assert "a claim that matches GPU and NIC on numaNode can never be satisfied" in note
    # no NIC of this tree shares a GPU's root complex: neither emit nor check says to match on pcieRoot
    assert "pcieRoot is the attribute to match" not in note
    assert "no NIC here shares the root complex of GPU0, GPU1, GPU2, GPU3" in note
    assert "(GPU0: node 0, GPU1: node 0, GPU2: node 1, GPU3: node 1)" in note
    assert "# note: " + note in doc["text"]
    # NVIDIA's driver builds that read NVML publish the HBM node for each GPU
    s = nvidia_slice(_topo("handmade-gb200-numa"), node="gb01")
    for dev, hbm in zip(s["spec"]["devices"], (2, 10, 18, 26), strict=True):
        dev["attributes"][dra.NUMA_NODE] = {"int": hbm}
    result, res = _resource_slices(cli, tmp_path, root, json.dumps(s), "--node-name", "gb01")
    assert result.exit_code == 1 and [f["code"] for f in res["findings"]] == ["NT542"] * 4
    msg, fix = res["findings"][2]["message"], res["findings"][2]["fix"]
    assert "numaNode 18, but its numa_node is -1 (no NUMA affinity); 18 is the GPU's own memory node" in msg
    assert "its CPUs are on node 1" in msg and "no NIC's numaNode holds 18" in msg
    assert "pcieRoot is the attribute to match" not in msg + fix
    assert "no NIC shares its root complex pci0018:00" in fix and "(GPU2: node 1)" in fix


def test_mi210_capture_keeps_unknown_apart_from_no_affinity(cli, tmp_path):
    """The MI210 KFD capture holds no PCI sysfs for its GPUs: their node is unknown. emit said "numa_node is -1
    (no NUMA affinity)" and check told a driver publishing 0 not to publish numaNode (NT542 x4)."""
    root = fixture_root("topo-mi210-xgmi-pcie")
    doc = json.loads(cli("--root", str(root), "emit", "dra", "--json").stdout)
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    assert gpus and all(d["numa_node_state"] == "unknown" for d in gpus)
    assert all("unknown" in d["omitted"][dra.NUMA_NODE] and "-1" not in d["omitted"][dra.NUMA_NODE] for d in gpus)
    assert "its numa_node is -1" not in doc["text"] and "?: unknown, this tree lacks" in doc["text"]
    inspect = json.loads(cli("--root", str(root), "inspect", "--json").stdout)
    assert {d["numa_node_state"] for d in inspect["devices"] if d["kind"] == "gpu"} == {"unknown"}
    s = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "mi01-gpu.amd.com"},
         "spec": {"driver": "gpu.amd.com", "nodeName": "mi01", "pool": {"name": "mi01", "generation": 1,
                                                                         "resourceSliceCount": 1},
                  "devices": [{"name": f"gpu-{i}", "attributes": {
                      dra.PCI_BUS_ID: {"string": d["bdf"]}, dra.NUMA_NODE: {"int": i // 4}}}
                      for i, d in enumerate(gpus)]}}
    result, res = _resource_slices(cli, tmp_path, root, json.dumps(s), "--node-name", "mi01")
    assert result.exit_code == 0 and res["findings"] == []
    assert f"the numaNode of {len(gpus)} not checkable" in res["description"] and "unknown, not -1" in \
        res["description"]


def _twenty_gpu_tree(dest):
    """A hand-made tree for this test: the CPUs and nodes of handmade-launch-2s4gpu-cxl, its PCI replaced by 20
    GPUs (10de:2330), each with a ConnectX NIC (15b3:1021) under its own root complex, 10 per socket."""
    import shutil

    from tests.handmade_rail import _function

    root = fixture_copy("handmade-launch-2s4gpu-cxl", dest)
    sysfs = root / "sys"
    for old in [*sysfs.glob("devices/pci*"), sysfs / "bus/pci/devices", root / "proc/driver/nvidia"]:
        if old.is_symlink() or old.is_file():
            old.unlink()
        elif old.exists():
            shutil.rmtree(old)
    cpus = {0: "0-3,8-11", 1: "4-7,12-15"}
    for i in range(20):
        node, bus = i // 10, 0x10 + 8 * i
        host, port = f"pci0000:{bus:02x}", f"0000:{bus:02x}:01.0"
        _function(sysfs, [host], port, "0x060400", "0x8086", "0x352a", node, cpus[node])
        _function(sysfs, [host, port], f"0000:{bus + 1:02x}:00.0", "0x030200", "0x10de", "0x2330", node, cpus[node])
        _function(sysfs, [host, port], f"0000:{bus + 2:02x}:00.0", "0x020700", "0x15b3", "0x1021", node, cpus[node])
    return root


def test_twenty_gpus_get_templates_within_the_apis_limits(cli, tmp_path):
    """20 GPU+NIC pairs were one template of 40 requests and 40 devices: over DeviceRequestsMaxSize and
    AllocationResultsMaxSize (32), so the API server refused it."""
    root = _twenty_gpu_tree(tmp_path / "root")
    result = cli("--root", str(root), "emit", "dra", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["count"] == 20 and doc["match"] == dra.PCIE_ROOT and doc["claim"] is None
    assert [c["metadata"]["name"] for c in doc["claims"]] == ["gpu-nic-pairs-20-1", "gpu-nic-pairs-20-2"]
    for c in doc["claims"]:
        devices = c["spec"]["spec"]["devices"]
        assert api_errors(c) == [] and len(devices["requests"]) == 20 and len(devices["constraints"]) == 10
    assert [d for d in yaml.safe_load_all(result.stdout and doc["text"]) if d] == doc["device_classes"] + doc["claims"]
    assert "# 2 ResourceClaimTemplates: 20 GPU(s)" in doc["text"]
    assert any("20 GPUs and 20 NICs are 40 devices, more than one claim can be given" in n for n in doc["notes"])
    small = json.loads(cli("--root", str(root), "emit", "dra", "--gpus", "16", "--json").stdout)
    assert len(small["claims"]) == 1 and small["claim"] == small["claims"][0]


def test_nvmls_spelling_of_gpu0_is_a_spelling_finding_on_the_dgx(cli, tmp_path):
    """GPU0 published as NVML spells it (00000000:1B:00.0) was NT544 "not a device of this node: restart the
    plugin"; it is the same function spelt otherwise: NT546, a warning, and the device is still checked."""
    topo = _topo(DGX)
    s = nvidia_slice(topo, node="dgx01")
    gpu0 = s["spec"]["devices"][0]["attributes"]
    bdf = gpu0[dra.PCI_BUS_ID]["string"]
    nvml = "0000" + bdf.upper()
    gpu0[dra.PCI_BUS_ID] = {"string": nvml}
    gpu0[dra.PCIE_ROOT] = {"string": "pci0000:00"}  # and a wrong root complex, still found
    result, res = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx01")
    assert sorted(f["code"] for f in res["findings"]) == ["NT540", "NT546"], res["findings"]
    spelling = next(f for f in res["findings"] if f["code"] == "NT546")
    assert f"'{nvml}', NVML's spelling" in spelling["message"] and f"'{bdf}'" in spelling["fix"]
    assert "8 device(s) with a PCI address" in res["description"]


def test_a_node_selector_slice_is_read_and_a_wrong_root_among_it_is_found(cli, tmp_path):
    """perDeviceNodeSelection devices selected by name (matchFields metadata.name), by allNodes and by labels were
    dropped without a word: the wrong pcieRoot of one of them went unseen."""
    s = nvidia_slice(_topo(DGX), node="dgx01")
    del s["spec"]["nodeName"]
    s["spec"]["perDeviceNodeSelection"] = True
    for i, dev in enumerate(s["spec"]["devices"]):
        dev.update({"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["dgx01"]}]}]}} if i < 4 else
            {"allNodes": True} if i < 6 else {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": ["r7"]}]}]}})
    s["spec"]["devices"][5]["attributes"][dra.PCIE_ROOT] = {"string": "pci0000:00"}
    assert api_errors(s) == []
    result, res = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx01")
    assert result.exit_code == 1 and [f["code"] for f in res["findings"]] == ["NT540"]
    assert "gpu-5" in res["findings"][0]["message"]
    assert "8 device(s) with a PCI address against the node's standard attributes (8 of them offered by allNodes " \
           "or a nodeSelector rather than a nodeName)" in res["description"]
    assert "2 selected by node labels numatune cannot read" in res["description"]
    # a selector of another type than core/v1's is exit 3 naming the field
    s["spec"]["devices"][0]["nodeSelector"] = {"nodeSelectorTerms": "dgx01"}
    result, _ = _resource_slices(cli, tmp_path, fixture_root(DGX), json.dumps(s), "--node-name", "dgx01")
    assert result.exit_code == 3
    assert "slices.yaml: spec.devices[0].nodeSelector.nodeSelectorTerms: expected a list, got a string" in result.stderr


def test_the_superchip_vms_cel_hint_names_a_node_with_cpus(cli):
    """fixtures/vm-superchip: the GPU's function is on node 3, its own CPU-less memory node; the hint named node 3
    as "the GPU's CPU node"."""
    doc = json.loads(cli("--root", str(fixture_root("vm-superchip")), "emit", "dra", "--json").stdout)
    (note,) = [n for n in doc["notes"] if "own CPU-less memory node" in n]
    assert "(GPU0: node 3)" not in note and "GPU0's is node 1" in note


def test_a_name_that_is_too_long_once_split_is_a_usage_error(cli, tmp_path):
    """--name of 253 characters was accepted, and the two templates of 20 GPUs were named NAME-1 and NAME-2: 255
    characters, which the API refuses."""
    root = _twenty_gpu_tree(tmp_path / "root")
    result = cli("--root", str(root), "emit", "dra", "--name", "a" * 253)
    assert result.exit_code == 2 and result.stdout == ""
    assert "2 templates are written (20 GPUs), named NAME-1 to NAME-2: 255 characters" in result.stderr
    assert "give a name of at most 251 characters" in result.stderr
    result = cli("--root", str(root), "emit", "dra", "--name", "a" * 251, "--json")
    assert result.exit_code == 0
    claims = json.loads(result.stdout)["claims"]
    assert [len(c["metadata"]["name"]) for c in claims] == [253, 253] and all(api_errors(c) == [] for c in claims)
    result = cli("--root", str(fixture_root(DGX)), "emit", "dra", "--name", "a" * 253)  # one template: as given
    assert result.exit_code == 0


def test_check_help_names_the_codes_the_rules_register(cli):
    from numatune.analysis import dra as rules
    from numatune.analysis.codes import code_range, module_codes

    codes = module_codes(rules)
    assert code_range(rules) == f"{codes[0].code}-{codes[-1].code}" == "NT540-" + codes[-1].code
    out = cli("check", "--help").stdout
    assert f"({code_range(rules)})" in " ".join(out.split())


def test_gh200_in_list_form_says_the_hbm_node_still_matches_dranets_list(cli, tmp_path):
    """On the GH200 tree in list form a GPU published as [1] (NVML's node) and dranet's NIC list [0..8] share node
    1: NT541 said "can never be satisfied"; the message is derived from the NIC slice as published."""
    from tests.analysis.test_dra import dranet_slice

    topo = _topo("handmade-gh200-numa")
    gpu = nvidia_slice(topo, node="gh01", form="list")
    gpu["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] = {"ints": [1]}
    net = dranet_slice(topo, node="gh01", form="list")
    root = fixture_root("handmade-gh200-numa")
    result, res = _resource_slices(cli, tmp_path, root, _kubectl_list(gpu, net), "--node-name", "gh01")
    (f,) = res["findings"]
    assert f["code"] == "NT541" and "never be satisfied" not in f["message"]
    assert "NIC0's numaNode list [0, 1, 2, 3, 4, 5, 6, 7, 8] holds 1, so a numaNode match with NIC0 is satisfied" \
        in f["message"]
    assert f["fix"].endswith("(the helper library's GetNUMANodeAttributeByPCIBusID reads the PCI function's "
                             "numa_node)")
    # in scalar form the same GPU on node 1 matches no NIC (NIC0 is on node 0), and no NIC shares its root
    gpu = nvidia_slice(topo, node="gh01")
    gpu["spec"]["devices"][0]["attributes"][dra.NUMA_NODE] = {"int": 1}
    result, res = _resource_slices(cli, tmp_path, root, _kubectl_list(gpu, dranet_slice(topo, node="gh01")),
                                   "--node-name", "gh01")
    (f,) = res["findings"]
    assert "no NIC's numaNode holds 1: a claim matching this GPU and a NIC on numaNode can never be satisfied" \
        in f["message"]
    assert "no NIC shares its root complex pci0009:00" in f["fix"] and "(GPU0: node 0)" in f["fix"]
