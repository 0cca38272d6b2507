"""Documents of the wrong type and documents that build too much (issue 41, points 1, 2 and 5): each answered with
exit 0, 1 or 3 within 10 s and 256 MiB, an error in one line naming the file and the field, never exit 70.

Every input is made here: small well-formed documents with one field of another type (a list where an integer
goes, a number where a list goes, a 400-digit integer, 1e308), generated files of tens of MB that parse into
gigabytes, and every field of real inspect reports, kubelet configs, probe documents, IRQ state files and NVML
records replaced in turn by hostile values (the readers must refuse or read each, never fail in Python).
Commands run through the real command line in a child under RLIMIT_AS and a timeout (tests/limits.py).
"""

from __future__ import annotations

import copy
import io
import json
import time

import pytest

from numatune.errors import InputError, NumatuneError
from numatune.model.document import Doc
from numatune.system.infile import load_document, structure
from tests import test_hostile_values as hostile_values
from tests.conftest import fixture_root
from tests.limits import best_seconds, growth

SECONDS = hostile_values.SECONDS
ROOT = "dev-1node-x86"
HUGE = int("9" * 400)


def answered(*args: str, codes: tuple[int, ...] = (3,)):
    """test_hostile_values' check (within the limits, one line, no traceback) on the dev-1node-x86 root."""
    return hostile_values.answered("--root", str(fixture_root(ROOT)), *args, codes=codes)


def _write(path, doc) -> str:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


# -- point 1: a field of the wrong type is exit 3 naming the file and the field ----------------------------------
KUBELET = "kind: KubeletConfiguration\nmemoryManagerPolicy: Static\n"


@pytest.mark.parametrize(("text", "field"), [
    (KUBELET + "reservedMemory:\n- numaNode: [0]\n  limits: {memory: 1Gi}\n",
     "reservedMemory[0].numaNode: expected an integer, got a list"),
    (KUBELET + "reservedMemory:\n- numaNode: 0\n  limits: [1Gi]\n",
     "reservedMemory[0].limits: expected a mapping, got a list"),
    (KUBELET + "reservedMemory: 5\n", "reservedMemory: expected a list, got an integer"),
    (KUBELET + "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1e400Gi}\n",
     "reservedMemory[0].limits.memory: '1e400Gi' is not a memory quantity"),
    (KUBELET + "kubeReserved: [1]\n", "kubeReserved: expected a mapping, got a list"),
    ("kind: KubeletConfiguration\ncpuManagerPolicy: {a: 1}\n", "cpuManagerPolicy: expected a string or a number"),
    ("kind: KubeletConfiguration\ntopologyManagerPolicyOptions: [x]\ntopologyManagerPolicy: restricted\n",
     "topologyManagerPolicyOptions: expected a mapping, got a list"),
], ids=["numaNode-list", "limits-list", "reservedMemory-number", "quantity-inf", "kubeReserved-list",
        "policy-mapping", "options-list"])
def test_a_kubelet_config_of_the_wrong_types_names_the_field(tmp_path, text, field):
    """Each was a TypeError or AttributeError (exit 70)."""
    f = _write(tmp_path / "kubelet.yaml", text)
    r = answered("check", "--kubelet-config", f)
    assert f"numatune: error: {f}: {field}" in r.stderr


PROBE = {"schema": "numatune.probe/1", "initiators": [0],
         "cells": [{"initiator": 0, "target": 0, "status": "ok", "read_gbps": {"median": 10.0}}]}
GPU_PROBE = {"schema": "numatune.probe/1", "gpu": {
    "measured": True, "gpus": [{"index": 0, "bdf": "0000:01:00.0"}],
    "pairs": [{"node": 0, "gpu": 0, "status": "ok", "h2d_gbps": {"4194304": {"median": 1.0}}}]}}


def _cells(value):
    return dict(PROBE, cells=value)


def _median(doc: dict, value) -> dict:
    out = copy.deepcopy(doc)
    fig = out["cells"][0]["read_gbps"] if "cells" in out else out["gpu"]["pairs"][0]["h2d_gbps"]["4194304"]
    fig["median"] = value
    return out


