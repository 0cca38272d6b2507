"""probe --gpu's result, JSON, text and NT510, on real output from a lent H100 (tests/data/README.md).

The machine had one NUMA node, so the far/near logic is also checked on a two-node result derived from
the real pair (labelled where it is built): the real figures for node 0 and the same figures scaled for a
hypothetical node 1.
"""

from __future__ import annotations

import json
import statistics

from numatune.analysis.probe import GPU_FAR, gpu_findings, gpu_ratios
from numatune.model.probe import Figure, GpuDevice, GpuProbe
from numatune.render.probe_out import gpu_document, gpu_from_document, render_gpu_text
from tests.conftest import PROJECT

DATA = PROJECT / "tests" / "data"
MIB256 = 256 << 20


def real() -> tuple[dict, GpuProbe]:
    doc = json.loads((DATA / "probe-gpu-h100.json").read_text())
    return doc, gpu_from_document(doc["gpu"])


def test_the_real_document_round_trips():
    doc, gp = real()
    # recorded before probe said the GPU's own memory node and each pair's issuing CPU node: both unknown
    want = json.loads(json.dumps(doc["gpu"]))
    for g in want["gpus"]:
        g["memory_node"] = None
    for p in want["pairs"]:
        p["cpu_node"] = None
    assert gpu_document(gp) == want
    assert gpu_document(gpu_from_document(want)) == want


def test_the_real_h100_run_is_placed_pinned_and_plausible():
    doc, gp = real()
    assert gp.measured and gp.register_api == "torch.cuda.cudart().cudaHostRegister"
    # the VM's sysfs says numa_node -1 (probe-gpu-h100.env.txt): the node is the topology reader's inference
    h100 = GpuDevice(0, "NVIDIA H100 80GB HBM3", "0000:00:06.0", 0, "inferred from the only node with CPUs")
    assert gp.gpus == (h100,)
    (pair,) = gp.pairs
    assert pair.status == "ok" and pair.node == 0 and pair.placement.ok
    assert pair.placement.pages == pair.placement.on_target == MIB256 // 4096
    for figs in (pair.h2d, pair.d2h):
        assert sorted(figs) == [4 << 20, 64 << 20, MIB256]
        for f in figs.values():
            assert len(f.samples) == gp.samples == 5
            assert f.median == statistics.median(f.samples) and f.best == max(f.samples)
            assert 1 < f.median < 64  # below PCIe 5.0 x16's 63 GB/s raw, far above a pageable copy's floor
    # a single node: nothing far to compare, no finding, and the probe matrix says the same (NT501)
    assert gpu_ratios(gp) == [] and gpu_findings(gp) == []
    assert doc["gpu"]["ratios"] == [] and [f["code"] for f in doc["findings"]] == ["NT501"]


def test_text_shows_every_size_and_the_gpu_node():
    _, gp = real()
    text = render_gpu_text(gp)
    assert ("GPU 0: NVIDIA H100 80GB HBM3 at 0000:00:06.0, NUMA node 0 (inferred from the only node with CPUs: "
            "sysfs numa_node is -1)") in text
    assert "1e9 B/s" in text and "torch.cuda.cudart().cudaHostRegister" in text
    p = gp.pairs[0]
    for s, label in ((4 << 20, "4 MiB"), (64 << 20, "64 MiB"), (MIB256, "256 MiB")):
        line = next(row for row in text.splitlines() if f" {label} " in row)
        assert line.split()[:2] == ["0", "0"]
        assert f"{p.h2d[s].median:.2f}" in line and f"{p.d2h[s].median:.2f}" in line
    assert "only node 0 was measured, no far node" in text


def _two_nodes(scale: float, gpu_node: int | None = 0) -> GpuProbe:
    """Derived, not measured: the real node-0 pair plus a node 1 at `scale` times its figures."""
    _, gp = real()
    p = gp.pairs[0]

    def scaled(d: dict[int, Figure]) -> dict[int, Figure]:
        return {s: Figure(tuple(x * scale for x in f.samples), f.median * scale, f.best * scale) for s, f in d.items()}

    far = p._replace(node=1, h2d=scaled(p.h2d), d2h=scaled(p.d2h))
    return gp._replace(pairs=(p, far), gpus=(gp.gpus[0]._replace(numa_node=gpu_node),))


def test_a_far_node_much_slower_is_nt510():
    gp = _two_nodes(0.6)
    (r,) = gpu_ratios(gp)
    assert (r["near_node"], r["far_node"], r["near_from"]) == (0, 1, "topology")
    assert abs(r["h2d"] - 0.6) < 1e-9 and abs(r["d2h"] - 0.6) < 1e-9
    (f,) = gpu_findings(gp)
    assert f.code == "NT510" and "node 1 copies at 0.60x (H2D)" in f.message and "its own node" in f.message
    assert "Far/near ratios (256 MiB copies):" in render_gpu_text(gp)
    assert "node 1 / node 0: H2D 0.60x, D2H 0.60x" in render_gpu_text(gp)


