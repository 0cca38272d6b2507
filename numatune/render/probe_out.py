"""Probe output: the text matrices in Intel MLC's layout (rows = initiator node, columns = memory node)
and the `numatune.probe/1` JSON document."""

from __future__ import annotations

from numatune.analysis.probe import ratios
from numatune.model.findings import Finding
from numatune.model.probe import Cell, Figure, GpuProbe, ProbeResult
from numatune.render.envelope import envelope

METHOD = {
    "latency": "idle load-to-use latency: one pointer chase (dependent 8-byte loads, one per 64-byte line) over "
               "a random cycle, lines in random order within 2 MiB groups and groups in random order; compiled "
               "helper; first sample dropped; median and min of the rest",
    "read_bandwidth": "all threads read their own buffer (16-byte loads, compiled helper); bytes counted = bytes "
                      "read",
    "copy_bandwidth": "all threads memcpy their own buffer (ctypes.memmove = glibc memcpy); bytes counted = bytes "
                      "read + bytes written (write-allocate traffic not counted)",
    "unit": "GB/s with 1 GB = 1e9 bytes; ns",
    "threads": "one per physical core of the initiator node, pinned; buffers bound to the target with mbind and "
               "first-touched by their thread",
    "prefetchers": "left on (unprivileged: no MSR writes); random order is what defeats them",
    "verification": "every page of every buffer checked with move_pages before timing",
}


def _mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 1048576:.0f} MiB"


def _grid(result: ProbeResult, value, fmt: str) -> list[str]:  # noqa: ANN001 - value: Cell -> str|float|None
    by = {(c.initiator, c.target): c for c in result.cells}
    cells: dict[tuple[int, int], str] = {}
    for i in result.initiators:
        for t in result.targets:
            c = by.get((i, t))
            if c is None:
                cell = "-"
            elif c.status == "failed":
                cell = "FAILED"
            elif c.status == "skipped":
                cell = "skipped"
            else:
                v = value(c)
                cell = "n/a" if v is None else (fmt.format(v) if isinstance(v, float | int) else str(v))
            cells[(i, t)] = cell
    width = max([10, *(len(v) + 2 for v in cells.values())])
    lines = ["                Memory node", "Initiator " + "".join(f"{t:>{width}}" for t in result.targets)]
    for i in result.initiators:
        lines.append(f"{i:>9} " + "".join(f"{cells[(i, t)]:>{width}}" for t in result.targets))
    return lines