@pytest.mark.parametrize(("doc", "field"), [
    (_cells(5), "cells: expected a list, got an integer"),
    (_cells({"a": 1}), "cells: expected a list, got a mapping"),
    (_median(PROBE, "10"), "cells[0].read_gbps.median: expected a number, got a string"),
    (_median(PROBE, HUGE), "cells[0].read_gbps.median: an integer of 400 digits is out of range"),
    (_median(PROBE, 1e308), "cells[0].read_gbps.median: 1e+308 is out of range"),
    (_cells([{"initiator": [0], "status": "ok"}]), "cells[0].initiator: expected an integer, got a list"),
], ids=["cells-number", "cells-mapping", "median-string", "median-400-digits", "median-1e308", "initiator-list"])
def test_plan_memory_probe_of_the_wrong_types_names_the_field(tmp_path, doc, field):
    f = _write(tmp_path / "probe.json", doc)
    r = answered("plan-memory", "--params", "7e9", "--probe", f)
    assert f"numatune: error: --probe {f}: {field}" in r.stderr


@pytest.mark.parametrize(("doc", "field"), [
    (dict(GPU_PROBE, gpu=dict(GPU_PROBE["gpu"], pairs=5)), "gpu.pairs: expected a list, got an integer"),
    (dict(GPU_PROBE, gpu=dict(GPU_PROBE["gpu"], pairs={"a": 1})), "gpu.pairs: expected a list, got a mapping"),
    (_median(GPU_PROBE, "1"), "gpu.pairs[0].h2d_gbps.4194304.median: expected a number, got a string"),
    (_median(GPU_PROBE, HUGE), "gpu.pairs[0].h2d_gbps.4194304.median: an integer of 400 digits is out of range"),
    (_median(GPU_PROBE, 1e308), "gpu.pairs[0].h2d_gbps.4194304.median: 1e+308 is out of range"),
], ids=["pairs-number", "pairs-mapping", "median-string", "median-400-digits", "median-1e308"])
def test_audit_probe_of_the_wrong_types_names_the_field(tmp_path, doc, field):
    f = _write(tmp_path / "probe.json", doc)
    r = answered("audit", "1", "--probe", f)
    assert f"numatune: error: --probe {f}: {field}" in r.stderr


@pytest.fixture(scope="module")
def report():
    from numatune.commands.diff import inspect_doc_of_root

    return json.loads(json.dumps(inspect_doc_of_root(str(fixture_root(ROOT)))))


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["nodes"][0].update(memory_total_kib=HUGE),
     "nodes[0].memory_total_kib: an integer of 400 digits is out of range"),
    (lambda d: d.update(path_matrix={"labels": ["GPU0", "NIC0"], "devices": ["0000:01:00.0"], "cells": [["X", "PIX"]]}),
     "path_matrix.devices: 1 devices for 2 labels"),
], ids=["memory-400-digits", "devices-shorter-than-labels"])
def test_a_report_of_the_wrong_shape_to_diff_and_fleet(tmp_path, report, edit, field):
    """An OverflowError and an IndexError (exit 70) before: diff refuses the report in one line, fleet lists it as
    unreadable and goes on with the other."""
    bad = copy.deepcopy(report)
    edit(bad)
    f = _write(tmp_path / "bad.json", bad)
    good = _write(tmp_path / "good.json", report)
    r = answered("diff", f, good)
    assert f"numatune: error: {f}: {field}" in r.stderr
    r = answered("fleet", "--json", f, good, codes=(0,))
    unreadable = json.loads(r.stdout)["unreadable"]
    assert [u["source"] for u in unreadable] == [f] and unreadable[0]["reason"].startswith(field)


# -- finding more of the same class: every field of real documents, replaced in turn -----------------------------
HOSTILE = ([1], {"a": [1]}, "x", HUGE, 1e308, None, -1, True)


def _paths(value, path=()):
    """Every place in a document (the first three items of each list)."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:3]):
            yield from _paths(item, (*path, i))


def _replaced(doc, path, value):
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _survives(doc, read, values=HOSTILE) -> list[str]:
    """The (path, value) of every replacement READ fails on with anything but numatune's own errors."""
    failures = []
    for path in _paths(doc):
        for value in values:
            try:
                read(_replaced(doc, path, value))
            except NumatuneError:
                pass
            except Exception as exc:  # noqa: BLE001 - the point: nothing else may escape
                failures.append(f"{'.'.join(map(str, path))} = {repr(value)[:20]}: {type(exc).__name__}: {exc}"[:200])
    return failures