def test_a_far_node_within_the_threshold_is_no_finding():
    assert gpu_findings(_two_nodes(GPU_FAR + 0.05)) == []
    assert gpu_ratios(_two_nodes(GPU_FAR + 0.05))[0]["far_node"] == 1


def test_an_unknown_gpu_node_takes_the_fastest_node_as_near():
    gp = _two_nodes(1.5, gpu_node=None)  # node 1 faster: it is the near one
    (r,) = gpu_ratios(gp)
    assert (r["near_node"], r["far_node"], r["near_from"]) == (1, 0, "measured")
    (f,) = gpu_findings(gp)
    assert "its node is unknown" in f.message


def test_a_failed_pair_is_shown_not_timed():
    _, gp = real()
    bad = gp.pairs[0]._replace(node=1, status="failed", reason="pinning moved pages off the node", h2d={}, d2h={})
    gp = gp._replace(pairs=(gp.pairs[0], bad))
    assert gpu_ratios(gp) == []
    assert "     1    0  FAILED: pinning moved pages off the node" in render_gpu_text(gp)
    assert gpu_document(gp)["pairs"][1]["h2d_gbps"] == {}


def test_not_measured_is_one_clear_line_and_a_two_key_object():
    gp = gpu_from_document({"measured": False, "reason": "no CUDA runtime importable: torch is not installed"})
    assert gpu_document(gp) == {"measured": False, "reason": "no CUDA runtime importable: torch is not installed"}
    assert render_gpu_text(gp) == ("Host↔GPU copy bandwidth: not measured — no CUDA runtime importable: torch is "
                                   "not installed\n")


def _grace(hbm_scale: float, far_scale: float | None = None) -> GpuProbe:
    """Derived, not measured: a Grace-shaped result built from the real pair. Node 0 is the GPU's CPU node
    (the real figures), node 1 the GPU's own HBM (CPU-less: copies issued from node 0's CPUs) at `hbm_scale`,
    and, with `far_scale`, node 2 a second Grace at that scale."""
    _, gp = real()
    p = gp.pairs[0]._replace(cpu_node=0)

    def scaled(d: dict[int, Figure], k: float) -> dict[int, Figure]:
        return {s: Figure(tuple(x * k for x in f.samples), f.median * k, f.best * k) for s, f in d.items()}

    pairs = [p, p._replace(node=1, h2d=scaled(p.h2d, hbm_scale), d2h=scaled(p.d2h, hbm_scale))]
    if far_scale is not None:
        pairs.append(p._replace(node=2, cpu_node=2, h2d=scaled(p.h2d, far_scale), d2h=scaled(p.d2h, far_scale)))
    gpu = GpuDevice(0, "NVIDIA GH200 480GB", "0009:01:00.0", 0, "inferred from GPU memory node 1: its nearest "
                    "node with CPUs (SLIT)", 1)
    return gp._replace(gpus=(gpu,), pairs=tuple(pairs))


def test_a_grace_gpu_text_names_its_own_memory_and_the_issuing_cpus():
    text = render_gpu_text(_grace(0.3))
    assert "NUMA node 0 (inferred from GPU memory node 1: its nearest node with CPUs (SLIT): sysfs numa_node is " \
           "-1); its own memory is node 1" in text
    rows = [r.split() for r in text.splitlines() if r.startswith("     ")]
    hbm = [" ".join(r) for r in rows if r[:2] == ["1", "0"]]
    assert len(hbm) == 3
    assert hbm[0].endswith("(no CPUs: copies issued from node 0's CPUs)")
    assert hbm[-1].endswith("(the GPU's own memory)")
    assert [" ".join(r) for r in rows if r[:2] == ["0", "0"]][-1].endswith("(GPU's node)")
    assert "copies issued" not in " ".join(" ".join(r) for r in rows if r[0] == "0")


def test_the_gpus_own_memory_is_neither_near_nor_far():
    gp = _grace(0.3)  # even far slower than the CPU node, it is no misplaced pinned host buffer
    assert gpu_ratios(gp) == [] and gpu_findings(gp) == []
    assert "fewer than two nodes measured per GPU" in render_gpu_text(gp)
    gp = _grace(0.3, far_scale=0.5)  # a second Grace's DRAM is far, and is the one compared
    (r,) = gpu_ratios(gp)
    assert (r["near_node"], r["far_node"]) == (0, 2)
    (f,) = gpu_findings(gp)
    assert "node 2 copies at 0.50x" in f.message


def test_a_grace_document_round_trips_with_memory_and_issuing_nodes():
    doc = gpu_document(_grace(0.3))
    assert doc["gpus"][0]["memory_node"] == 1 and [p["cpu_node"] for p in doc["pairs"]] == [0, 0]
    assert gpu_document(gpu_from_document(doc)) == doc