def render_text(result: ProbeResult, findings: list[Finding], gpu: GpuProbe | None = None) -> str:
    out = [f"numatune probe: {len(result.initiators)} initiator node(s) × {len(result.targets)} memory node(s), "
           f"{result.elapsed:.1f} s (budget {result.time_budget:g} s); buffers {_mib(result.latency_bytes)} "
           f"(last-level cache {_mib(result.llc_bytes)})", ""]
    if result.latency_available:
        out.append("Idle latency (ns, median; random pointer chase, prefetchers on)")
        out += _grid(result, lambda c: c.latency_ns.median if c.latency_ns else None, "{:.1f}")
    else:
        out.append(f"Idle latency: unavailable — {result.latency_reason}")
    out.append("")
    if result.latency_available:
        out.append("Read bandwidth (GB/s = 1e9 B/s, median; bytes read; one thread per core)")
        out += _grid(result, lambda c: c.read_gbps.median if c.read_gbps else None, "{:.2f}")
    else:
        out.append("Read bandwidth: unavailable (needs the compiled helper)")
    out.append("")
    out.append("Copy bandwidth (GB/s, median; glibc memcpy; bytes read + written; one thread per core)")
    out += _grid(result, lambda c: c.copy_gbps.median if c.copy_gbps else None, "{:.2f}")
    out.append("")
    out.append("Expected (SLIT distance / HMAT read latency ns / HMAT read bandwidth MB/s; - = not given)")

    def claim(c: Cell) -> str:
        e = c.expected
        parts = [e.distance, e.hmat_read_latency_ns, e.hmat_read_bandwidth_mbps]
        return "/".join("-" if p is None else str(p) for p in parts)

    out += _grid(result, claim, "{}")
    rows = ratios(result)
    if rows:
        out += ["", "Measured ratios (target / local):"]
        for r in rows:
            bits = []
            for key, label in (("latency", "latency"), ("read_bandwidth", "read bw"), ("copy_bandwidth", "copy bw")):
                if r[key] is not None:
                    bits.append(f"{label} {r[key]:.2f}x")
            if r.get("slit") is not None:
                bits.append(f"SLIT {r['slit']:.1f}x")
            out.append(f"  node {r['initiator']} → node {r['target']} ({r['kind']}): " + ", ".join(bits))
    left_out = [c for c in result.cells if c.status != "failed" and c.reason]
    if left_out:
        out += ["", "Not measured:"]
        out += [f"  node {c.initiator} → node {c.target}: {c.reason}" for c in left_out]
    out += ["", *cxl_traffic_lines(result.cxl_traffic, result.cxl_traffic_note)]
    pages = [c for c in result.cells if c.placement is not None]
    if pages:
        shares = [c.placement.huge_share for c in pages if c.placement.huge_share is not None]
        thp = f"{min(shares) * 100:.0f}-{max(shares) * 100:.0f}% in 2 MiB pages" if shares else "page size unknown"
        ok = sum(1 for c in pages if c.placement.ok)
        out += ["", f"Placement: {ok} of {len(pages)} pair(s) verified page by page with move_pages before timing; "
                    f"{thp}"]
    if gpu is not None:
        out += ["", render_gpu_text(gpu).rstrip("\n")]
    if findings:
        out += ["", "Findings:"]
        for f in findings:
            out.append(f"  {f.code} {f.severity.value}: {f.message}")
            if f.fix:
                out.append(f"        fix: {f.fix}")
    return "\n".join(out) + "\n"


def cxl_traffic_lines(traffic: tuple, note: str | None) -> list[str]:
    """CXL traffic per device (from its CXL PMU), or why it is not shown."""
    if not traffic:
        return [f"CXL traffic per device: not measured — {note or 'no CXL PMU'}"]
    lines = ["CXL traffic per device (GB/s, from the device's CXL PMU: 64-byte M2S reads and writes over "
             f"{traffic[0].seconds:.1f} s, every process)"]
    for t in traffic:
        read = "-" if t.read_gbps is None else f"{t.read_gbps:.3f}"
        write = "-" if t.write_gbps is None else f"{t.write_gbps:.3f}"
        lines.append(f"  {t.memdev or '?'} ({t.pmu}): read {read}, write {write}")
    return lines


def cxl_traffic_json(traffic: tuple, note: str | None) -> dict[str, object]:
    return {
        "devices": [{"pmu": t.pmu, "memdev": t.memdev, "seconds": round(t.seconds, 3), "read_lines": t.read_lines,
                     "write_lines": t.write_lines, "read_gbps": t.read_gbps, "write_gbps": t.write_gbps}
                    for t in traffic],
        "unavailable_reason": None if traffic else note,
    }


def _fig(f: Figure | None, best: str) -> dict[str, object] | None:
    if f is None:
        return None
    return {"median": round(f.median, 3), best: round(f.best, 3), "samples": [round(x, 3) for x in f.samples]}


