"""Probe analysis (pure): what the firmware claims beside what was measured, the ratios, the findings.

Finding codes NT501-NT511 are declared here, in the project's one registry (`register`).
"""

from __future__ import annotations

from numatune.model.findings import REGISTRY, Finding, Severity, register
from numatune.model.probe import Cell, Expected, GpuProbe, ProbeResult
from numatune.model.topology import NumaNode, Topology

# The probe's finding codes, declared once in the project's registry (group "probe").
_P = "probe"
NT501 = register("NT501", Severity.INFO, _P, "one memory node: nothing to compare", """
    The probe measured a node with one memory node: local figures only; NUMA placement cannot matter here.""")
NT502 = register("NT502", Severity.WARNING, _P, "firmware (SLIT/HMAT) disagrees with the measurement", """
    SLIT distances or HMAT latency/bandwidth claim one order of nodes and the measured figures show another (or
    a node the firmware calls far measures as near): trust the measurement when placing memory, and report the
    table to the vendor.""")
NT503 = register("NT503", Severity.INFO, _P, "no measurable NUMA effect (VM, fake NUMA or identical memory)", """
    Remote and local figures of a pair do not agree that remote memory is slower (latency medians and minimums
    within 1.1x, no bandwidth loss): typical of a VM without vNUMA pinning or fake NUMA; binding will not pay.""")
NT504 = register("NT504", Severity.INFO, _P, "a CXL node is faster than remote DRAM", """
    A CXL memory node measured faster than the remote socket's DRAM from an initiator: it can take spill
    before remote DRAM does.""")
NT505 = register("NT505", Severity.INFO, _P, "a CXL node is slower than remote DRAM", """
    A CXL memory node measured slower than remote DRAM (the usual case, 150-220 ns against 80-100 ns local):
    keep latency-bound data (optimizer state) off it.""")
NT506 = register("NT506", Severity.WARNING, _P, "automatic NUMA balancing or demotion was on during the probe", """
    kernel.numa_balancing or memory-tier demotion can move pages while the probe runs; figures may mix nodes.
    Turn them off for the measurement.""")
NT507 = register("NT507", Severity.ERROR, _P, "a buffer's pages were not on the node asked: the pair was not timed", """
    move_pages showed some of a buffer's pages off the target node (memory full, cpuset mems, policy
    refused): that pair is reported as failed instead of timed.""")
NT508 = register("NT508", Severity.WARNING, _P, "latency unavailable: the compiled helper could not be built", """
    No C compiler (or the build failed): interpreted Python cannot resolve memory latency, so none is shown;
    copy bandwidth is still measured. Install gcc or set CC.""")
NT509 = register("NT509", Severity.INFO, _P, "buffers not in transparent huge pages: latency includes TLB misses", """
    The latency buffers did not get transparent huge pages (THP disabled or fragmented memory): the chase
    includes page-walk time.""")
NT510 = register("NT510", Severity.WARNING, _P, "a GPU copies much slower from a far node's pinned memory", """
    probe --gpu measured host-to-device or device-to-host copy bandwidth from a pinned buffer on another node
    well below the bandwidth from the GPU's own node (below 0.8x): the wrong-socket penalty. Keep the pinned
    staging buffers (DataLoader pin_memory, NCCL/RDMA buffers) of the rank driving that GPU on the GPU's node
    (numatune launch does).""")
NT511 = register("NT511", Severity.WARNING, _P, "the latency buffer is small enough to stay in the caches", """
    The pointer chase's buffer is under 4x the last-level cache plus the memory-side caches: a good part of
    its loads can be served by caches, so the latency shown is partly cache latency, not memory latency.
    Drop --size (the default is 4x the caches or 64 MiB, whichever is larger) or give a larger one.""")
CACHE_FACTOR = 4  # a chase buffer under this many times the caches is partly cache-resident (NT511)
GPU_FAR = 0.8  # far/near host↔GPU copy bandwidth below this is a wrong-socket penalty (NT510)

FLAT_LATENCY = 1.10  # remote/local latency below this (and bandwidth within 10%) is no NUMA effect
SLIT_SAYS_FAR = 1.3  # SLIT ratio from which a remote node should be visibly slower


def finding(code: str, message: str, fix: str = "", subject: str = "") -> Finding:
    return REGISTRY[code](message, fix, subject)


