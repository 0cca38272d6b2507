"""Probe findings and rendering on hand-made results (the live figures are tested in tests/measure and the VM)."""

from __future__ import annotations

import json

from numatune.analysis.probe import expected, probe_findings, ratios
from numatune.model.findings import REGISTRY
from numatune.model.probe import Cell, CellPlacement, Expected, Figure, ProbeResult
from numatune.render.probe_out import probe_document, render_text
from tests.conftest import fixture_root


def fig(x: float) -> Figure:
    return Figure((x, x), x, x)


OK = CellPlacement(True, 100, 100, {}, 1.0)


def cell(i, t, lat, bw, kind="dram", dist=None, local=10, status="ok", placement=OK):  # noqa: ANN001
    return Cell(i, t, kind, 0, 2, status, None, placement, fig(lat) if lat else None, fig(bw) if bw else None,
                fig(2 * bw) if bw else None, Expected(dist, local, None, None))


def result(cells, initiators=(0,), targets=(0, 1), **kw):  # noqa: ANN001, ANN003
    base = dict(host="/", initiators=initiators, targets=targets, cells=tuple(cells), latency_available=True,
                latency_reason=None, latency_bytes=128 << 20, bandwidth_bytes=128 << 20, llc_bytes=32 << 20,
                time_budget=10.0, elapsed=9.5, numa_balancing=0, demotion_enabled=False,
                transparent_hugepage="madvise")
    base.update(kw)
    return ProbeResult(**base)


def codes(res, topo=None):  # noqa: ANN001
    return [f.code for f in probe_findings(res, topo)]


def test_codes_are_distinct_and_in_the_nt5xx_range():
    probe = [c.code for c in REGISTRY.values() if c.group == "probe"]
    assert len(probe) == 11 and all(c.startswith("NT5") and len(c) == 5 for c in probe)


def test_flat_nodes_are_no_numa_effect_and_contradict_slit():
    res = result([cell(0, 0, 100.0, 10.0, dist=10), cell(0, 1, 104.0, 9.8, dist=21)])
    found = codes(res)
    assert "NT503" in found  # within 10%: a VM or fake NUMA
    assert "NT502" in found  # SLIT says 2.1x, measured 1.04x
    assert ratios(res)[0]["latency"] == 1.04


def test_real_remote_penalty_is_not_flat():
    res = result([cell(0, 0, 100.0, 10.0, dist=10), cell(0, 1, 160.0, 6.0, dist=21)])
    assert codes(res) == []


def test_cxl_against_remote_dram():
    res = result([cell(0, 0, 100.0, 10.0, dist=10), cell(0, 1, 160.0, 6.0, dist=21),
                  cell(0, 2, 250.0, 3.0, kind="cxl", dist=24)], targets=(0, 1, 2))
    assert "NT505" in codes(res)
    faster = result([cell(0, 0, 100.0, 10.0, dist=10), cell(0, 1, 160.0, 6.0, dist=21),
                     cell(0, 2, 140.0, 7.0, kind="cxl", dist=24)], targets=(0, 1, 2))
    assert "NT504" in codes(faster)
    assert [r["kind"] for r in ratios(faster)] == ["remote/local", "cxl/local"]


def test_one_node_failed_pair_no_compiler_balancing_4k_pages():
    small = CellPlacement(True, 100, 100, {}, 0.0)
    bad = CellPlacement(False, 100, 60, {0: 40}, None)
    res = result([cell(0, 0, 100.0, 10.0, placement=small),
                  cell(0, 1, None, None, status="failed", placement=bad)],
                 latency_available=False, latency_reason="no C compiler", numa_balancing=1)
    found = codes(res)
    assert {"NT507", "NT508", "NT506", "NT509"} <= set(found)
    assert "NT501" in codes(result([cell(0, 0, 100.0, 10.0)], targets=(0,)))
    text = render_text(res, probe_findings(res, None))
    assert "FAILED" in text and "60 of 100 pages on node 1" in text


