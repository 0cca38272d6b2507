"""numatune diff: roots, snapshot archives and JSON reports, with the changes admins look for."""

from __future__ import annotations

import json

import pytest

from tests.conftest import fixture_copy, fixture_root

SMALL = "vm-offlineCPUs"
TWO_NODE = "intel-xeon-L5640-2node"


_DOCS: dict[str, str] = {}


@pytest.fixture
def report(cli, tmp_path):
    def make(name: str, edit=None):
        if name not in _DOCS:
            _DOCS[name] = cli("--root", str(fixture_root(name)), "inspect", "--json").stdout
        doc = json.loads(_DOCS[name])
        if edit:
            edit(doc)
        path = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps(doc))
        return str(path)

    return make


def test_a_root_equals_its_own_report(cli, report):
    result = cli("diff", str(fixture_root(TWO_NODE)), report(TWO_NODE))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == "no differences"


def test_a_snapshot_archive_equals_its_tree(cli):
    result = cli("diff", "--json", str(fixture_root(SMALL, archive=True)), str(fixture_root(SMALL)))
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["equal"] is True
    assert doc["a"]["kind"] == "snapshot" and doc["b"]["kind"] == "root"


def _snc_on(doc):
    """What turning on sub-NUMA clustering looks like: node 0 split in two, a new distance row."""
    n0 = doc["nodes"][0]
    half = len(n0["cpus"]) // 2
    new = dict(n0, id=2, cpus=n0["cpus"][half:], memory_total_kib=n0["memory_total_kib"] // 2)
    n0["cpus"] = n0["cpus"][:half]
    n0["memory_total_kib"] //= 2
    for n in doc["nodes"]:
        n["distances"]["2"] = 11 if n["id"] == 0 else 21
    new["distances"] = {"0": 11, "1": 21, "2": 10}
    doc["nodes"].append(new)


def test_sub_numa_clustering_shows_up(cli, report):
    result = cli("diff", "--json", report(TWO_NODE), report(TWO_NODE, _snc_on))
    assert result.exit_code == 1
    diffs = {d["key"]: d for d in json.loads(result.stdout)["differences"]}
    assert diffs["numa nodes"]["a"] == "2 (0-1)" and diffs["numa nodes"]["b"] == "3 (0-2)"
    assert diffs["node 0 cpus"]["b"] == "0,2,4,6,8,10"
    assert diffs["node 2 cpus"]["a"] is None
    assert diffs["node 0 memory"]["category"] == "memory"
    assert diffs["node 1 distances"]["b"] == "0:20 1:10 2:21"


def test_kernel_and_devices(cli, report):
    def edit(doc):
        doc["settings"]["release"] = "6.8.0-45-generic"
        doc["settings"]["numa_balancing"] = 1
        nic = next(d for d in doc["devices"] if d["kind"] == "nic" and d["numa_node"] == 1)
        nic["numa_node"] = 0
        doc["devices"] = [d for d in doc["devices"] if d["bdf"] != "0000:04:00.0"]

    a, b = report(TWO_NODE), report(TWO_NODE, edit)
    result = cli("diff", a, b)
    assert result.exit_code == 1
    text = result.stdout
    assert "[kernel]" in text and "kernel release" in text and "6.8.0-45-generic" in text
    assert "kernel numa_balancing" in text
    assert "nic on node 1" in text and "nic on node 0" in text
    assert "(absent)" in text
    assert text.splitlines()[-1].endswith("differences")
    only_devices = json.loads(cli("diff", "--json", "--ignore", "kernel", a, b).stdout)
    assert {d["category"] for d in only_devices["differences"]} == {"devices"}
    none = cli("diff", "-i", "kernel", "-i", "device", a, b)
    assert none.exit_code == 0


def test_small_memory_drift_is_not_a_difference(cli, report):
    def drift(doc):
        doc["nodes"][0]["memory_total_kib"] = int(doc["nodes"][0]["memory_total_kib"] * 1.01)
        doc["nodes"][0]["memory_free_kib"] = 1

    assert cli("diff", report(TWO_NODE), report(TWO_NODE, drift)).exit_code == 0


def test_edited_tree(cli, tmp_path):
    root = fixture_copy(SMALL, tmp_path / "root")
    (root / "sys/devices/system/cpu/cpu1/online").write_text("0\n")
    (root / "sys/devices/system/cpu/online").write_text("0\n")
    (root / "sys/devices/system/cpu/offline").write_text("1-3\n")
    result = cli("diff", "--json", str(fixture_root(SMALL)), str(root))
    diffs = {d["key"]: (d["a"], d["b"]) for d in json.loads(result.stdout)["differences"]}
    assert result.exit_code == 1
    assert diffs["online cpus"] == ("0-1", "0") and diffs["offline cpus"] == ("2-3", "1-3")


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json at all", "neither a sysfs tree, a snapshot archive nor a numatune JSON report"),
        ("{ broken", "is not valid JSON"),
        ('{"schema": "numatune.audit/1"}', "is a numatune.audit/1 report; expected numatune.inspect/4"),
        ('{"schema": "numatune.inspect/9", "cpu": {}}', "has schema numatune.inspect/9"),
        ('{"schema": "numatune.inspect/1"}', "the report has no 'cpu' field"),
        ("[1, 2]", "neither a sysfs tree"),
    ],
)
def test_bad_inputs(cli, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = cli("diff", str(bad), str(fixture_root(SMALL)))
    assert result.exit_code == 3
    assert message in result.stderr and result.stdout == ""


def test_missing_input_and_usage(cli, tmp_path):
    assert cli("diff", str(tmp_path / "nope"), str(fixture_root(SMALL))).exit_code == 3
    assert cli("diff", str(fixture_root(SMALL))).exit_code == 2


def test_a_version_2_report_diffs_clean_against_version_3(cli, tmp_path):
    """inspect/3 renumbered GPUi (NVIDIA by PCI bus number): on the hand-made four-GPU tree, version 2
    called 0000:3b:00.0 GPU0. diff compares devices by BDF, so a saved /2 report of the same machine shows
    no difference."""
    root = str(fixture_root("handmade-launch-2s4gpu-cxl"))
    doc = json.loads(cli("--root", root, "inspect", "--json").stdout)
    pm = doc["path_matrix"]
    assert pm["devices"][:2] == ["0000:18:00.0", "0000:3b:00.0"]
    old = dict(doc, schema="numatune.inspect/2")
    swap = [1, 0, *range(2, len(pm["devices"]))]  # version 2's order: 3b before 18
    old["path_matrix"] = dict(pm, devices=[pm["devices"][i] for i in swap],
                              cells=[[pm["cells"][i][j] for j in swap] for i in swap])
    for key in ("names", "order_note"):
        old["path_matrix"].pop(key)
    saved = tmp_path / "v2.json"
    saved.write_text(json.dumps(old))
    result = cli("diff", "--json", str(saved), root)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["differences"] == []


MISTYPED = [
    (lambda d: d.update(nodes="x"), "nodes: expected a list, got a string"),
    (lambda d: d.update(devices=[1, None]), "devices[0]: expected a mapping, got an integer"),
    (lambda d: d["nodes"][0].update(id="0"), "nodes[0].id: expected an integer, got a string"),
    (lambda d: d["nodes"][0].update(cpus=["a"]), "nodes[0].cpus[0]: expected an integer, got a string"),
    (lambda d: d["nodes"][0].update(memory_total_kib="1"),
     "nodes[0].memory_total_kib: expected a number, got a string"),
    (lambda d: d.update(settings=[]), "settings: expected a mapping, got a list"),
    (lambda d: d.update(path_matrix={"labels": ["GPU0", "NIC0"], "devices": ["a", "b"], "cells": [[["PIX"], "X"]]}),
     "path_matrix.cells[0][0]: expected a string, got a list"),
    (lambda d: d.update(findings=[{"code": ["NT001"]}]), "findings[0].code: expected a string, got a list"),
    # issue 41: an OverflowError and an IndexError (exit 70) before
    (lambda d: d["nodes"][0].update(memory_total_kib=int("9" * 400)),
     "nodes[0].memory_total_kib: an integer of 400 digits is out of range"),
    (lambda d: d.update(path_matrix={"labels": ["GPU0", "NIC0"], "devices": ["a"], "cells": [["X", "PIX"]]}),
     "path_matrix.devices: 1 devices for 2 labels"),
    (lambda d: d["nodes"][0].update(distances={"0": [10]}), "nodes[0].distances.0: expected an integer, got a list"),
    (lambda d: d.update(findings=[{"code": "NT001", "severity": ["error"]}]),
     "findings[0].severity: expected a string, got a list"),
    (lambda d: d.update(hostname=["n1"]), "hostname: expected a string, got a list"),
    (lambda d: d["settings"].update(release={"a": 1}),
     "settings.release: expected a string or a number, got a mapping"),
    (lambda d: d.update(cxl={"regions": [{"interleave_ways": "2"}]}),
     "cxl.regions[0].interleave_ways: expected an integer, got a string"),
]


@pytest.mark.parametrize("edit, message", MISTYPED)
def test_a_report_with_mistyped_fields_is_one_line(cli, report, edit, message):
    """A hand-edited report whose fields have other types than inspect --json writes: diff refuses it in one
    line (exit 3) and fleet lists it as unreadable; both were a Python error, exit 70."""
    bad = report(TWO_NODE, edit)
    result = cli("diff", bad, report(TWO_NODE))
    assert result.exit_code == 3 and message in result.stderr and "internal error" not in result.stderr
    result = cli("fleet", "--json", bad, report(TWO_NODE))
    assert result.exit_code == 0, result.stderr
    assert [message in u["reason"] for u in json.loads(result.stdout)["unreadable"]] == [True]