def hmat_for(target: NumaNode, initiator: int) -> tuple[int | None, int | None]:
    """(read latency ns, read bandwidth MB/s) HMAT gives for this initiator (CPU class first), else Nones."""
    return target.hmat_from(initiator)


def expected(topo: Topology, initiator: int, target: int) -> Expected:
    src, dst = topo.node(initiator), topo.node(target)
    lat, bw = hmat_for(dst, initiator) if dst else (None, None)
    return Expected(
        distance=src.distances.get(target) if src else None,
        local_distance=src.distances.get(initiator) if src else None,
        hmat_read_latency_ns=lat,
        hmat_read_bandwidth_mbps=bw,
    )


def _cell(result: ProbeResult, i: int, t: int) -> Cell | None:
    for c in result.cells:
        if c.initiator == i and c.target == t and c.status == "ok":
            return c
    return None


def ratios(result: ProbeResult) -> list[dict[str, object]]:
    """Measured target/local per (initiator, target ≠ initiator): latency ×, read and copy bandwidth ×."""
    out = []
    for i in result.initiators:
        local = _cell(result, i, i)
        if local is None:
            continue
        for t in result.targets:
            c = _cell(result, i, t)
            if t == i or c is None:
                continue
            kind = "cxl/local" if c.target_kind == "cxl" else ("remote/local" if c.target_kind == "dram"
                                                                else f"{c.target_kind}/local")
            row: dict[str, object] = {"initiator": i, "target": t, "kind": kind,
                                      "latency": None, "read_bandwidth": None, "copy_bandwidth": None,
                                      "latency_best": None, "read_bandwidth_best": None,
                                      "copy_bandwidth_best": None}
            for key, attr in (("latency", "latency_ns"), ("read_bandwidth", "read_gbps"),
                              ("copy_bandwidth", "copy_gbps")):
                mine, home = getattr(c, attr), getattr(local, attr)
                if mine and home:
                    row[key] = mine.median / home.median
                    row[key + "_best"] = mine.best / home.best  # min latency, max bandwidth: least disturbed
            if c.expected.distance and c.expected.local_distance:
                row["slit"] = c.expected.distance / c.expected.local_distance
            out.append(row)
    return out


