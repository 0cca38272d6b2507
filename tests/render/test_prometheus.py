"""Prometheus textfile output, validated by the official parser (prometheus_client)."""

from __future__ import annotations

import json
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from numatune.analysis.topology_findings import topology_findings
from numatune.readers.topology import read_topology
from numatune.render.prometheus import Exposition, audit_metrics, inspect_metrics, irq_metrics
from numatune.system.host import Host
from tests.conftest import fixture_root, tree_fixtures


def parse(text: str) -> dict[str, list]:
    """family name -> samples; fails on anything the official parser rejects."""
    families = {}
    for fam in text_string_to_metric_families(text):
        assert fam.name not in families, f"family {fam.name} written twice"
        assert fam.documentation, f"{fam.name} has no HELP"
        families[fam.name] = fam
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(names) == len(set(names))
    assert all(n.startswith("numatune_") for n in names)
    return families


def samples(families, name):
    return [(s.labels, s.value) for s in families[name].samples] if name in families else []


@pytest.mark.parametrize("name", tree_fixtures())
def test_inspect_metrics_parse_on_every_fixture(name):
    topo = read_topology(Host.open(fixture_root(name)), pci_ids=None)
    fams = parse(inspect_metrics(topo, topology_findings(topo)))
    assert samples(fams, "numatune_numa_nodes") == [({}, float(len(topo.nodes)))]
    node_cpus = {lab["node"]: v for lab, v in samples(fams, "numatune_node_cpus")}
    assert node_cpus == {str(n.id): float(len(n.cpus)) for n in topo.nodes}