@pytest.mark.parametrize("name", ["dev-1node-x86", "vm-cxl-switch"])
def test_every_field_of_a_report_read_by_diff_fleet_and_the_picture(name):
    """diff's view, fleet's fingerprint and CXL pools, and the picture fleet --format html draws of a group's first
    report: every field of a real report as a list, a mapping, text, a 400-digit integer, 1e308, null, -1, true."""
    from numatune.analysis.diff import check_inspect_document, view
    from numatune.analysis.fleet import FleetTally
    from numatune.commands.diff import inspect_doc_of_root
    from numatune.render.fleet_out import render_fleet_text
    from numatune.render.picture import check_picture, render_svg

    doc = json.loads(json.dumps(inspect_doc_of_root(str(fixture_root(name)))))

    def read(d):
        check_inspect_document(d, "r.json")
        view(d)
        tally = FleetTally()
        tally.add("n", d)
        render_fleet_text(tally.result(), [])
        check_picture(Doc(d, "r.json"))
        render_svg(d)

    assert _survives(doc, read, HOSTILE[:4] + HOSTILE[5:6]) == []  # a list, a mapping, text, 400 digits, null


def test_every_field_of_the_other_documents():
    """A kubelet config, both probe documents, an IRQ state file and plan, a policy, and a saved NVML record."""
    from numatune.analysis.policy import parse_policy
    from numatune.analysis.scheduler import check_kubelet
    from numatune.commands.audit import probe_h2d
    from numatune.placement.targets import probe_bandwidths
    from numatune.readers.nvml import fabric_from_record
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    topo = read_topology(Host.open(str(fixture_root("vm-two-socket"))))
    kubelet = {"kind": "KubeletConfiguration", "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
               "topologyManagerPolicy": "restricted", "reservedSystemCPUs": "0-1",
               "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
               "kubeReserved": {"cpu": "1", "memory": "1Gi"}, "systemReserved": {"memory": "1Gi"},
               "evictionHard": {"memory.available": "100Mi"},
               "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1100Mi"}}, {"numaNode": 1}]}
    assert _survives(kubelet, lambda d: list(check_kubelet(Doc(d, "k.yaml"), topo))) == []
    assert _survives(PROBE, lambda d: probe_bandwidths(Doc(d, "p.json"))) == []
    assert _survives(GPU_PROBE, lambda d: probe_h2d(d, "g.json")) == []
    policy = {"expect": {"sockets": 2, "memory_per_node_gib_min": 1.5, "nic_max_path": "PIX",
                         "cxl": {"tier": "below-dram"}}, "kernel": {"min_version": "5.15", "numa_balancing": 0},
              "check": {"fail_on": "error", "ignore": ["NT005"], "severity": {"NT001": "info"}}}
    assert _survives(policy, lambda d: parse_policy(d, "p.toml")) == []
    record = json.loads((fixture_root("h100-vm-1gpu") / "numatune" / "nvml.json").read_text())
    assert _survives(record, lambda d: fabric_from_record(d, "", "saved")) == []


def test_every_field_of_irq_state_files_and_plans(tmp_path):
    from numatune.live.irq_apply import read_plan, read_state

    state = {"schema": "numatune.irq-state/1", "root": "/",
             "irqs": [{"irq": 41, "smp_affinity_list": "0-3", "smp_affinity": "f", "label": "eth0"}]}
    plan = {"schema": "numatune.irq-plan/1", "entries": [{"irq": 41, "action": "set", "target": "0-3", "label": "x"}]}
    for doc, read in ((state, read_state), (plan, read_plan)):
        assert _survives(doc, lambda d, read=read: read(_write(tmp_path / "f.json", d))) == []


