"""`numatune probe` without click or rich: choose the pairs, size the buffers, place, verify, time.

Live only. Rows are nodes with CPUs (initiators); columns are every node with memory, CPU-less CXL,
HBM and PMem nodes included. A pair whose buffers did not land on the target is reported as failed
and never timed; a pair the target cannot hold is skipped with the reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from numatune.errors import NumatuneError, Unsupported, UsageError
from numatune.model.probe import Cell, CellPlacement, Figure, ProbeOptions, ProbeResult
from numatune.model.topology import Topology
from numatune.system.host import Host

MIN_SIZE = 4 << 20
DEFAULT_CELL_SECONDS = 5.0
DEFAULT_BUDGET_CAP = 30.0


def _asked(asked, usable: list[int], known: set[int], option: str, known_note: str,
           unusable: str) -> tuple[int, ...]:  # noqa: ANN001 - a tuple of node ids or None
    """The nodes an option names, each checked to exist and be usable; all usable ones when not given."""
    if asked is None:
        return tuple(usable)
    for n in asked:
        if n not in known:
            raise UsageError(f"{option}: node {n} does not exist{known_note}")
        if n not in usable:
            raise Unsupported(f"{option}: node {n} {unusable}")
    return tuple(asked)


def choose_pairs(topo: Topology, opts: ProbeOptions, allowed_cpus: frozenset[int],
                 allowed_mems: frozenset[int] | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    with_cpus = [n.id for n in topo.nodes if set(n.cpus) & allowed_cpus]
    with_mem = [n.id for n in topo.nodes if n.memory_total_kib != 0 and (allowed_mems is None or n.id in allowed_mems)]
    known = {n.id for n in topo.nodes}
    initiators = _asked(opts.initiators, with_cpus, known, "--nodes",
                        f" (nodes: {', '.join(map(str, sorted(known)))})",
                        "has no CPU this process may use: it can only be a target")
    targets = _asked(opts.targets, with_mem, known, "--targets", "", "has no memory this process may use")
    if not initiators or not targets:
        raise Unsupported("no node with usable CPUs and memory to probe")
    return initiators, targets


def one_per_core(topo: Topology, node: int, allowed: frozenset[int]) -> list[int]:
    """The first allowed CPU of each physical core of the node (SMT siblings share a core's bandwidth)."""
    seen: set[tuple[object, object]] = set()
    out = []
    for c in sorted(topo.cpus, key=lambda c: c.id):
        if c.node != node or c.id not in allowed or not c.online:
            continue
        key = (c.package, c.core) if c.core is not None else (None, c.id)
        if key not in seen:
            seen.add(key)
            out.append(c.id)
    return out


def run_probe(host: Host, topo: Topology, opts: ProbeOptions,
              progress: Callable[[str, int, int], None] | None = None) -> ProbeResult:
    """The matrix, within opts.time_budget: every buffer's set-up and the timed loops."""
    if not host.is_live:
        raise UsageError(f"probe measures the live node, not a saved root ({host.label})",
                         hint="run numatune probe on the machine itself")
    from numatune.analysis.probe import expected
    from numatune.measure import bench, helper
    from numatune.readers.caches import last_level_cache
    from numatune.system import memsys

    allowed = frozenset(os.sched_getaffinity(0))
    try:
        mems = memsys.mems_allowed()
    except Exception:  # noqa: BLE001 - a kernel without NUMA syscalls: every node of the root
        mems = None
    initiators, targets = choose_pairs(topo, opts, allowed, mems)
    lib, why = helper.load()
    # The budget counts from here: the buffers' set-up and the timed loops; not the one-time build of the
    # chase helper (a compiler under an emulated guest took the whole of a 12 s budget) nor the topology read.
    start = time.perf_counter()
    llc = last_level_cache(host, sorted(allowed))
    side = sum((c.size_bytes or 0) for n in topo.nodes for c in n.memory_side_caches)
    size = opts.size or max(4 * ((llc or 0) + side), 64 << 20)
    size = max(size // (2 << 20) * (2 << 20), MIN_SIZE) if size >= (2 << 20) else MIN_SIZE
    cells_n = len(initiators) * len(targets)
    budget = opts.time_budget if opts.time_budget is not None else min(DEFAULT_CELL_SECONDS * cells_n,
                                                                        DEFAULT_BUDGET_CAP)
    deadline = start + budget
    smaps = lambda: host.read_optional("/proc/self/smaps")  # noqa: E731
    cells = []
    traffic, traffic_note = _open_cxl_traffic(host, topo)
    step = 0
    rates: dict[int, float] = {}  # each target's write rate (bytes/s), from one small trial
    for i in initiators:
        cores = one_per_core(topo, i, allowed)
        if opts.threads:
            cores = cores[:opts.threads]
        cpu = cores[0] if cores else None
        for t in targets:
            node = topo.node(t)
            exp = expected(topo, i, t)
            kind = node.kind if node else "unknown"
            step += 1
            if progress:
                progress(f"node {i} → node {t}", step, cells_n)
            need = size * 2 + (64 << 20)  # the copy's src + dst at once (the latency buffer is freed first)
            free = node.memory_free_kib * 1024 if node and node.memory_free_kib is not None else None
            if free is not None and free < need:
                cells.append(Cell(i, t, kind, cpu, len(cores), "skipped",
                                  f"node {t} has {free >> 20} MiB free, {need >> 20} MiB needed (--size to shrink)",
                                  None, None, None, None, exp))
                continue
            latency = read = copy = None
            placed = None
            failed = None
            # Each pair gets an equal part of what is left, so a slow pair cannot spend the others' time.
            per_cell = (deadline - time.perf_counter()) / (cells_n - step + 1)
            if per_cell <= 0.01:
                cells.append(Cell(i, t, kind, cpu, len(cores), "skipped",
                                  f"the time budget ({budget:g} s) was spent before this pair: raise "
                                  "--time-budget", None, None, None, None, exp))
                continue
            cell_end = time.perf_counter() + per_cell
            short: list[tuple[str, bench.OutOfTime]] = []  # what the budget left no time to set up
            try:
                if t not in rates:
                    rates[t] = bench.first_touch_rate(t)
                if lib is not None and cpu is not None:
                    try:
                        r = bench.measure_latency(lib, cpu, t, size, per_cell * 0.5, opts.samples, smaps,
                                                  deadline=time.perf_counter() + per_cell * 0.5, rate=rates[t])
                    except bench.OutOfTime as exc:
                        short.append(("latency", exc))
                    else:
                        if isinstance(r, bench.Placement):
                            failed = r
                        else:
                            placed = r.placement
                            latency = Figure(r.samples_ns, _median(r.samples_ns), min(r.samples_ns))
                bandwidth: dict[str, Figure] = {}
                modes = ("read", "copy") if lib is not None else ("copy",)  # read needs the compiled loop
                for k, mode in enumerate(modes):
                    if failed is not None:
                        break
                    seconds = max(cell_end - time.perf_counter(), 0.0) / (len(modes) - k)
                    try:
                        r = bench.measure_bandwidth(mode, lib, cores, t, size, seconds, 3, smaps,
                                                    deadline=time.perf_counter() + seconds, rate=rates[t])
                    except bench.OutOfTime as exc:
                        short.append((f"{mode} bandwidth", exc))
                        continue
                    if isinstance(r, bench.Placement):
                        failed = r
                    else:
                        placed = placed or r.placement
                        bandwidth[mode] = Figure(r.gbps, _median(r.gbps), max(r.gbps))
                read, copy = bandwidth.get("read"), bandwidth.get("copy")
            except NumatuneError as exc:
                cells.append(Cell(i, t, kind, cpu, len(cores), "skipped", exc.message, None, None, None, None, exp))
                continue
            except (MemoryError, OSError) as exc:
                cells.append(Cell(i, t, kind, cpu, len(cores), "skipped", f"cannot allocate: {exc}", None, None,
                                  None, None, exp))
                continue
            if failed is not None:
                cells.append(Cell(i, t, kind, cpu, len(cores), "failed", "pages not on the target node",
                                  _placement(failed), None, None, None, exp))
                continue
            if latency is None and read is None and copy is None:
                cells.append(Cell(i, t, kind, cpu, len(cores), "skipped", _out_of_time(short, budget), None, None,
                                  None, None, exp))
                continue
            cells.append(Cell(i, t, kind, cpu, len(cores), "ok", _out_of_time(short, budget), _placement(placed),
                              latency, read, copy, exp))
    s = topo.settings
    counted = tuple(traffic.stop()) if traffic is not None else ()
    return ProbeResult(
        host=host.label,
        initiators=initiators,
        targets=targets,
        cells=tuple(cells),
        latency_available=lib is not None,
        latency_reason=why or None,
        latency_bytes=size,
        bandwidth_bytes=size,
        llc_bytes=llc,
        time_budget=budget,
        elapsed=time.perf_counter() - start,
        numa_balancing=s.numa_balancing,
        demotion_enabled=s.demotion_enabled,
        transparent_hugepage=s.transparent_hugepage,
        memory_side_cache_bytes=side,
        cxl_traffic=counted,
        cxl_traffic_note=traffic_note,
    )


def _open_cxl_traffic(host: Host, topo: Topology):  # noqa: ANN202 - (CxlTrafficSession | None, note)
    """Per-device CXL read/write counters for the matrix's run, where the kernel has CXL PMUs."""
    from numatune.errors import PmuUnavailable
    from numatune.readers.perf import open_cxl_traffic

    try:
        session = open_cxl_traffic(host, topo.cxl.pmus)
    except PmuUnavailable as exc:
        return None, str(exc)
    session.start()
    return session, None


def _out_of_time(short: list, budget: float) -> str | None:  # noqa: ANN001 - (what, bench.OutOfTime) pairs
    """Why measurements were left out: their buffers could not be set up in the pair's share of the budget."""
    if not short:
        return None
    names = [what for what, _ in short]
    rate = min(exc.rate_mbps for _, exc in short)
    shown = f"{rate:.0f}" if rate >= 10 else f"{rate:.2g}"  # emulated CXL writes at 0.6 MB/s, not "1"
    return (f"{', '.join(names)} not measured: the time budget ({budget:g} s) left too little time to set up "
            f"the buffers (first touch at {shown} MB/s); raise --time-budget or lower --size")


def _median(xs: Sequence[float]) -> float:
    from numatune.analysis.stats import median

    return median(xs)


def _placement(p) -> CellPlacement | None:  # noqa: ANN001 - bench.Placement
    if p is None:
        return None
    return CellPlacement(p.ok, p.pages, p.on_target, dict(p.elsewhere), p.huge_share)

def probe_command(app, opts: ProbeOptions, gpu_asked: bool, fmt: str) -> None:  # noqa: ANN001 - the CLI's App
    """`numatune probe`: measure the matrix (and host<->GPU copies with --gpu), judge it, render it."""
    import sys

    from numatune.readers.topology import read_topology
    from numatune.render.printable import echo

    host = app.host
    runtime = gpu_note = None
    if gpu_asked:
        from numatune.measure.gpu import cuda_runtime

        runtime, gpu_note = cuda_runtime()
        if runtime is None:
            app.warn(f"--gpu: {gpu_note}; host↔GPU bandwidth not measured")
    # PCI devices only when a GPU will be measured: its NUMA node is the "near" side of the ratio
    topo = read_topology(host, devices=runtime is not None, cxl=True, settings=True)
    tty = sys.stderr.isatty() and fmt != "json"

    def progress(label: str, step: int, total: int) -> None:
        if tty:
            app.progress(f"numatune: probing {label} ({step}/{total}) ...")

    result = run_probe(host, topo, opts, progress)
    if tty:
        app.progress(None)
    from numatune.analysis.probe import gpu_findings, probe_findings
    from numatune.render.probe_out import probe_document, render_text

    gpu = None
    if gpu_asked:
        from numatune.measure import gpu as gpu_measure

        if runtime is None:
            gpu = gpu_measure.not_measured(gpu_note)
        else:
            gpu = gpu_measure.measure(topo, result.targets, runtime, progress=progress)
            if tty:
                app.progress(None)
    findings = probe_findings(result, topo) + (gpu_findings(gpu) if gpu is not None else [])
    if fmt == "json":
        app.echo_json(probe_document(result, findings, gpu))
    else:
        echo(render_text(result, findings, gpu))
    refuse_nothing_measured(result)


def refuse_nothing_measured(result: ProbeResult) -> None:
    """A matrix in which no pair was measured (each skipped or failed: a budget too small for any set-up, no
    usable node) is exit 7 after the report that says why, never a quiet exit 0."""
    if any(c.latency_ns is not None or c.read_gbps is not None or c.copy_gbps is not None for c in result.cells):
        return
    why = next((f"node {c.initiator} → node {c.target}: {c.reason}" for c in result.cells if c.reason), None)
    raise Unsupported("probe measured nothing: " + (f"every pair was skipped or failed ({why})" if why else
                                                    "no pair of nodes to measure"),
                      hint="give a larger --time-budget, a smaller --size, or other --nodes/--targets")
