"""Locality of a process: home node(s), remote and slow-tier shares, a verdict and the exact fix.

Pure functions over `ProcessInfo` and `Topology`. Home = the GPU's node when the GPU is known, else
the nodes of the CPUs its threads last ran on. Pages elsewhere on a node with CPUs (DRAM) are remote;
pages on a CPU-less CXL / PMem / unknown node are on a slow tier; GPU or HBM memory nodes are neither.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Set

from numatune.cpulist import format_cpulist, parse_cpulist
from numatune.model._record import record
from numatune.model.findings import Finding, Severity, register
from numatune.model.process import (
    AccessCounters,
    Fix,
    LateBinding,
    Locality,
    PinnedHost,
    ProcessAudit,
    ProcessInfo,
)
from numatune.model.resolve import THREAD_AFFINITY_VARS
from numatune.model.topology import Topology

SLOW_KINDS = frozenset({"cxl", "pmem", "unknown", "memoryless"})
FAST_DEVICE_KINDS = frozenset({"gpu", "hbm"})


@record
class Thresholds:
    """Verdict limits (fractions of resident bytes, or of sampled accesses)."""

    remote_warning: float = 0.05
    remote_misplaced: float = 0.20  # more than 20% remote is misplaced
    slow_tier_warning: float = 0.10  # unless a memory policy names the slow node on purpose

    def __post_init__(self) -> None:
        for name in ("remote_warning", "remote_misplaced", "slow_tier_warning"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")
        if self.remote_warning > self.remote_misplaced:
            raise ValueError("the remote warning threshold is above the misplaced threshold")


DEFAULT_THRESHOLDS = Thresholds()

NT401 = register("NT401", Severity.ERROR, "audit", "a process's memory is misplaced on remote nodes", """
    More than 20% of the process's resident memory is on nodes other than its home node(s) (the nodes
    of the CPUs it may run on): audit's verdict "misplaced". The fix migrates the pages
    (migratepages) or moves the threads (taskset).""")
NT402 = register("NT402", Severity.WARNING, "audit", "part of a process's memory is on remote nodes", """
    Between 5% and 20% of the process's resident memory is on remote nodes: audit's verdict
    "warning".""")
NT403 = register("NT403", Severity.WARNING, "audit", "a process's memory is on a slow tier by accident", """
    More than 10% of the process's memory is on slow-tier nodes (CPU-less CXL/PMem) although no memory
    policy of the process names them.""")
NT404 = register("NT404", Severity.WARNING, "audit", "a process's threads run off its home node", """
    Threads of the process last ran on CPUs outside its home node(s), away from its memory.""")
NT405 = register("NT405", Severity.WARNING, "audit", "a rank runs on efficiency cores", """
    On a CPU with several core kinds (Intel P/E cores, Arm big.LITTLE such as the DGX Spark's X925 and
    A725), the process may only run on efficiency cores, or it is a rank (it has a local rank or a
    GPU) whose main thread last ran on one: it feeds its GPU from the slow cores. The fix pins it to
    the performance cores of its node (taskset) or restarts it with numatune launch --cpu-bind
    exclusive, which takes performance cores first.""")
NT407 = register("NT407", Severity.WARNING, "audit", "a GPU rank's likely pinned host chunks are on another node",
                 """
    Likely pinned (page-locked) host memory of a process with a GPU context is on a node other than the one the
    rank's GPU is attached to: every host-to-device and device-to-host copy of it crosses the socket link (on
    GB200 about 330 GB/s device-to-host from the local node against 115 GB/s across nodes, as torchtitan#3519
    measured). audit sees the shared anonymous mappings (numa_maps `/dev/zero (deleted)`) of a process NVML
    lists as a compute process or that maps /dev/nvidia-uvm: the CUDA host allocator maps its chunks that way
    (cudaHostAlloc, cudaMallocHost, torch's pin_memory(); driver 580, CUDA 13), each chunk serving one
    allocation or several. Likely, not confirmed: a plain mmap(MAP_SHARED|MAP_ANONYMOUS) looks the same from
    outside (numatune.pinned_host_chunks() inside the process asks the driver). The driver's own /dev/nvidiactl
    mappings are not such chunks; memory pinned in place with cudaHostRegister is not seen from outside. Pinned
    pages cannot be migrated; where audit sees the host cache's reuse as the cause, it says NT440 instead.""")
NT440 = register("NT440", Severity.WARNING, "audit",
                 "pinned host chunks reused across NUMA nodes by PyTorch's host cache", """
    A CUDA process's likely pinned chunks are where its copies cannot use them locally, in a shape only the host
    cache explains: one process drives GPUs on several nodes (NVML lists it on each) and a node of those GPUs
    holds none of its chunks, or the process is bound (its CPUs on fewer nodes than the machine has) and chunks
    lie outside its binding and off its GPU's node. PyTorch's CachingHostAllocator keeps freed pinned blocks and
    hands them to the next request whatever node they were allocated on; pinned pages never migrate, so chunks
    allocated before the binding (or by a thread on the other node) serve the job for as long as it runs
    (pytorch#160420; pytorch#197868 measured the loaders of the other node ~30% slower). The fix binds before
    the first pinned allocation (numatune launch or numactl in front of the command), releases the cached
    chunks after a late binding (torch.accelerator.empty_host_cache()), and keeps each node's staging buffers
    apart in a process driving GPUs on several nodes (or runs one process per GPU).""")
NT406 = register("NT406", Severity.WARNING, "audit", "a process was bound after it started (late binding)", """
    The process binds itself (sched_setaffinity / numa_bind inside the program, as TensorRT-LLM's
    configure_cpu_affinity and many training scripts do) after it has started: threads created before
    the binding (NCCL, UCX, OpenMP, data loaders) keep the old, wider CPU mask, and memory first-touched
    before it stays on the node where it was touched although the policy is local. audit sees threads whose
    allowed CPUs reach outside the process's binding: the main thread's CPUs and those of threads pinned
    deliberately, no wider than it (each on one core, as OpenMP places, GOMP/KMP affinity and torch's
    pinning do, or on wider places OMP_PLACES/OMP_PROC_BIND/GOMP_CPU_AFFINITY/KMP_AFFINITY ask for), which
    are not late binding; and own pages on
    another node under the default policy while the process is bound (and its node has the free memory).
    The fix binds at exec, before any thread or page exists: numatune launch (or numactl) in front of the
    command; for the running process, taskset on the late threads alone (the pinned ones keep their CPUs)
    and migratepages.""")


def one_core_test(topo: Topology) -> Callable[[Set[int]], bool]:
    """A test of whether a CPU mask lies within one physical core (a CPU and its SMT siblings): how OpenMP
    places, GOMP/KMP affinity and torch pin a thread."""
    siblings = {c.id: frozenset(c.siblings) | {c.id} for c in topo.cpus}
    return lambda mask: bool(mask) and mask <= siblings.get(min(mask), frozenset((min(mask),)))


def late_binding(proc: ProcessInfo, topo: Topology, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> LateBinding | None:
    """Signs that the process was bound after it started; None when it is not bound or shows none."""
    if proc.kernel_thread or not proc.cpus_allowed:
        return None
    node_of = {cpu: n.id for n in topo.nodes for cpu in n.cpus}
    online = set(topo.cpu.online) or set(node_of)
    usable = online & set(proc.cpuset_cpus) if proc.cpuset_cpus else online
    main = set(proc.cpus_allowed) & online
    if not main:
        return None
    # The process's binding: the main thread's CPUs and those of every thread pinned deliberately, no wider than
    # the main thread: on one core (OpenMP places, GOMP/KMP affinity and torch's pinning put each thread on a
    # CPU or core of its own, not the main thread's), or on wider places the process's environment asks for
    # (OMP_PLACES=sockets). A late thread reaches outside that binding: the mask it had before the process was
    # bound, wider than the binding or elsewhere (a process started on node 0 that bound itself to node 1).
    on_one_core = one_core_test(topo)
    off = ("", "false", "none", "disabled")  # OMP_PROC_BIND=false, KMP_AFFINITY=none|disabled: no pinning asked
    places = any(proc.environ.get(k, "").strip().lower() not in off for k in THREAD_AFFINITY_VARS)

    def pinned(m: set[int]) -> bool:
        return bool(m) and len(m) <= len(main) and (places or on_one_core(m))

    masks = [(t, set(t.allowed_cpus) & online) for t in proc.threads if t.allowed_cpus]
    bound = main.union(*(m for t, m in masks if t.tid != proc.pid and pinned(m)))
    if bound >= usable:
        return None  # not bound: it may run everywhere it is allowed to
    bound_nodes = tuple(sorted({node_of[c] for c in bound if c in node_of}))
    late = [t for t, m in masks if t.tid != proc.pid and m and not m <= bound]
    old = sorted(set().union(*(set(t.allowed_cpus) for t in late)) - bound) if late else []
    dram, _ = node_classes(topo)
    mem = own_memory(proc)
    total = sum(mem.values())
    named = frozenset().union(*(policy_node_set(u.policy) for u in proc.memory.policies if u.bytes))
    remote = {n: b for n, b in mem.items() if b and n in dram and n not in bound_nodes and n not in named}
    remote_bytes = sum(remote.values())
    free = [topo.node(n).memory_free_kib for n in bound_nodes if topo.node(n) is not None]
    room = all(f is not None for f in free) and sum(free) * 1024 > remote_bytes  # not a full node spilling over
    if not (total and remote_bytes / total > thresholds.remote_warning and room):
        remote, remote_bytes = {}, 0
    if not late and not remote:
        return None
    where = f"CPUs {format_cpulist(sorted(bound))} (node {_nodes(bound_nodes)})"
    causes = []
    if late:
        causes.append(f"{len(late)} of {len(proc.threads)} threads still have the CPU mask from before it was bound "
                      f"(they may run on CPUs {format_cpulist(old)}; the process is bound to {where}): threads "
                      "created before a binding keep the old mask")
    if remote:
        causes.append(f"{_pct(remote_bytes / total)} of its memory sits on node(s) {format_cpulist(sorted(remote))} "
                      f"under the local (default) policy although it is bound to {where}: first-touched there "
                      "before the binding")
    cmd = shlex.join(proc.cmdline) if proc.cmdline else "CMD"
    if proc.gpu is not None and proc.gpu.bdf:
        launch = f"numatune launch --gpu {proc.gpu.bdf} -- {cmd}"
    else:
        launch = f"numatune launch --node {_nodes(bound_nodes)} -- {cmd}"
    now = [late_threads_taskset(bound, tuple(t.tid for t in late))] if late else []
    if remote and len(bound_nodes) == 1:
        now.append(f"migratepages {proc.pid} {format_cpulist(sorted(remote))} {bound_nodes[0]}")
    fix = f"bind at exec: {launch}" + (f" (the running process: {' ; '.join(now)})" if now else "")
    return LateBinding(tuple(sorted(bound)), bound_nodes, tuple(t.tid for t in late), tuple(old), remote_bytes,
                       tuple(sorted(remote)), "late binding: " + "; ".join(causes), fix)


def pinned_one_by_one(proc: ProcessInfo, topo: Topology) -> tuple[int, ...]:
    """The threads the process pinned one per core itself (OpenMP places, GOMP/KMP affinity, torch's pinning):
    two or more threads, each allowed one core only, on different cores. `taskset -a` would throw that pinning
    away (every thread on every CPU of the node), so the live fix is not offered for them."""
    on_one_core = one_core_test(topo)
    cores: dict[int, frozenset[int]] = {}
    for t in proc.threads:
        m = frozenset(t.allowed_cpus)
        if t.tid != proc.pid and m and on_one_core(m):
            cores[t.tid] = m
    return tuple(sorted(cores)) if len(set(cores.values())) >= 2 else ()


def late_threads_taskset(bound: set[int] | tuple[int, ...], tids: tuple[int, ...]) -> str:
    """taskset for the late threads alone: the threads pinned within the binding keep their own CPUs."""
    cpus = format_cpulist(sorted(bound))
    if len(tids) == 1:
        return f"taskset -p -c {cpus} {tids[0]}"
    return f"for t in {' '.join(map(str, tids))}; do taskset -p -c {cpus} $t; done"


def efficiency_use(proc: ProcessInfo, topo: Topology) -> tuple[str, tuple[int, ...]] | None:
    """(why, the efficiency CPUs involved) when the process runs on efficiency cores; None otherwise."""
    kinds = topo.cpu_kinds
    if proc.kernel_thread or not kinds.heterogeneous or not any(k.role == "performance" for k in kinds.kinds):
        return None
    online = set(topo.cpu.online)
    allowed = [c for c in proc.cpus_allowed if c in online]
    if allowed and all(kinds.role_of(c) == "efficiency" for c in allowed):
        return f"it may run only on efficiency cores ({_kind_names(topo, allowed)} CPUs {format_cpulist(allowed)})", \
            tuple(allowed)
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    if (proc.rank is not None or proc.gpu is not None) and main is not None and main.cpu is not None \
            and kinds.role_of(main.cpu) == "efficiency":
        return (f"its main thread last ran on efficiency core {main.cpu} ({_kind_names(topo, [main.cpu])}); "
                f"it is not pinned to performance cores"), (main.cpu,)
    return None


def performance_cpus(topo: Topology, home: tuple[int, ...]) -> tuple[int, ...]:
    """The performance CPUs of the home node(s); all performance CPUs when those have none."""
    perf = [c for k in topo.cpu_kinds.kinds if k.role == "performance" for c in k.cpus]
    local = [c for c in perf if topo.node_of_cpu(c) in home]
    return tuple(sorted(local or perf))


def _kind_names(topo: Topology, cpus: list[int]) -> str:
    return "/".join(sorted({(topo.cpu_kinds.kind_of(c).name or "?") for c in cpus if topo.cpu_kinds.kind_of(c)}))


def node_classes(topo: Topology) -> tuple[frozenset[int], frozenset[int]]:
    """(DRAM nodes: have CPUs or are DRAM; slow-tier nodes: CPU-less CXL/PMem/unknown)."""
    dram = frozenset(n.id for n in topo.nodes if n.cpus or n.kind == "dram")
    slow = frozenset(n.id for n in topo.nodes if not n.cpus and n.kind in SLOW_KINDS and n.id not in dram)
    return dram, slow


def home_nodes(proc: ProcessInfo, topo: Topology) -> tuple[tuple[int, ...], str]:
    if proc.gpu is not None and proc.gpu.node is not None:
        from numatune.model.gpumem import nearest_cpu_node

        # a Grace GPU whose node is its CPU-less HBM node: the rank's home is the Grace node nearest it
        return (nearest_cpu_node(topo, proc.gpu.node) if topo.node(proc.gpu.node) is not None else None
                or proc.gpu.node,), "gpu"
    node_of = {cpu: n.id for n in topo.nodes for cpu in n.cpus}
    nodes = {node_of[t.cpu] for t in proc.threads if t.cpu is not None and t.cpu in node_of}
    if nodes:
        return tuple(sorted(nodes)), "threads"
    nodes = {node_of[c] for c in proc.cpus_allowed if c in node_of}
    if nodes:
        return tuple(sorted(nodes)), "allowed CPUs"
    return (), "none"


def policy_node_set(policy: str) -> frozenset[int]:
    """Nodes a numa_maps policy names ("weighted interleave:0-1" -> {0, 1}); empty for default/local."""
    _, sep, nodes = policy.rpartition(":")
    if not sep:
        return frozenset()
    try:
        return parse_cpulist(nodes)
    except ValueError:
        return frozenset()


def access_counters(
    proc: ProcessInfo,
    home: tuple[int, ...],
    placement_ratio: float,
    *,
    balancing_mode: int | None,
    pmu: tuple[int, int, tuple[str, ...], float] | None = None,
    pmu_note: str | None = None,
) -> AccessCounters:
    """The best access source available, and a note for every better one that is not.

    pmu = (local, remote, event names, window seconds) from readers.perf.
    """
    notes: list[str] = []
    if pmu is not None:
        local, remote, events, window = pmu
        total = local + remote
        if total:
            return AccessCounters("pmu", local, remote, {}, remote / total, events, window, ())
        notes.append(f"hardware counters counted no DRAM loads in {window:g}s (idle process?)")
    elif pmu_note:
        notes.append(pmu_note)
    faults = proc.numa_faults
    total_faults = sum(faults.values())
    if balancing_mode == 0:
        notes.append("NUMA balancing is off (kernel.numa_balancing=0): no hinting-fault proxy")
    elif balancing_mode is None:
        notes.append("NUMA balancing state unknown (no /proc/sys/kernel/numa_balancing)")
    elif balancing_mode & 1 == 0:
        notes.append(
            f"NUMA balancing is in memory-tiering mode only (kernel.numa_balancing={balancing_mode}): "
            "only slow-tier pages are scanned"
        )
    if total_faults and balancing_mode:
        remote = sum(n for node, n in faults.items() if node not in home)
        return AccessCounters(
            "numa_balancing",
            total_faults - remote,
            remote,
            dict(sorted(faults.items())),
            remote / total_faults,
            ("numa_faults (/proc/PID/task/*/sched)",),
            None,
            tuple(notes),
        )
    if balancing_mode and not total_faults:
        notes.append("NUMA balancing is on but recorded no hinting faults for this process yet")
    return AccessCounters("placement", None, None, {}, placement_ratio, (), None, tuple(notes))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def judge(
    proc: ProcessInfo,
    topo: Topology,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    balancing_mode: int | None = None,
    pmu: tuple[int, int, tuple[str, ...], float] | None = None,
    pmu_note: str | None = None,
    h2d: Mapping[str, Mapping[int, float]] | None = None,
) -> ProcessAudit:
    """Home, shares, access counters, verdict and fix for one process. `h2d`: GPU BDF -> node -> measured
    host-to-GPU GB/s of a pinned buffer on that node (a saved `probe --gpu`), to state what misplaced pinned
    buffers cost."""
    home, home_source = home_nodes(proc, topo)
    late = late_binding(proc, topo, thresholds)
    if late is not None and home_source != "gpu" and home != late.bound_nodes:
        home, home_source = late.bound_nodes, "binding"  # a bound process's home: its binding, not its old threads
    dram, slow = node_classes(topo)
    known = {n.id for n in topo.nodes}
    device_nodes = {n.id for n in topo.nodes if n.kind in FAST_DEVICE_KINDS and not n.cpus}
    mem = own_memory(proc)
    total = sum(mem.values())
    remote_nodes = sorted(
        n for n, b in mem.items() if b and n not in home and (n in dram or (n not in known))
    )
    slow_nodes = sorted(n for n, b in mem.items() if b and n not in home and n in slow and n not in device_nodes)
    remote_bytes = sum(mem[n] for n in remote_nodes)
    slow_bytes = sum(mem[n] for n in slow_nodes)
    remote_ratio = remote_bytes / total if total else 0.0
    slow_ratio = slow_bytes / total if total else 0.0
    node_of = {cpu: n.id for n in topo.nodes for cpu in n.cpus}
    off_home = tuple(
        t.tid for t in proc.threads if home and t.cpu is not None and node_of.get(t.cpu) not in (None, *home)
    )
    counters = access_counters(proc, home, remote_ratio, balancing_mode=balancing_mode, pmu=pmu, pmu_note=pmu_note)

    reasons: list[str] = []
    verdict = "ok"
    if proc.kernel_thread:
        return ProcessAudit(
            proc,
            Locality(home, home_source, 0.0, 0.0, 0, 0, (), "n/a", ("kernel thread: no user address space",)),
            counters,
        )
    if not total:
        reasons.append("no resident memory in numa_maps")
        verdict = "n/a" if not proc.threads else "ok"

    def worse(v: str) -> None:
        nonlocal verdict
        order = {"n/a": 0, "ok": 1, "warning": 2, "misplaced": 3}
        if order[v] > order[verdict]:
            verdict = v

    where = "its GPU's node" if home_source == "gpu" else "the node(s) its threads run on"
    home_txt = ",".join(map(str, home)) or "?"
    if total and remote_ratio > thresholds.remote_misplaced:
        worse("misplaced")
        reasons.append(
            f"{_pct(remote_ratio)} of its memory is on remote node(s) {format_cpulist(remote_nodes)}, "
            f"not on {where} ({home_txt}); above {_pct(thresholds.remote_misplaced)}"
        )
    elif total and remote_ratio > thresholds.remote_warning:
        worse("warning")
        reasons.append(
            f"{_pct(remote_ratio)} of its memory is on remote node(s) {format_cpulist(remote_nodes)} "
            f"(home {home_txt}); above {_pct(thresholds.remote_warning)}"
        )
    if counters.source == "pmu" and counters.remote_ratio is not None:
        if counters.remote_ratio > thresholds.remote_misplaced:
            worse("misplaced")
            reasons.append(f"{_pct(counters.remote_ratio)} of sampled DRAM loads were remote")
        elif counters.remote_ratio > thresholds.remote_warning:
            worse("warning")
            reasons.append(f"{_pct(counters.remote_ratio)} of sampled DRAM loads were remote")
    elif (counters.source == "numa_balancing" and counters.remote_ratio is not None
          and counters.remote_ratio > thresholds.remote_misplaced):
        worse("warning")
        reasons.append(f"{_pct(counters.remote_ratio)} of NUMA-balancing hinting faults hit remote pages")
    intended_slow = frozenset().union(*(policy_node_set(p.policy) for p in proc.memory.policies if p.bytes))
    if total and slow_ratio > thresholds.slow_tier_warning:
        if set(slow_nodes) <= intended_slow:
            reasons.append(
                f"{_pct(slow_ratio)} on slow-tier node(s) {format_cpulist(slow_nodes)}, as its memory policy asks"
            )
        else:
            worse("warning")
            reasons.append(
                f"{_pct(slow_ratio)} of its memory is on slow-tier (CPU-less/CXL) node(s) "
                f"{format_cpulist(slow_nodes)} without a policy asking for it"
            )
    on_device = sorted(n for n, b in mem.items() if b and n not in home and n in device_nodes)
    if total and on_device:  # neither remote DRAM nor a slow tier, but not home either: say where it is
        owners = sorted({g for n in on_device if (g := topo.node(n).gpu)})
        whose = f" (GPU memory of {', '.join(owners)})" if owners else ""
        asked = ", as its memory policy asks" if set(on_device) <= intended_slow else ""
        reasons.append(f"{_pct(sum(mem[n] for n in on_device) / total)} of its memory is on GPU/HBM memory node(s) "
                       f"{format_cpulist(on_device)}{whose}{asked}: counted neither remote nor slow")
    if off_home:
        worse("warning")
        reasons.append(f"{len(off_home)} of {len(proc.threads)} threads last ran off node {home_txt}")
    if home_source == "gpu" and proc.cpus_allowed:
        span = sorted({node_of[c] for c in proc.cpus_allowed if c in node_of} - set(home))
        if span:
            reasons.append(f"not pinned: its allowed CPUs also span node(s) {format_cpulist(span)}")
    shared_remote = {n: b for n, b in proc.memory.by_kind.get("file", {}).items()
                     if b and n not in home and n in remote_nodes_of(topo, home)}
    if mem is not proc.memory.by_node and sum(shared_remote.values()) > (1 << 20):
        reasons.append(
            f"not counted: {sum(shared_remote.values()) / 1048576:.1f} MiB of file pages (libraries, page cache "
            f"shared with other processes) on node(s) {format_cpulist(shared_remote)}"
        )
    gpu_bdf = (proc.gpu.bdf or "").lower() if proc.gpu is not None else ""
    pinned = pinned_host(proc, topo, home, home_source, (h2d or {}).get(gpu_bdf))
    if pinned is not None and pinned.wrong_bytes >= PINNED_MIN_BYTES:
        worse("warning")
        reasons.append(pinned_reason(pinned))
    if pinned is not None and pinned.cache_reuse:
        worse("warning")
        reasons.append(f"{pinned.cache_reuse} (NT440)")
    slow_cores = efficiency_use(proc, topo)
    if slow_cores is not None:
        worse("warning")
        reasons.append(slow_cores[0])
    if late is not None:
        worse("warning")
        reasons.append(f"{late.cause} — {late.fix}")
    if verdict == "ok" and not any(not r.startswith("not counted") for r in reasons):
        reasons.append(f"all resident memory and threads on home node(s) {home_txt}")

    fix = Fix()
    if verdict in ("warning", "misplaced") and home:
        fix = make_fix(proc, topo, home, home_source, remote_nodes + [n for n in slow_nodes if n not in intended_slow],
                       repin=bool(off_home) or _not_pinned(proc, topo, home) or slow_cores is not None
                       or bool(late and late.threads),
                       performance=slow_cores is not None)
    if late is not None and late.threads and fix.taskset:  # the late threads onto the binding it asked for
        fix = fix._replace(taskset=late_threads_taskset(late.bound_cpus, late.threads))
    elif fix.taskset and (own := pinned_one_by_one(proc, topo)):
        fix = fix._replace(taskset=None)
        reasons.append(f"{len(own)} of {len(proc.threads)} threads are pinned one per core by the process itself "
                       "(OpenMP places, torch): no live taskset, which would replace that pinning with the whole "
                       "node; restart it bound (the lines below) so they pin within the binding")
    return ProcessAudit(
        proc,
        Locality(home, home_source, remote_ratio, slow_ratio, remote_bytes, slow_bytes, off_home, verdict,
                 tuple(reasons), fix, late, pinned, _node_kinds(proc, topo)),
        counters,
    )


def _node_kinds(proc: ProcessInfo, topo: Topology) -> dict[int, tuple[str, str | None]]:
    """Each node holding the process's pages: its kind (dram, gpu, hbm, cxl, ...) and the GPU whose memory it is."""
    out = {}
    for nid in proc.memory.by_node:
        n = topo.node(nid)
        out[nid] = (n.kind, n.gpu) if n is not None else ("unknown", None)
    return out


PINNED_MIN_BYTES = 1 << 20  # less than 1 MiB of pinned pages elsewhere is driver bookkeeping, not a buffer


# How audit knows a process's shared anonymous memory is pinned (said in the report and the JSON): it does not, it
# infers it; nothing in /proc tells a pinned chunk from a plain mmap(MAP_SHARED|MAP_ANONYMOUS).
PINNED_WHAT = ("shared anonymous memory of a CUDA process, the way the CUDA host allocator maps its chunks "
               "(cudaHostAlloc, torch's pin_memory())")
PINNED_HOW = f"likely pinned: {PINNED_WHAT}"
# Said once where pinned memory is reported: what no reader outside the process can tell, and what can.
REGISTERED_NOTE = ("a plain mmap(MAP_SHARED|MAP_ANONYMOUS) of the same process looks the same from outside, and memory "
                   "pinned in place with cudaHostRegister (an ordinary private mapping) is not seen at all; inside "
                   "the process, numatune.pinned_host_chunks() asks the CUDA driver which of these chunks it pinned "
                   "and which allocations each serves")
HOST_CACHE = ("PyTorch's host cache (CachingHostAllocator) hands a freed pinned block to the next request whatever "
              "node it was allocated on, and pinned pages never migrate (pytorch#160420; loaders on the other node "
              "~30% slower in pytorch#197868)")


def pinned_host(proc: ProcessInfo, topo: Topology, home: tuple[int, ...], home_source: str,
                h2d: Mapping[int, float] | None = None) -> PinnedHost | None:
    """The likely pinned host memory of a process with a CUDA context (its resident shared anonymous mappings: the
    CUDA host allocator's chunks) and where it is against its GPU's CPU node; None without a CUDA context or such
    pages. A forked worker inherits the mappings of its rank without their pages and without a context: it has none.

    `h2d`: node -> measured host-to-GPU bandwidth (GB/s) of a pinned buffer on that node to this rank's GPU
    (`numatune probe --gpu`), to price them."""
    ctx = proc.gpu_context
    shared = proc.memory.shared_anon
    if ctx is None or ctx.runtime != "CUDA" or not shared.resident or not shared.bytes:
        return None
    by_node = {n: b for n, b in sorted(shared.by_node.items()) if b}
    gpu_node = home[0] if home_source == "gpu" and home else None
    wrong = tuple(sorted(n for n, b in by_node.items() if b and n != gpu_node)) if gpu_node is not None else ()
    cost = None
    if h2d and gpu_node in h2d and wrong and all(n in h2d for n in wrong):
        cost = (f"probe measured host-to-GPU copies at {h2d[gpu_node]:.1f} GB/s from node {gpu_node} and "
                + ", ".join(f"{h2d[n]:.1f} GB/s from node {n}" for n in wrong))
    gbps = {n: h2d[n] for n in sorted(by_node) if h2d and n in h2d}
    return PinnedHost(gpu_node, by_node, ("/dev/zero (deleted)",), sum(by_node[n] for n in wrong), wrong, cost,
                      f"{PINNED_HOW} ({ctx.evidence})", shared.largest, gbps, shared.resident,
                      host_cache_reuse(proc, topo, by_node, gpu_node))


def _mib(b: int) -> str:
    return f"{b / 1048576:.0f} MiB"


_BY_PID: list = []  # [(the NVML records indexed, PID -> BDFs)]: one index per audit, not a scan per process


def _nvml_gpus_by_pid(topo: Topology) -> dict[int, list[str]]:
    """PID -> the BDFs of the GPUs NVML lists it on as a compute process, indexed once per NVML record."""
    gpus = topo.fabric.nvml_gpus
    if _BY_PID and _BY_PID[0][0] is gpus:
        return _BY_PID[0][1]
    index: dict[int, list[str]] = {}
    for g in gpus:
        for pid in g.processes:
            index.setdefault(pid, []).append(g.bdf)
    _BY_PID[:] = [(gpus, index)]
    return index


def host_cache_reuse(proc: ProcessInfo, topo: Topology, by_node: Mapping[int, int], gpu_node: int | None,
                     ) -> str | None:
    """Why a CUDA process's chunks sit where its copies cross the socket, when audit can see the cause (NT440):
    PyTorch's host cache reusing pinned blocks across nodes. Two shapes:
    - one process drives GPUs on several nodes (NVML lists it on each) and a node of those GPUs holds none of its
      chunks: that node's copies are served from another node's cached blocks (pytorch#197868's setup);
    - the process is bound (its allowed CPUs on fewer nodes than the machine's) and chunks sit outside its binding,
      off its GPU's node, on nodes no memory policy of theirs names: they were allocated before the binding or by a
      thread outside it, and the cache keeps handing them out.
    None otherwise (a process bound elsewhere than its GPU is NT407's wrong binding, not this)."""
    total = sum(by_node.values())
    if total < PINNED_MIN_BYTES:
        return None
    gpu_nodes: dict[int, list[str]] = {}
    for bdf in _nvml_gpus_by_pid(topo).get(proc.pid, ()):
        d = topo.device(bdf)
        node = d.node if d is not None else None
        if node is not None:
            from numatune.model.gpumem import nearest_cpu_node

            node = nearest_cpu_node(topo, node) if topo.node(node) is not None else node
            gpu_nodes.setdefault(node, []).append(bdf)
    bare = sorted(n for n in gpu_nodes if by_node.get(n, 0) < PINNED_MIN_BYTES)
    if len(gpu_nodes) > 1 and bare:
        held = ", ".join(f"node {n} {_mib(b)}" for n, b in by_node.items() if b)
        return (f"it drives GPUs on nodes {format_cpulist(sorted(gpu_nodes))} (NVML lists it on "
                f"{', '.join(b for n in sorted(gpu_nodes) for b in gpu_nodes[n])}) but node(s) {format_cpulist(bare)} "
                f"hold none of its likely pinned chunks ({held}): the copies of the GPUs there are served from "
                f"another node's blocks; {HOST_CACHE}")
    node_of = {cpu: n.id for n in topo.nodes for cpu in n.cpus}
    cpu_nodes = {n.id for n in topo.nodes if n.cpus}
    bound = {node_of[c] for c in proc.cpus_allowed if c in node_of}
    if not bound or bound >= cpu_nodes or (gpu_node is not None and gpu_node not in bound):
        return None
    unasked = proc.memory.shared_anon.unasked  # no memory policy of the chunk sent its pages there
    outside = {n: b for n, b in unasked.items() if n not in bound and n != gpu_node and b}
    if sum(outside.values()) < PINNED_MIN_BYTES:
        return None
    where = ", ".join(f"node {n} {_mib(b)}" for n, b in sorted(outside.items()))
    return (f"{_mib(sum(outside.values()))} of its {_mib(total)} of likely pinned chunks are outside its binding "
            f"(CPUs on node(s) {format_cpulist(sorted(bound))}; {where}) and no memory policy sent them there: "
            f"allocated before it was bound or by a thread outside the binding, and kept in use: {HOST_CACHE}")


HOST_CACHE_FIX = ("bind before the first pinned allocation (numatune launch, or numactl, in front of the command, not "
                  "a binding made inside the program), and release the cached chunks after binding with "
                  "torch.accelerator.empty_host_cache(); a process driving GPUs on several nodes keeps each node's "
                  "staging buffers apart, allocated from a thread bound there (or runs one process per GPU)")


def pinned_reason(p: PinnedHost) -> str:
    total = sum(p.by_node.values())
    where = ", ".join(f"node {n} {p.by_node[n] / 1048576:.0f} MiB" for n in p.wrong_nodes)
    text = (f"likely pinned host chunks ({PINNED_WHAT}): {p.wrong_bytes / 1048576:.0f} of {total / 1048576:.0f} MiB "
            f"are off its GPU's CPU node {p.gpu_cpu_node} ({where}): every host-device copy of them crosses the "
            "socket link")
    return text + (f"; {p.cost}" if p.cost else " (numatune probe --gpu measures what that costs here)")


# What a process owns and can be moved with it: file-backed pages (libraries, page cache) are shared with
# other processes and sit wherever the first reader faulted them, so they do not judge its placement.
OWN_KINDS = ("anon", "heap", "stack", "shm", "hugetlb")


def own_memory(proc: ProcessInfo) -> Mapping[int, int]:
    """Bytes per node of the process's own memory; all of it when it has only file mappings."""
    own: dict[int, int] = {}
    for kind in OWN_KINDS:
        for node, size in proc.memory.by_kind.get(kind, {}).items():
            own[node] = own.get(node, 0) + size
    return own if sum(own.values()) else proc.memory.by_node


def remote_nodes_of(topo: Topology, home: tuple[int, ...]) -> set[int]:
    return {n.id for n in topo.nodes if n.id not in home}


def _not_pinned(proc: ProcessInfo, topo: Topology, home: tuple[int, ...]) -> bool:
    home_cpus = {c for n in topo.nodes if n.id in home for c in n.cpus}
    return bool(proc.cpus_allowed) and not set(proc.cpus_allowed) <= home_cpus


def target_node(proc: ProcessInfo, home: tuple[int, ...]) -> int:
    """One node to bind to: the home node holding most of its memory (the first on a tie)."""
    return max(home, key=lambda n: (proc.memory.by_node.get(n, 0), -n))


def make_fix(
    proc: ProcessInfo,
    topo: Topology,
    home: tuple[int, ...],
    home_source: str,
    move_from: list[int],
    *,
    repin: bool = True,
    performance: bool = False,
) -> Fix:
    """The restart lines (numatune launch, numactl) and the live lines (migratepages, taskset).

    `performance`: the process runs on efficiency cores, so the lines pin it to performance cores.
    """
    node = target_node(proc, home)
    n = topo.node(node)
    cpus = set(n.cpus) if n else set()
    if performance:
        cpus = set(performance_cpus(topo, home))
    if proc.cpuset_cpus:
        cpus &= set(proc.cpuset_cpus)
    cmd = shlex.join(proc.cmdline) if proc.cmdline else "CMD"
    bind = "exclusive --cpu-kind performance" if performance else "node"
    if home_source == "gpu" and proc.gpu is not None and proc.gpu.bdf:
        launch = f"numatune launch --gpu {proc.gpu.bdf} --cpu-bind {bind} --mem-policy bind -- {cmd}"
    else:
        launch = f"numatune launch --node {node} --cpu-bind {bind} --mem-policy bind -- {cmd}"
    if performance:
        numactl = f"numactl --physcpubind={format_cpulist(sorted(cpus))} --membind={node} -- {cmd}"
    else:
        numactl = f"numactl --cpunodebind={node} --membind={node} -- {cmd}"
    sources = sorted(set(move_from) - {node})
    migrate = f"migratepages {proc.pid} {format_cpulist(sources)} {node}" if sources else None
    taskset = f"taskset -a -p -c {format_cpulist(sorted(cpus))} {proc.pid}" if repin and cpus else None
    return Fix(launch=launch, numactl=numactl, migratepages=migrate, taskset=taskset)


def audit_findings(topo: Topology, proc: ProcessInfo, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    """audit's verdict as findings for `check --pid` (codes NT4xx, stable)."""
    a = judge(proc, topo, thresholds, balancing_mode=topo.settings.numa_balancing)
    loc, subject = a.locality, f"pid {proc.pid}"
    fix = " ; ".join(x for x in (loc.fix.migratepages, loc.fix.taskset) if x) or (loc.fix.launch or "")
    out: list[Finding] = []
    if loc.verdict == "n/a":
        return out
    if loc.remote_ratio > thresholds.remote_misplaced:
        out.append(NT401(f"{_pct(loc.remote_ratio)} of its memory is on remote nodes (home {_nodes(loc.home_nodes)})",
                         fix, subject))
    elif loc.remote_ratio > thresholds.remote_warning:
        out.append(NT402(f"{_pct(loc.remote_ratio)} of its memory is on remote nodes (home {_nodes(loc.home_nodes)})",
                         fix, subject))
    if any("slow-tier" in r and "without a policy" in r for r in loc.reasons):
        out.append(NT403(f"{_pct(loc.slow_tier_ratio)} of its memory is on slow-tier nodes without a policy asking "
                         "for it", fix, subject))
    slow_cores = efficiency_use(proc, topo)
    if slow_cores is not None:
        out.append(NT405(slow_cores[0], loc.fix.taskset or loc.fix.launch or "", subject))
    if loc.late_binding is not None:
        out.append(NT406(loc.late_binding.cause, loc.late_binding.fix, subject))
    if loc.pinned is not None and loc.pinned.cache_reuse:
        out.append(NT440(loc.pinned.cache_reuse, HOST_CACHE_FIX, subject))
    elif loc.pinned is not None and loc.pinned.wrong_bytes >= PINNED_MIN_BYTES:
        out.append(NT407(pinned_reason(loc.pinned), "allocate pinned buffers from a thread bound to the GPU's node "
                         f"(numatune launch binds the rank to node {loc.pinned.gpu_cpu_node}); a process driving "
                         "GPUs on several nodes must not reuse one node's cached pinned blocks for another's GPU "
                         "(PyTorch's CachingHostAllocator does: pytorch#160420)", subject))
    if loc.threads_off_home:
        out.append(NT404(f"{len(loc.threads_off_home)} of {len(proc.threads)} threads last ran off home node "
                         f"{_nodes(loc.home_nodes)}", loc.fix.taskset or loc.fix.launch or "", subject))
    from numatune.analysis.binding_failures import rank_findings

    named = frozenset().union(*(policy_node_set(u.policy) for u in proc.memory.policies
                                if u.mappings and u.policy.startswith(("bind", "prefer"))))
    out += rank_findings(topo, proc, named)
    return out


def _nodes(nodes: tuple[int, ...]) -> str:
    return format_cpulist(nodes) or "?"