# -- point 2: what a parse builds is bounded, not only the bytes ----------------------------------------------
@pytest.mark.parametrize("args", [
    ["irq", "restore", "{f}", "--dry-run"], ["irq", "apply", "--dry-run", "--plan", "{f}"],
    ["plan-memory", "--params", "7e9", "--probe", "{f}"], ["audit", "1", "--probe", "{f}"],
], ids=["irq restore", "irq apply --plan", "plan-memory --probe", "audit --probe"])
def test_63_mb_of_empty_objects_is_refused_before_parsing(tmp_path, args):
    """Under the 64 MiB input bound, 63 MB of `{}` parsed into 1.6 GB (irq restore, irq apply --plan,
    plan-memory --probe): the scan counts 22 million objects and refuses the document unparsed (--probe files
    stop at 16 MiB, on their size)."""
    f = tmp_path / "doc.json"
    with open(f, "w") as fh:
        fh.write("[" + "{}," * ((63 << 20) // 3 - 1) + "{}]")
    r = answered(*[a.replace("{f}", str(f)) for a in args])
    assert str(f) in r.stderr and ("more than the 96 MiB" in r.stderr or "larger than 16 MiB" in r.stderr), r.stderr


@pytest.mark.parametrize(("args", "text"), [
    (["check", "--kubelet-config", "{f}"], "kind: KubeletConfiguration\nx:\n" + "- 1\n" * 1_000_000),
    (["check", "--resource-slices", "{f}"], "kind: List\nitems: [" + "{}, " * 1_000_000 + "]\n"),
    (["check", "--policy", "{f}"], "[expect]\nx = [" + "1," * 2_000_000 + "1]\n"),
], ids=["kubelet-yaml-lines", "slices-yaml-flow", "policy-toml-array"])
def test_a_configuration_of_millions_of_values_is_refused_before_parsing(tmp_path, args, text):
    """4 MiB of YAML `- 1` lines took 75 s and 386 MB, of TOML numbers 33 s (PyYAML's loader and tomllib build
    each value in Python): at most 200,000 values, counted by the scan."""
    f = tmp_path / "doc"
    f.write_text(text)
    assert f.stat().st_size <= 4 << 20
    r = answered(*[a.replace("{f}", str(f)) for a in args])
    assert f"{f} holds about" in r.stderr and "more than the 200,000 numatune parses" in r.stderr, r.stderr


def test_honest_documents_under_the_bounds_are_read(tmp_path):
    """An IRQ state file of 32,768 IRQs (the most /proc/interrupts rows numatune reads) and 300 ResourceSlices of
    eight GPUs in YAML are read, not refused."""
    irqs = [{"irq": i, "smp_affinity_list": "0-255", "smp_affinity": ",".join(["ffffffff"] * 8), "label": f"q{i}"}
            for i in range(32_768)]
    doc = load_document(json.dumps({"schema": "numatune.irq-state/1", "irqs": irqs}, indent=1), "state")
    assert len(doc["irqs"]) == 32_768
    import yaml

    device = {"name": "gpu", "attributes": {"resource.kubernetes.io/pciBusID": {"string": "0000:01:00.0"},
                                            "index": {"int": 0}, "uuid": {"string": "GPU-x"}}}
    slices = [{"kind": "ResourceSlice", "metadata": {"name": f"s{k}"},
               "spec": {"nodeName": f"n{k}", "driver": "gpu.nvidia.com", "devices": [device] * 8}} for k in range(300)]
    text = yaml.safe_dump({"kind": "List", "items": slices})
    assert len(load_document(text, "slices", "yaml")["items"]) == 300


def test_fleet_counts_unreadable_entries_without_keeping_them(tmp_path):
    """One JSON array of 4 million non-reports (8 MB) kept each as an unreadable entry: 1 GiB. Now the first 50 are
    listed and all counted, and 1,000 in a row end that input; from a file, what the array would build is
    estimated first."""
    f = tmp_path / "arr.json"
    f.write_text("[" + "0," * 4_000_000 + "0]")
    r = answered("fleet", str(f))
    assert "could take" in r.stderr and "not decoded" in r.stderr
    from numatune.commands.fleet import run_fleet

    text = "[" + ",".join([json.dumps({"schema": "numatune.check/1"})] * 3000) + "]"
    with pytest.raises(InputError, match="no numatune inspect report"):
        run_fleet(("-",), stdin=io.StringIO(text))
    good = json.dumps(json.loads(json.dumps(_report_of(ROOT))))
    fleet, unreadable = run_fleet(("-",), stdin=io.StringIO(text.replace("[", "[" + good + ",", 1)))
    assert fleet.total == 1 and len(unreadable) == 51 and unreadable.total == 1001
    assert unreadable[-1][1].startswith("1,000 documents in a row were not reports")


def _report_of(name: str) -> dict:
    from numatune.commands.diff import inspect_doc_of_root

    return inspect_doc_of_root(str(fixture_root(name)))


def test_fleet_json_says_how_many_were_unreadable(tmp_path):
    f = tmp_path / "mixed.json"
    f.write_text("\n".join([json.dumps(_report_of(ROOT))] + [json.dumps({"schema": "x"})] * 60))
    r = answered("fleet", "--json", str(f), codes=(0,))
    doc = json.loads(r.stdout)
    assert len(doc["unreadable"]) == 50 and doc["unreadable_count"] == 60
    r = answered("fleet", str(f), codes=(0,))
    assert "unreadable: 10 more, counted, not listed" in r.stdout


def test_a_fleet_document_that_never_ends_is_bounded(tmp_path):
    """A stream whose one document goes on for more than 16 MiB is one unreadable line, not held whole."""
    from numatune.commands import fleet as fleet_run

    class Endless(io.StringIO):
        """A report whose one string never closes."""

        def __init__(self) -> None:
            super().__init__()
            self.head = '{"schema": "numatune.inspect/3", "a": "'

        def read(self, size: int | None = -1) -> str:
            head, self.head = self.head, ""
            return head or "x" * size

    start = time.monotonic()
    with pytest.raises(InputError, match="larger than 16 MiB"):
        fleet_run.run_fleet(("-",), stdin=Endless())
    assert time.monotonic() - start < SECONDS


# -- point 5: how the cost grows --------------------------------------------------------------------------------
def test_the_document_scan_is_linear():
    """The scan that bounds depth, containers and values before a parser runs: twice and four times the text,
    about twice and four times the time (pieces of 1 MiB, strings removed in each)."""
    def json_text(n: int) -> str:
        return "[\n" + ",\n".join('{"a": "x,[{", "b": [1, 2]}' for _ in range(n)) + "\n]"

    assert growth(json_text, lambda t: structure(t, "json"), 20_000) < 8
    assert growth(lambda n: "a:\n" + "".join(f"  - k{i}: 'v'\n" for i in range(n)), lambda t: structure(t, "yaml"),
                  20_000) < 8


def test_a_report_is_checked_in_time_linear_in_its_size(report):
    """check_inspect_document reads every field once: a report of four times the nodes, four times the time."""
    from numatune.analysis.diff import check_inspect_document

    def bigger(n: int) -> dict:
        doc = copy.deepcopy(report)
        doc["nodes"] = [dict(doc["nodes"][0], id=i, cpus=list(range(64))) for i in range(n)]
        return doc

    assert growth(bigger, lambda d: check_inspect_document(d, "r.json"), 2500) < 8


def test_yaml_is_parsed_in_time_linear_in_its_size():
    """Parsing YAML with the cyclic collector on grew faster than the document (its passes over every node
    built so far); off while parsing, twice the slices take about twice the time."""
    import yaml

    def slices(n: int) -> str:
        device = {"name": "gpu", "attributes": {"a": {"string": "0000:01:00.0"}, "b": {"int": 0}}}
        return yaml.safe_dump({"kind": "List", "items": [{"kind": "ResourceSlice", "spec": {
            "nodeName": f"n{k}", "devices": [device] * 8}} for k in range(n)]})

    assert growth(slices, lambda t: load_document(t, "s", "yaml"), 100) < 8
    assert best_seconds(lambda: load_document(slices(400), "s", "yaml"), 1) < 5


def test_a_slurm_conf_line_of_thousands_of_keys_is_refused(tmp_path):
    """Every NodeName line was merged with the NodeName=DEFAULT keys: defaults of 200,000 keys copied into each
    of thousands of lines grew as their product. A line (or the defaults) holds at most 256 keys."""
    f = tmp_path / "slurm.conf"
    f.write_text("NodeName=DEFAULT " + " ".join(f"K{i}=1" for i in range(200_000)) + "\n"
                 + "".join(f"NodeName=n{i} CPUs=1\n" for i in range(20_000)))
    r = answered("check", "--slurm-conf", str(f))
    assert f"{f}:1: a line of 200,001 words" in r.stderr
    f.write_text("".join("NodeName=DEFAULT " + " ".join(f"K{j}{i}=1" for i in range(200)) + "\n" for j in range(3)))
    r = answered("check", "--slurm-conf", str(f))
    assert f"{f} line 1: NodeName=DEFAULT lines set more than 64 keys" in r.stderr, r.stderr
