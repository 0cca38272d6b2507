"""numatune emit dra and check --resource-slices, end to end on the fixture machines."""

from __future__ import annotations

import json

import pytest

from numatune.plan import dra
from tests.analysis.test_dra import api_errors, example_slice, nvidia_slice
from tests.conftest import fixture_root, tree_fixtures

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
    if doc["claim"] is None:
        assert docs == [] and doc["count"] == 0
        return
    assert docs == [doc["claim"]] and api_errors(doc["claim"]) == []
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    requests = doc["claim"]["spec"]["spec"]["devices"]["requests"]
    assert len(requests) == 2 * len(gpus) == 2 * doc["count"]


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