def probe_document(result: ProbeResult, findings: list[Finding], gpu: GpuProbe | None = None) -> dict[str, object]:
    cells = []
    for c in result.cells:
        p = c.placement
        cells.append({
            "initiator": c.initiator,
            "target": c.target,
            "target_kind": c.target_kind,
            "cpu": c.cpu,
            "threads": c.threads,
            "status": c.status,
            "reason": c.reason,
            "placement": None if p is None else {
                "verified": p.ok, "pages": p.pages, "on_target": p.on_target,
                "elsewhere": {str(k): v for k, v in sorted(p.elsewhere.items())},
                "huge_page_share": None if p.huge_share is None else round(p.huge_share, 3),
            },
            "latency_ns": _fig(c.latency_ns, "min"),
            "read_gbps": _fig(c.read_gbps, "max"),
            "copy_gbps": _fig(c.copy_gbps, "max"),
            "expected": {
                "distance": c.expected.distance,
                "local_distance": c.expected.local_distance,
                "hmat_read_latency_ns": c.expected.hmat_read_latency_ns,
                "hmat_read_bandwidth_mbps": c.expected.hmat_read_bandwidth_mbps,
            },
        })
    rows = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in ratios(result)]
    return {
        **envelope("probe"),
        "host": result.host,
        "initiators": list(result.initiators),
        "targets": list(result.targets),
        "latency_available": result.latency_available,
        "latency_unavailable_reason": result.latency_reason,
        "buffer_bytes": result.latency_bytes,
        "llc_bytes": result.llc_bytes,
        "memory_side_cache_bytes": result.memory_side_cache_bytes,
        "time_budget_s": result.time_budget,
        "elapsed_s": round(result.elapsed, 3),
        "method": METHOD,
        "kernel": {"numa_balancing": result.numa_balancing, "demotion_enabled": result.demotion_enabled,
                   "transparent_hugepage": result.transparent_hugepage},
        "cells": cells,
        "ratios": rows,
        "cxl_traffic": cxl_traffic_json(result.cxl_traffic, result.cxl_traffic_note),
        "gpu": None if gpu is None else gpu_document(gpu),
        "findings": [{"code": f.code, "severity": f.severity.value, "message": f.message, "fix": f.fix,
                      "subject": f.subject} for f in findings],
    }


GPU_METHOD = {
    "copy": "torch Tensor.copy_ between a pinned host buffer and a GPU buffer, timed with CUDA events; one "
            "warm-up copy per size, then the samples; median and max",
    "unit": "GB/s with 1 GB = 1e9 bytes; bytes counted = bytes copied (one direction)",
    "placement": "host buffer bound to the node with mbind, first-touched from the node's CPUs, checked page by "
                 "page with move_pages, then registered with cudaHostRegister and checked again (pinning "
                 "migrates pages out of ZONE_MOVABLE)",
    "near": "the GPU's NUMA node from sysfs (numa_node of its PCI device); ratio = far node / near node at the "
            "largest size",
}


def gpu_document(gp: GpuProbe) -> dict[str, object]:
    """The `gpu` object of numatune.probe/1."""
    if not gp.measured:
        return {"measured": False, "reason": gp.reason}
    from numatune.analysis.probe import gpu_ratios

    def figs(d: dict[int, Figure]) -> dict[str, object]:
        return {str(s): _fig(f, "max") for s, f in sorted(d.items())}

    return {
        "measured": True,
        "reason": None,
        "runtime": gp.runtime,
        "register_api": gp.register_api,
        "sizes": list(gp.sizes),
        "samples": gp.samples,
        "elapsed_s": round(gp.elapsed, 3),
        "method": GPU_METHOD,
        "gpus": [{"index": g.index, "name": g.name, "bdf": g.bdf, "numa_node": g.numa_node,
                  "numa_node_from": g.node_from, "memory_node": g.memory_node} for g in gp.gpus],
        "pairs": [{
            "node": p.node, "gpu": p.gpu, "cpu_node": p.cpu_node, "status": p.status, "reason": p.reason,
            "placement": None if p.placement is None else {
                "verified": p.placement.ok, "pages": p.placement.pages, "on_node": p.placement.on_target,
                "elsewhere": {str(k): v for k, v in sorted(p.placement.elsewhere.items())}},
            "h2d_gbps": figs(p.h2d), "d2h_gbps": figs(p.d2h),
        } for p in gp.pairs],
        "ratios": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in gpu_ratios(gp)],
    }