def probe_findings(result: ProbeResult, topo: Topology) -> list[Finding]:
    out: list[Finding] = []
    if len(result.targets) < 2:
        out.append(finding("NT501", f"only node {result.targets[0] if result.targets else '?'} has memory here: "
                           "probe measured local memory only, there is nothing to compare", subject="node"))
    if not result.latency_available:
        out.append(finding("NT508", f"latency not measured: {result.latency_reason}",
                           "install a C compiler (apt-get install gcc) and run probe again"))
    if result.numa_balancing or result.demotion_enabled:
        on = [w for w, v in (("automatic NUMA balancing", result.numa_balancing),
                             ("demotion to slower tiers", result.demotion_enabled)) if v]
        out.append(finding("NT506", " and ".join(on) + " was on during the probe: the kernel may move pages "
                           "mid-run (every buffer was checked before timing, not after)",
                           "for a clean matrix: sysctl kernel.numa_balancing=0; echo false > "
                           "/sys/kernel/mm/numa/demotion_enabled (root)", subject="kernel"))
    for c in result.cells:
        if c.status == "failed" and c.placement is not None:
            where = ", ".join(f"{'node ' + str(k) if k >= 0 else 'status ' + str(k)}: {v}"
                              for k, v in sorted(c.placement.elsewhere.items()))
            out.append(finding("NT507", f"node {c.initiator} → node {c.target}: {c.placement.on_target} of "
                               f"{c.placement.pages} pages on node {c.target} ({where}); not timed",
                               "free memory on the target node, or check cpuset.mems", f"node {c.target}"))
    out += _cache_resident(result)
    shares = [c.placement.huge_share for c in result.cells
              if c.placement is not None and c.placement.huge_share is not None]
    if shares and max(shares) < 0.5:
        out.append(finding("NT509", f"buffers were in 4 KiB pages (THP {result.transparent_hugepage or 'unknown'}): "
                           "latency includes TLB misses", "echo madvise > /sys/kernel/mm/transparent_hugepage/"
                           "enabled (root)", "kernel"))
    rows = ratios(result)
    # CXL is judged against remote DRAM below (NT504/NT505): "no NUMA effect" is about the other nodes
    measured = [r for r in rows if r["kind"] != "cxl/local"
                and (r["latency"] is not None or r["read_bandwidth"] is not None)]
    flat = [r for r in measured if _flat(r)]
    if measured and len(flat) == len(measured):
        worst = max((r["latency"] for r in measured if r["latency"] is not None), default=None)
        shown = f" (worst latency ratio {worst:.2f}x)" if worst is not None else ""
        out.append(finding("NT503", f"no measurable NUMA effect: no non-CXL node is consistently slower than "
                           f"local{shown}"
                           f"{_faster(flat)}; a VM, fake NUMA (numa=fake) or identical memory behind every node",
                           "placement will not change speed on this machine; measure on the real hardware"))
    else:
        for r in flat:
            out.append(finding("NT503", f"node {r['initiator']} → node {r['target']}: no measurable NUMA effect "
                               f"(latency {_x(r['latency'])}, read {_x(r['read_bandwidth'])}, copy "
                               f"{_x(r['copy_bandwidth'])} of local){_faster([r])}",
                               "placement between these nodes will not change speed", f"node {r['target']}"))
    for r in rows:
        slit = r.get("slit")
        lat = r["latency"]
        if slit is None or lat is None:
            continue
        if (slit >= SLIT_SAYS_FAR and lat < FLAT_LATENCY) or (slit < FLAT_LATENCY and lat >= SLIT_SAYS_FAR):
            out.append(finding("NT502", f"node {r['initiator']} → node {r['target']}: SLIT says {slit:.1f}x local, "
                               f"measured latency {lat:.2f}x", "trust the measurement; report the SLIT to the "
                               "vendor (BIOS)", f"node {r['target']}"))
    for c in result.cells:
        local = _cell(result, c.initiator, c.initiator)
        lat_h = c.expected.hmat_read_latency_ns
        lat_l = local.expected.hmat_read_latency_ns if local else None
        if c.status != "ok" or not c.latency_ns or not local or not local.latency_ns or not lat_h or not lat_l \
                or c.target == c.initiator:
            continue
        claim = lat_h / lat_l
        got = c.latency_ns.median / local.latency_ns.median
        if got > 1.5 * claim or got < claim / 1.5:
            out.append(finding("NT502", f"node {c.initiator} → node {c.target}: HMAT says {claim:.2f}x local latency "
                               f"({lat_h} vs {lat_l} ns), measured {got:.2f}x", "trust the measurement; "
                               "weighted-interleave weights from HMAT may be wrong", f"node {c.target}"))
    out += _cxl_vs_remote(result, rows)
    return out


def cache_floor(result: ProbeResult) -> int | None:
    """The smallest chase buffer that walks memory rather than caches: CACHE_FACTOR x (last-level cache +
    memory-side caches); None when the last-level cache is unknown."""
    if result.llc_bytes is None:
        return None
    return CACHE_FACTOR * (result.llc_bytes + (result.memory_side_cache_bytes or 0))


def _cache_resident(result: ProbeResult) -> list[Finding]:
    floor = cache_floor(result)
    if not result.latency_available or floor is None or result.latency_bytes >= floor:
        return []
    side = result.memory_side_cache_bytes or 0
    caches = f"last-level cache {result.llc_bytes >> 20} MiB" + (f" + memory-side caches {side >> 20} MiB"
                                                                  if side else "")
    return [finding("NT511", f"the latency buffer ({result.latency_bytes >> 20} MiB) is under {CACHE_FACTOR}x the "
                    f"caches ({caches}): part of every sample can be served by caches, so latency reads low",
                    f"drop --size, or give --size {-(-floor // (1 << 20))}M or more", "probe")]


def _flat(r: dict[str, object]) -> bool:
    """No measurable NUMA effect for this pair. An effect is remote latency at least 1.1x local by both the
    median and the best figure (min latency), with no bandwidth (median or best) measured more than 1.1x
    better remote: real remote memory is slower on every count, while noise (a VM, a busy machine)
    contradicts itself from one figure to the next."""
    lats = [r[k] for k in ("latency", "latency_best") if r[k] is not None]
    bws = [r[k] for k in ("read_bandwidth", "copy_bandwidth", "read_bandwidth_best", "copy_bandwidth_best")
           if r[k] is not None]
    if lats:
        slower = all(v >= FLAT_LATENCY for v in lats)  # type: ignore[operator]
        return not slower or any(v > FLAT_LATENCY for v in bws)  # type: ignore[operator]
    return all(v > 1 / FLAT_LATENCY for v in bws)  # type: ignore[operator]


