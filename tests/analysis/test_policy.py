"""Policy files: validation, and each expectation on fixture topologies (pure, no CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from numatune.analysis.policy import (
    EXPECTATIONS,
    PolicyFacts,
    apply_overrides,
    evaluate_policy,
    gpu_local_nics,
    parse_policy,
    version_at_least,
    version_tuple,
)
from numatune.commands.check import load_policy
from numatune.errors import InputError
from numatune.model.check import IrqPlacement
from numatune.model.findings import Severity
from numatune.readers.topology import read_topology
from tests.conftest import PROJECT

EXAMPLES = sorted((PROJECT / "examples").glob("*.toml"))


@pytest.fixture(scope="module")
def topo_of():
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = read_topology(Host.open(fixture_root(name)), pci_ids=None)
        return cache[name]

    return get


def codes(results):
    return sorted(f.code for r in results for f in r.findings)


def by_name(results):
    return {r.name: r for r in results}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_policies_load(path: Path):
    policy = load_policy(path)
    assert policy.source == str(path)


def test_every_expectation_has_its_own_policy_code():
    assert all(e.code.group == "policy" for e in EXPECTATIONS)
    assert len({e.code.code for e in EXPECTATIONS}) == len({e.key for e in EXPECTATIONS}) == len(EXPECTATIONS)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"expect": {"socket": 2}}, "expect.socket unknown key"),
        ({"expekt": {}}, "expekt unknown section"),
        ({"expect": {"sockets": "2"}}, "expect.sockets must be a whole number"),
        ({"expect": {"sockets": True}}, "expect.sockets must be a whole number"),
        ({"expect": {"nic_max_path": "SYS"}}, "expect.nic_max_path must be one of"),
        ({"expect": {"cxl": {"tier": "fast"}}}, "expect.cxl.tier must be"),
        ({"expect": {"cxl": {"size": 1}}}, "expect.cxl.size unknown key"),
        ({"kernel": {"min_version": "latest"}}, "kernel.min_version must be a version"),
        ({"kernel": {"numa_balancing": "off"}}, "kernel.numa_balancing must be a whole number"),
        ({"irq": {"rank_cpus": "4-2"}}, "irq.rank_cpus bad CPU list"),
        ({"check": {"fail_on": "fatal"}}, "check.fail_on must be info, warning or error"),
        ({"check": {"ignore": ["5"]}}, "check.ignore must be a list of finding codes"),
        ({"check": {"severity": {"NT005": "loud"}}}, "check.severity.NT005 must be info"),
    ],
)
def test_bad_policies_name_the_key(data, message):
    with pytest.raises(InputError) as exc:
        parse_policy(data, "p.toml")
    assert message in exc.value.message
    assert exc.value.message.startswith("policy p.toml: ")


def test_invalid_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[expect\nsockets = 2\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load_policy(bad)
    with pytest.raises(InputError, match="policy .*missing.toml does not exist"):
        load_policy(tmp_path / "missing.toml")


def test_versions():
    assert version_tuple("5.15.0-91-generic") == (5, 15, 0)
    assert version_tuple("2.0.16-1") == (2, 0, 16)
    assert version_tuple("garbage") is None
    assert version_at_least("6.1", "6.1.0") is True
    assert version_at_least("5.15.0-91-generic", "6.1") is False
    assert version_at_least("3.10.0-1160.15.2.el7.x86_64", "3.10") is True


def test_empty_policy_runs_nothing(topo_of):
    assert evaluate_policy(parse_policy({}), topo_of("memorysidecaches")) == []


def test_counts_on_a_two_socket_four_node_tree(topo_of):
    topo = topo_of("memorysidecaches")  # 2 sockets, SNC2: 4 nodes with CPUs, 80 CPUs, SMT 2
    ok = parse_policy({"expect": {"sockets": 2, "numa_nodes": 4, "cpu_nodes": 4, "cpus": 80, "threads_per_core": 2}})
    results = evaluate_policy(ok, topo)
    assert len(results) == 5 and all(r.passed for r in results)
    bad = parse_policy({"expect": {"sockets": 1, "cpu_nodes": 2, "gpus": 8}})
    results = by_name(evaluate_policy(bad, topo))
    assert results["policy.expect.sockets"].findings[0].message == "expected 1 sockets, found 2"
    assert results["policy.expect.cpu_nodes"].findings[0].message == "expected 2 NUMA nodes with CPUs, found 4"
    assert results["policy.expect.gpus"].findings[0].code == "NT306"
    assert all(f.severity is Severity.ERROR for r in results.values() for f in r.findings)


def test_gpus_per_node(topo_of):
    topo = topo_of("nvidiagpunumanodes")  # 6 V100s, numa_node missing, inferred 3 on node 0 and 3 on node 8
    results = by_name(evaluate_policy(parse_policy({"expect": {"gpus": 6, "gpus_per_node": 3}}), topo))
    assert results["policy.expect.gpus"].passed
    assert results["policy.expect.gpus_per_node"].passed
    (r,) = evaluate_policy(parse_policy({"expect": {"gpus_per_node": 4}}), topo)
    assert [f.subject for f in r.findings] == ["node 0", "node 8"]
    assert r.findings[0].message.startswith("node 0 has 3 GPU(s), expected 4 (0004:05:00.0, ")
    # A GPU whose node nobody knows cannot count for any node.
    unknown = tuple(g._replace(inferred_node=None) if g.bdf == "0035:05:00.0" else g
                    for g in topo.devices)
    (r,) = evaluate_policy(parse_policy({"expect": {"gpus_per_node": 3}}), topo._replace(devices=unknown))
    assert [f.subject for f in r.findings] == ["node 8", "gpus"]
    assert "0035:05:00.0" in r.findings[1].message


def test_nic_per_gpu_and_device_nodes(topo_of):
    topo = topo_of("vm-accel-nvidia-p100")  # one GPU and one virtio NIC, both numa_node -1
    results = by_name(evaluate_policy(parse_policy({"expect": {"nic_max_path": "PIX", "device_nodes_known": True}}),
                                      topo))
    nic = results["policy.expect.nic_per_gpu"]
    assert [f.code for f in nic.findings] == ["NT309"]
    assert "worse than PIX" in nic.findings[0].message
    assert sorted(f.subject for f in results["policy.expect.device_nodes_known"].findings) == [
        d.bdf for d in sorted(topo.devices, key=lambda d: d.bdf) if d.kind in ("gpu", "nic")
    ]
    # A looser limit that the path meets passes.
    path = results["policy.expect.nic_per_gpu"].findings[0].message.split(" is ")[1].split(",")[0]
    loose = evaluate_policy(parse_policy({"expect": {"nic_max_path": "NODE"}}), topo)
    assert loose[0].passed == (path in ("PIX", "PXB", "PHB", "NODE"))


def test_nic_per_gpu_without_gpus_is_skipped(topo_of):
    (r,) = evaluate_policy(parse_policy({"expect": {"nic_per_gpu": True}}), topo_of("memorysidecaches"))
    assert r.skipped == "no GPUs on this node" and not r.passed


def test_memory_per_node(topo_of):
    topo = topo_of("fakeheteromemtiers")
    (r,) = evaluate_policy(parse_policy({"expect": {"memory_per_node_gib_min": 1}}), topo)
    small = [n.id for n in topo.nodes if n.cpus and n.memory_total_kib < 1048576]
    assert sorted(f.subject for f in r.findings) == [f"node {i}" for i in small]


def _with_cxl(topo, tier_of_cxl):
    """The fakeheteromemtiers tree with its CPU-less nodes marked CXL and placed in a tier."""
    nodes = tuple(
        n if n.cpus else n._replace(kind="cxl", tier=tier_of_cxl) for n in topo.nodes
    )
    nodes = tuple(n._replace(tier=4) if n.cpus else n for n in nodes)
    return topo._replace(nodes=nodes)


def test_cxl_capacity_and_tier(topo_of):
    base = topo_of("fakeheteromemtiers")
    cpuless_gib = sum(n.memory_total_kib for n in base.nodes if not n.cpus) / 1048576
    policy = parse_policy({"expect": {"cxl": {"capacity_gib_min": cpuless_gib, "tier": "below-dram"}}})
    good = evaluate_policy(policy, _with_cxl(base, 5))
    assert all(r.passed for r in good), good
    same = by_name(evaluate_policy(policy, _with_cxl(base, 4)))
    assert {f.code for f in same["policy.expect.cxl.tier"].findings} == {"NT313"}
    assert "(DRAM is tier 4)" in same["policy.expect.cxl.tier"].findings[0].message
    more = parse_policy({"expect": {"cxl": {"capacity_gib_min": cpuless_gib + 1}}})
    (r,) = evaluate_policy(more, _with_cxl(base, 5))
    assert r.findings[0].code == "NT312"
    exact = parse_policy({"expect": {"cxl": {"tier": 5}}})
    assert evaluate_policy(exact, _with_cxl(base, 5))[0].passed
    assert not evaluate_policy(exact, _with_cxl(base, 6))[0].passed
    assert evaluate_policy(exact, base)[0].skipped == "no CXL memory node on this node"


def test_kernel_settings(topo_of):
    topo = topo_of("memorysidecaches")
    settings = topo.settings._replace(
        release="5.3.0-rc7", numa_balancing=1, transparent_hugepage="never", zone_reclaim_mode=0, demotion_enabled=None
    )
    topo = topo._replace(settings=settings)
    policy = parse_policy({"kernel": {"min_version": "5.15", "numa_balancing": 0,
                                      "transparent_hugepage": ["madvise", "always"], "zone_reclaim_mode": 0,
                                      "demotion_enabled": True}})
    r = by_name(evaluate_policy(policy, topo))
    assert r["policy.kernel.min_version"].findings[0].message == "kernel 5.3.0-rc7 is older than 5.15"
    assert r["policy.kernel.numa_balancing"].findings[0].message == "kernel.numa_balancing is 1, expected 0"
    assert r["policy.kernel.numa_balancing"].findings[0].severity is Severity.WARNING
    assert "expected madvise or always" in r["policy.kernel.transparent_hugepage"].findings[0].message
    assert "echo madvise >" in r["policy.kernel.transparent_hugepage"].findings[0].fix
    assert r["policy.kernel.zone_reclaim_mode"].passed
    assert r["policy.kernel.demotion_enabled"].skipped.endswith("is not in this root")


def test_numactl_version_from_facts(topo_of):
    topo = topo_of("memorysidecaches")
    policy = parse_policy({"tools": {"numactl_min_version": "2.0.19"}})
    assert evaluate_policy(policy, topo, PolicyFacts("2.0.16", ""))[0].findings[0].code == "NT330"
    assert evaluate_policy(policy, topo, PolicyFacts("2.0.19", ""))[0].passed
    r = evaluate_policy(policy, topo, PolicyFacts(None, "saved root"))[0]
    assert r.skipped == "saved root"


def test_irq_on_rank_cores(topo_of):
    topo = topo_of("vm-accel-nvidia-p100")
    local = gpu_local_nics(topo)
    policy = parse_policy({"irq": {"rank_cpus": "2-7"}})
    if not local:
        assert evaluate_policy(policy, topo)[0].skipped == "no NIC is local to a GPU on this node"
        # Make the NIC local: same node as the GPU.
        devices = tuple(d._replace(numa_node=0) for d in topo.devices)
        topo = topo._replace(devices=devices)
        local = gpu_local_nics(topo)
    (nic,) = local
    facts = PolicyFacts(irqs=(
        IrqPlacement(40, nic, "q0", frozenset({0, 1})),
        IrqPlacement(41, nic, "q1", frozenset({3})),
        IrqPlacement(42, nic, "q2", frozenset({5, 6})),
        IrqPlacement(43, "0000:99:00.0", "other", frozenset({4})),
    ))
    (r,) = evaluate_policy(policy, topo, facts)
    (f,) = r.findings
    assert f.code == "NT340" and f.subject == nic
    assert "2 IRQ(s)" in f.message and "rank cores 3,5-6" in f.message and "(IRQs 41-42)" in f.message
    assert "--exclude-cpus 2-7" in f.fix
    clean = PolicyFacts(irqs=(IrqPlacement(40, nic, "q0", frozenset({0, 1})),))
    assert evaluate_policy(policy, topo, clean)[0].passed
    assert evaluate_policy(policy, topo, PolicyFacts(irq_note="no /proc/irq"))[0].skipped == "no /proc/irq"


def test_overrides_ignore_and_severity(topo_of):
    topo = topo_of("memorysidecaches")
    policy = parse_policy({"expect": {"sockets": 1, "cpus": 1},
                           "check": {"ignore": ["NT304"], "severity": {"NT301": "info"}}})
    results = apply_overrides(evaluate_policy(policy, topo), policy)
    assert codes(results) == ["NT301"]
    assert results[0].findings[0].severity is Severity.INFO


def test_gpu_cxl_tree(topo_of):
    """The hand-made GPU+CXL tree: 2 CXL nodes of 64 GiB in tier 22 under DRAM's tier 4, one NIC on socket 1."""
    topo = topo_of("handmade-launch-2s4gpu-cxl")
    policy = parse_policy({"expect": {"gpus_per_node": 2, "nic_max_path": "NODE",
                                      "cxl": {"capacity_gib_min": 128, "tier": "below-dram"}}})
    r = by_name(evaluate_policy(policy, topo))
    assert r["policy.expect.gpus_per_node"].passed
    assert r["policy.expect.cxl.capacity_gib_min"].passed and r["policy.expect.cxl.tier"].passed
    nic = r["policy.expect.nic_per_gpu"]
    assert sorted(f.subject for f in nic.findings) == sorted(g.bdf for g in topo.gpus if g.node == 0)
    assert all("is SYS, worse than NODE" in f.message for f in nic.findings)
    assert not evaluate_policy(parse_policy({"expect": {"cxl": {"capacity_gib_min": 129}}}), topo)[0].passed
    assert not evaluate_policy(parse_policy({"expect": {"cxl": {"tier": "same-as-dram"}}}), topo)[0].passed
    assert set(gpu_local_nics(topo).values()) <= {g.bdf for g in topo.gpus if g.node == 1}