def gpu_from_document(d: dict) -> GpuProbe:
    """A GpuProbe back from its `gpu` JSON object (saved probe output, test data)."""
    from numatune.model.probe import CellPlacement, GpuDevice, GpuPair

    if not d.get("measured"):
        return GpuProbe(False, d.get("reason"), None, None, (), 0, (), (), 0.0)

    def figs(m: dict) -> dict[int, Figure]:
        return {int(s): Figure(tuple(f["samples"]), f["median"], f["max"]) for s, f in m.items()}

    pairs = []
    for p in d["pairs"]:
        pl = p["placement"]
        place = None if pl is None else CellPlacement(pl["verified"], pl["pages"], pl["on_node"],
                                                      {int(k): v for k, v in pl["elsewhere"].items()}, None)
        pairs.append(GpuPair(p["node"], p["gpu"], p["status"], p["reason"], place, figs(p["h2d_gbps"]),
                             figs(p["d2h_gbps"]), p.get("cpu_node")))
    return GpuProbe(True, None, d["runtime"], d["register_api"], tuple(d["sizes"]), d["samples"],
                    tuple(GpuDevice(g["index"], g["name"], g["bdf"], g["numa_node"], g.get("numa_node_from"),
                                    g.get("memory_node")) for g in d["gpus"]),
                    tuple(pairs), d["elapsed_s"])


def render_gpu_text(gp: GpuProbe) -> str:
    if not gp.measured:
        return f"Host↔GPU copy bandwidth: not measured — {gp.reason}\n"
    from numatune.analysis.probe import gpu_ratios

    def size(n: int) -> str:
        return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"

    out = [f"Host↔GPU copy bandwidth (GB/s = 1e9 B/s, median of {gp.samples} after a warm-up; pinned host buffer "
           f"placed on the node and verified before and after {gp.register_api}; {gp.runtime})"]
    by_index = {g.index: g for g in gp.gpus}
    for g in gp.gpus:
        how = "" if g.node_from in (None, "sysfs numa_node") else f" ({g.node_from}: sysfs numa_node is -1)"
        own = "" if g.memory_node in (None, g.numa_node) else f"; its own memory is node {g.memory_node}"
        out.append(f"  GPU {g.index}: {g.name} at {g.bdf or 'unknown PCI address'}, NUMA node "
                   f"{'unknown' if g.numa_node is None else g.numa_node}{how}{own}")
    head = f"{'node':>6} {'GPU':>4} {'bytes':>8} {'H2D':>8} {'D2H':>8}"
    out.append(head)
    for p in gp.pairs:
        issued = "" if p.cpu_node in (None, p.node) else f"  (no CPUs: copies issued from node {p.cpu_node}'s CPUs)"
        if p.status != "ok":
            out.append(f"{p.node:>6} {p.gpu:>4}  {p.status.upper()}: {p.reason}{issued}")
            continue
        g = by_index.get(p.gpu)
        for s in gp.sizes:
            marks = []
            if s == max(gp.sizes) and g is not None:
                marks += ["GPU's node"] if g.numa_node == p.node else []
                marks += ["the GPU's own memory"] if g.memory_node == p.node and g.memory_node != g.numa_node else []
            mark = f"  ({', '.join(marks)})" if marks else ""
            note = issued if s == min(gp.sizes) else ""
            out.append(f"{p.node:>6} {p.gpu:>4} {size(s):>8} {p.h2d[s].median:>8.2f} {p.d2h[s].median:>8.2f}"
                       f"{mark}{note}")
    rows = gpu_ratios(gp)
    if rows:
        out.append(f"Far/near ratios ({size(max(gp.sizes))} copies):")
        for r in rows:
            out.append(f"  GPU {r['gpu']}: node {r['far_node']} / node {r['near_node']}: H2D {r['h2d']:.2f}x, "
                       f"D2H {r['d2h']:.2f}x")
    else:
        nodes = sorted({p.node for p in gp.pairs})
        out.append(f"Far/near ratio: none — only node {nodes[0] if len(nodes) == 1 else nodes} was measured, "
                   "no far node to compare" if len(nodes) <= 1 else
                   "Far/near ratio: none — fewer than two nodes measured per GPU")
    return "\n".join(out) + "\n"