def _faster(rows: list[dict[str, object]]) -> str:
    """A remote node measured clearly faster than local is noise (a VM, a busy machine), never hardware."""
    if any(r["latency"] is not None and r["latency"] < 1 / FLAT_LATENCY for r in rows):  # type: ignore[operator]
        return "; remote memory measured faster than local, which only noise does (a VM, or a busy machine)"
    return ""


def _x(v: object) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _cxl_vs_remote(result: ProbeResult, rows: list[dict[str, object]]) -> list[Finding]:
    out = []
    for i in result.initiators:
        remote = [r for r in rows if r["initiator"] == i and r["kind"] == "remote/local" and r["latency"]]
        cxl = [r for r in rows if r["initiator"] == i and r["kind"] == "cxl/local" and r["latency"]]
        if not remote or not cxl:
            continue
        far = max(r["latency"] for r in remote)  # type: ignore[type-var]
        for r in cxl:
            lat = r["latency"]
            code = "NT504" if lat < far else "NT505"  # type: ignore[operator]
            word = "faster" if code == "NT504" else "slower"
            out.append(finding(code, f"from node {i}: CXL node {r['target']} latency {lat:.2f}x local is {word} "
                               f"than remote DRAM ({far:.2f}x)",
                               "CXL can take spilled pages before remote DRAM does (numatune launch --mem-policy "
                               "cxl-spill)" if code == "NT504" else "keep CXL for cold data; prefer remote DRAM "
                               "for spill", f"node {r['target']}"))
    return out


def gpu_ratios(gp: GpuProbe) -> list[dict[str, object]]:
    """Per GPU and other node: far/near copy bandwidth (largest size) against the GPU's own node.

    Near is the GPU's NUMA node from sysfs when it was measured, else (numa_node unknown) the node that
    measured fastest, and `near_from` says which. The GPU's own memory node (Grace HBM) is no host buffer's
    home: a copy from it is the GPU reading its own memory, so it is neither near nor far.
    """
    if not gp.measured or not gp.sizes:
        return []
    size = max(gp.sizes)
    out = []
    for g in gp.gpus:
        own = g.memory_node if g.memory_node != g.numa_node else None
        ok = {p.node: p for p in gp.pairs if p.gpu == g.index and p.status == "ok" and size in p.h2d
              and p.node != own}
        if len(ok) < 2:
            continue
        if g.numa_node in ok:
            near, near_from = g.numa_node, "topology"
        else:
            near = max(ok, key=lambda n: ok[n].h2d[size].median)
            near_from = "measured"
        for n, p in sorted(ok.items()):
            if n == near:
                continue
            out.append({"gpu": g.index, "gpu_node": g.numa_node, "near_node": near, "near_from": near_from,
                        "far_node": n, "bytes": size,
                        "h2d": p.h2d[size].median / ok[near].h2d[size].median,
                        "d2h": p.d2h[size].median / ok[near].d2h[size].median})
    return out


def gpu_findings(gp: GpuProbe) -> list[Finding]:
    """NT510 for every (GPU, far node) whose H2D or D2H bandwidth is below GPU_FAR x the near node's."""
    out = []
    for r in gpu_ratios(gp):
        worst = min(r["h2d"], r["d2h"])  # type: ignore[type-var]
        if worst < GPU_FAR:
            out.append(finding(
                "NT510", f"GPU {r['gpu']}: pinned memory on node {r['far_node']} copies at {r['h2d']:.2f}x (H2D) "
                f"and {r['d2h']:.2f}x (D2H) the bandwidth from node {r['near_node']} "
                f"({'its own node' if r['near_from'] == 'topology' else 'fastest measured; its node is unknown'})",
                f"keep the pinned host buffers of the rank using GPU {r['gpu']} on node {r['near_node']} "
                f"(numatune launch binds ranks to their GPU's node)", f"gpu{r['gpu']}"))
    return out