def test_inspect_metrics_values():
    topo = read_topology(Host.open(fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")), pci_ids=None)
    findings = topology_findings(topo)
    fams = parse(inspect_metrics(topo, findings))
    assert samples(fams, "numatune_sockets") == [({}, 2.0)]
    dist = {(lab["node"], lab["target"]): v for lab, v in samples(fams, "numatune_node_distance")}
    assert dist[("0", "1")] == 21.0 and dist[("1", "1")] == 10.0
    mem = dict((lab["node"], v) for lab, v in samples(fams, "numatune_node_memory_total_bytes"))
    assert mem["0"] == topo.node(0).memory_total_kib * 1024
    devices = {lab["device"]: lab for lab, _ in samples(fams, "numatune_device_info")}
    mlx = [d for d in topo.nics if d.numa_node == 1]
    assert devices[mlx[0].bdf]["node"] == "1" and devices[mlx[0].bdf]["kind"] == "nic"
    known = {lab["device"]: v for lab, v in samples(fams, "numatune_device_numa_node_known")}
    unknown = [d.bdf for d in topo.devices if d.numa_node is None and d.bdf in known]
    assert unknown and all(known[b] == 0.0 for b in unknown)
    by_sev = {lab["severity"]: v for lab, v in samples(fams, "numatune_findings")}
    assert by_sev["warning"] == sum(1 for f in findings if f.severity.value == "warning")
    assert len(samples(fams, "numatune_finding")) == len(findings)


def test_label_values_are_escaped():
    m = Exposition()
    m.add("numatune_x", "gauge", 'help with "quotes" and \\', 1, subject='a "b"\\c\nd')
    m.add("numatune_x", "gauge", "", None, subject="unknown is left out")
    (fam,) = text_string_to_metric_families(m.render())
    assert [s.labels["subject"] for s in fam.samples] == ['a "b"\\c\nd']
    assert Exposition().render() == ""


AUDIT_DOC = {
    "schema": "numatune.audit/2",
    "processes": [
        {
            "pid": 4242, "comm": "python", "rank": 3, "role": "rank",
            "threads": [{"tid": 4242, "cpu": 5, "allowed_cpus": [0, 1]}, {"tid": 4243, "cpu": 9, "allowed_cpus": [9]}],
            "memory_by_node": {"0": 3 << 30, "1": 1 << 30, "2": 512 << 20},
            "home_nodes": [0], "remote_ratio": 0.25, "slow_tier_ratio": 0.1, "remote_bytes": 1 << 30,
            "slow_tier_bytes": 512 << 20, "threads_off_home": [4243],
            "access_counters": {"source": "numa_balancing", "values": {"remote_ratio": 0.31}},
            "gpu": {"bdf": "0000:18:00.0", "node": 0, "source": "fd /dev/nvidia0", "index": 0},
            "verdict": "misplaced",
        },
        {
            "pid": 7, "comm": "kthreadd", "rank": None, "threads": [], "memory_by_node": {},
            "home_nodes": [], "remote_ratio": 0.0, "slow_tier_ratio": 0.0,
            "access_counters": {"source": "placement", "values": {"remote_ratio": None}},
            "gpu": None, "verdict": "ok",
        },
    ],
}


def test_audit_metrics_from_the_documented_fields():
    fams = parse(audit_metrics(AUDIT_DOC))
    assert samples(fams, "numatune_audit_processes") == [({}, 2.0)]
    mem = {(lab["pid"], lab["rank"], lab["node"]): v for lab, v in samples(fams, "numatune_process_memory_bytes")}
    assert mem[("4242", "3", "1")] == float(1 << 30) and len(mem) == 3
    ratio = {lab["pid"]: v for lab, v in samples(fams, "numatune_process_remote_ratio")}
    assert ratio == {"4242": 0.25, "7": 0.0}
    verdicts = {(lab["pid"], lab["verdict"]): v for lab, v in samples(fams, "numatune_process_verdict")}
    assert verdicts[("4242", "misplaced")] == 1.0 and verdicts[("4242", "ok")] == 0.0 and verdicts[("7", "ok")] == 1.0
    access = samples(fams, "numatune_process_access_remote_ratio")
    assert access == [({"pid": "4242", "rank": "3", "comm": "python", "role": "rank", "source": "numa_balancing"},
                       0.31)]
    roles = {lab["pid"]: lab["role"] for lab, _ in samples(fams, "numatune_process_verdict")}
    assert roles == {"4242": "rank", "7": "process"}  # a document without the field: a process outside a job
    assert samples(fams, "numatune_process_threads_off_home")[0][1] == 1.0
    gpu = samples(fams, "numatune_process_gpu_info")
    assert gpu[0][0]["device"] == "0000:18:00.0" and gpu[0][0]["node"] == "0"


def test_audit_metrics_of_a_real_process(cli):
    result = cli("audit", str(os.getpid()), "--json")
    if result.exit_code != 0:
        pytest.skip(f"audit cannot read this process here: {result.stderr.strip()}")
    doc = json.loads(result.stdout)
    fams = parse(audit_metrics(doc))
    pids = {lab["pid"] for lab, _ in samples(fams, "numatune_process_remote_ratio")}
    assert pids == {str(os.getpid())}
    total = sum(v for _, v in samples(fams, "numatune_process_memory_bytes"))
    assert total == sum(doc["processes"][0]["memory_by_node"].values())


IRQ_DOC = {
    "schema": "numatune.irq/1",
    "irqbalance": {"running": True, "banned_cpus": None},
    "devices": [
        {
            "key": "0000:81:00.0", "bdf": "0000:81:00.0", "kind": "nic", "label": "eth2", "numa_node": 1,
            "irqs": [
                {"irq": 120, "total": 1000, "per_node": {"0": 900, "1": 100}, "remote_share": 0.9,
                 "local": False, "managed": False},
                {"irq": 121, "total": 50, "per_node": {"1": 50}, "remote_share": 0.0, "local": True,
                 "managed": True},
                {"irq": 122, "total": None, "per_node": {}, "remote_share": None, "local": None, "managed": None},
            ],
        }
    ],
    "findings": [{"code": "NT201", "severity": "warning", "message": "m", "fix": "f", "subject": "irq 120"}],
}


def test_irq_metrics_from_the_documented_fields():
    fams = parse(irq_metrics(IRQ_DOC))
    assert samples(fams, "numatune_irqbalance_running") == [({}, 1.0)]
    (remote,) = samples(fams, "numatune_device_irqs_remote")
    assert remote == ({"device": "0000:81:00.0", "kind": "nic", "name": "eth2", "node": "1"}, 1.0)
    totals = {lab["irq"]: v for lab, v in samples(fams, "numatune_irq_interrupts")}
    assert totals == {"120": 1000.0, "121": 50.0}
    per_node = {(lab["irq"], lab["cpu_node"]): v for lab, v in samples(fams, "numatune_irq_node_interrupts")}
    assert per_node == {("120", "0"): 900.0, ("120", "1"): 100.0, ("121", "1"): 50.0}
    assert {lab["irq"]: v for lab, v in samples(fams, "numatune_irq_local")} == {"120": 0.0, "121": 1.0}
    assert {lab["severity"]: v for lab, v in samples(fams, "numatune_findings")}["warning"] == 1.0


@pytest.mark.parametrize("args", [("irq",), ("--root", str(fixture_root("procfs-4cpu-kvm")), "irq")])
def test_irq_command_output_parses(cli, args):
    result = cli(*args, "--format", "prometheus")
    assert result.exit_code == 0, result.stderr
    fams = parse(result.stdout)
    doc = json.loads(cli(*args, "--json").stdout)
    assert len(samples(fams, "numatune_device_irqs")) == len(doc["devices"])


def test_inspect_command_output_parses(cli):
    result = cli("--root", str(fixture_root("intel-xeon-L5640-2node")), "inspect", "--format", "prometheus")
    assert result.exit_code == 0
    fams = parse(result.stdout)
    assert samples(fams, "numatune_numa_nodes") == [({}, 2.0)]