def test_expected_reads_slit_and_hmat_from_a_vm_tree(host_of):
    from numatune.readers.topology import read_topology

    topo = read_topology(host_of("vm-cxl"), devices=False, cxl=True, settings=False)
    ids = [n.id for n in topo.nodes]
    assert ids[:3] == [0, 1, 2]
    e = expected(topo, 0, 2)
    assert e.distance == topo.node(0).distances[2] and e.local_distance == 10
    assert e.hmat_read_latency_ns == 250  # QEMU's hmat-lb for initiator 0 → node 2 (tests/vm topology)
    assert fixture_root("vm-cxl").is_dir()


def test_json_document_is_versioned_and_complete():
    res = result([cell(0, 0, 100.0, 10.0, dist=10), cell(0, 1, 160.0, 6.0, dist=21)])
    doc = json.loads(json.dumps(probe_document(res, probe_findings(res, None))))
    assert doc["schema"] == "numatune.probe/1"
    assert [(c["initiator"], c["target"]) for c in doc["cells"]] == [(0, 0), (0, 1)]
    assert doc["cells"][1]["latency_ns"] == {"median": 160.0, "min": 160.0, "samples": [160.0, 160.0]}
    assert doc["ratios"][0]["latency"] == 1.6 and doc["ratios"][0]["slit"] == 2.1
    assert "bytes read + bytes written" in doc["method"]["copy_bandwidth"]


def test_noise_in_a_vm_is_no_numa_effect_per_pair():
    # what TCG gave: 0 → 1 looks 18% slower, 1 → 0 looks 2x faster than local: noise, not NUMA
    cells = [cell(0, 0, 100.0, 10.0, dist=10), cell(0, 1, 118.0, 7.0, dist=21),
             cell(1, 1, 100.0, 10.0, dist=10), cell(1, 0, 44.0, 10.0, dist=21)]
    res = result(cells, initiators=(0, 1), targets=(0, 1))
    found = [f for f in probe_findings(res, None) if f.code == "NT503"]
    assert len(found) == 1 and found[0].subject == "node 0"
    assert "node 1 → node 0: no measurable NUMA effect" in found[0].message
    assert "only noise does" in found[0].message


def test_contradictory_figures_are_noise_not_numa():
    # TCG, second boot: 0 → 1 latency 3.9x by the median but read bandwidth 1.44x better by the best figure
    lat = Figure((390.0, 262.0), 390.0, 262.0)
    bw = Figure((10.2, 14.4), 10.2, 14.4)
    remote = cell(0, 1, 100.0, 10.0, dist=21)._replace(latency_ns=lat, read_gbps=bw)
    res = result([cell(0, 0, 100.0, 10.0, dist=10), remote])
    assert "NT503" in codes(res)
    # a real penalty agrees with itself on every figure
    slow = cell(0, 1, 100.0, 10.0, dist=21)._replace(latency_ns=Figure((160.0, 150.0), 160.0, 150.0),
                                                     read_gbps=Figure((6.0, 6.5), 6.0, 6.5))
    assert "NT503" not in codes(result([cell(0, 0, 100.0, 10.0, dist=10), slow]))


def test_a_buffer_under_four_times_the_caches_is_flagged():
    local = [cell(0, 0, 100.0, 10.0, dist=10), cell(0, 1, 160.0, 6.0, dist=21)]
    assert "NT511" not in codes(result(local, latency_bytes=128 << 20, llc_bytes=32 << 20))  # exactly 4x
    small = result(local, latency_bytes=4 << 20, llc_bytes=32 << 20)
    found = [f for f in probe_findings(small, None) if f.code == "NT511"]
    assert len(found) == 1 and "4 MiB" in found[0].message and "--size 128M" in found[0].fix
    # memory-side caches (HMAT) count: 128 MiB is no longer 4x of 32 MiB LLC + 64 MiB side cache
    side = result(local, latency_bytes=128 << 20, llc_bytes=32 << 20, memory_side_cache_bytes=64 << 20)
    fixes = [f.fix for f in probe_findings(side, None) if f.code == "NT511"]
    assert fixes == ["drop --size, or give --size 384M or more"]
    # unknown LLC or no latency measured: nothing to judge
    assert "NT511" not in codes(result(local, latency_bytes=4 << 20, llc_bytes=None))
    assert "NT511" not in codes(result(local, latency_bytes=4 << 20, latency_available=False,
                                       latency_reason="no C compiler"))
