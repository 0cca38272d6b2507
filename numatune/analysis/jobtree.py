"""A training job as it runs: the ranks a launcher started, the workers under them, and each worker against its
rank's binding (code NT408).

A rank is the process started for a local rank; its DataLoader, multiprocessing and compile workers are its
descendants with the same rank variables (they inherit the environment). Workers inherit the rank's open GPU
descriptors and its /dev/nvidiactl mappings across fork, but hold no GPU context (no NVML compute-process
entry, no /dev/nvidia-uvm mapping): they own no GPU unless they hold one. Pure: records in, records out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numatune.analysis.locality import own_memory, policy_node_set
from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding, Severity, register
from numatune.model.process import GpuUse, ProcessAudit, ProcessInfo, WorkerCheck
from numatune.model.resolve import rank_identity as identity
from numatune.model.topology import Topology

NT408 = register("NT408", Severity.WARNING, "audit", "a rank's worker runs outside its rank's binding", """
    A worker of a rank (a DataLoader, multiprocessing or compile worker: a descendant with the rank's
    variables) may run on CPUs its rank may not, or its memory policy or pages are on nodes outside the
    rank's memory nodes: it competes with the other ranks for their cores and feeds its rank from another
    node. A worker_init_fn or initializer that binds each worker to a node or a GPU's node, wider than what
    the rank was given (by numatune launch, taskset, numactl, Slurm --cpu-bind, mpirun --bind-to, torchrun
    --numa-binding or the rank itself), causes it, or an engine core bound narrower than the workers it starts.
    The fix binds no worker outside its rank's CPUs and nodes: drop the worker's own node-wide binding (or its
    node=/gpu=/inherit=False), or bind each worker to a subset of the rank's mask; to give the workers cores of
    their own, start the ranks with numatune launch --reserve-cores N. For the running worker, taskset onto its
    rank's CPUs.""")

# Programs that only start the rank (torchrun --no-python bash run.sh; numactl ... python): a process of that
# name with a same-rank child is the rank's launcher, its child the rank.
WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "env", "numactl", "taskset", "timeout", "stdbuf", "nice",
                      "chrt", "nohup", "time"})
MIN_OUTSIDE_BYTES = 1 << 20  # a worker's own pages elsewhere below 1 MiB are noise (libraries' data)


def roles(procs: Iterable[ProcessInfo], known: Mapping[int, ProcessInfo] | None = None,
          ) -> dict[int, tuple[str, int | None]]:
    """pid -> (role, the rank's PID for a worker) for each of `procs`: "rank", "worker", "launcher" (a wrapper
    such as a shell that started the rank with the same variables) or "process" (no rank variable).

    `known`: more processes (the ancestors read for a worker whose rank is not among `procs`)."""
    procs = list(procs)
    by_pid = {**(known or {}), **{p.pid: p for p in procs}}
    has_child: set[int] = set()
    for p in by_pid.values():
        parent = by_pid.get(p.ppid) if p.ppid is not None else None
        if parent is not None and p.rank is not None and identity(parent.environ) == identity(p.environ):
            has_child.add(parent.pid)
    out: dict[int, tuple[str, int | None]] = {}
    for p in procs:
        if p.rank is None or p.kernel_thread:
            out[p.pid] = ("process", None)
            continue
        if p.comm in WRAPPERS and p.pid in has_child:
            out[p.pid] = ("launcher", None)
            continue
        ident, top, seen = identity(p.environ), p, {p.pid}
        while (parent := by_pid.get(top.ppid) if top.ppid is not None else None) is not None \
                and parent.pid not in seen and parent.rank is not None and identity(parent.environ) == ident \
                and not (parent.comm in WRAPPERS and parent.pid in has_child):
            seen.add(parent.pid)
            top = parent
        out[p.pid] = ("rank", None) if top is p else ("worker", top.pid)
    return out


def rank_nodes(rank: ProcessInfo, topo: Topology) -> tuple[int, ...] | None:
    """The memory nodes a rank is bound to: those its memory policies name when every policy holding its pages
    names nodes (launch --mem-policy bind: `bind:0`), else its cpuset's memory nodes when narrower than the
    machine; None when it binds no memory."""
    used = [u for u in rank.memory.policies if u.bytes]
    named = [policy_node_set(u.policy) for u in used]
    if used and all(named):
        return tuple(sorted(frozenset().union(*named)))
    every = {n.id for n in topo.nodes if n.memory_total_kib} or {n.id for n in topo.nodes}
    mems = set(rank.mems_allowed)
    if mems and every - mems:
        return tuple(sorted(mems))
    return None


def as_worker(proc: ProcessInfo, rank_pid: int) -> ProcessInfo:
    """A worker owns no GPU unless it holds a context: the GPU it was given by inherited descriptors or the rank's
    environment is its rank's."""
    if proc.gpu_context is not None or proc.gpu is None:
        return proc
    gpu: GpuUse = proc.gpu
    name = gpu.label or gpu.bdf or "the GPU"
    note = (f"{name}: descriptors inherited from its rank (PID {rank_pid}); no GPU context of its own (not among "
            "NVML's compute processes, no /dev/nvidia-uvm or /dev/kfd mapping)")
    return proc._replace(gpu=None, notes=(*proc.notes, note))


def check_worker(worker: ProcessInfo, rank: ProcessInfo, topo: Topology) -> WorkerCheck:
    """The worker against its rank's binding: CPUs it may run on that the rank may not, nodes its policy names or
    its own pages sit on outside the rank's memory nodes."""
    rank_cpus = tuple(sorted(rank.cpus_allowed))
    mine = set(worker.cpus_allowed).union(*(t.allowed_cpus for t in worker.threads))
    outside_cpus = tuple(sorted(mine - set(rank_cpus))) if rank_cpus else ()
    nodes = rank_nodes(rank, topo)
    outside_nodes: tuple[int, ...] = ()
    outside_bytes = 0
    if nodes is not None:
        named = frozenset().union(*(policy_node_set(u.policy) for u in worker.memory.policies if u.mappings))
        pages = {n: b for n, b in own_memory(worker).items() if n not in nodes and b}
        big = sum(pages.values()) >= MIN_OUTSIDE_BYTES
        outside_nodes = tuple(sorted((named - set(nodes)) | (set(pages) if big else set())))
        outside_bytes = sum(pages.values()) if big else 0
    check = WorkerCheck(rank.pid, rank_cpus, nodes, outside_cpus, outside_nodes, outside_bytes)
    if not outside_cpus and not outside_nodes:
        return check
    var = rank.rank_source or "rank"
    what = []
    if outside_cpus:
        what.append(f"it may run on CPUs {format_cpulist(outside_cpus)}, which its rank may not (the rank: CPUs "
                    f"{format_cpulist(rank_cpus)})")
    if outside_nodes:
        pages = f" ({outside_bytes / 1048576:.1f} MiB of its own pages there)" if outside_bytes else ""
        what.append(f"its memory policy or pages are on node(s) {format_cpulist(outside_nodes)}{pages}, outside its "
                    f"rank's memory node(s) {format_cpulist(nodes or ())}")
    reason = (f"a worker of rank PID {rank.pid} ({var}={rank.rank}) outside its rank's binding: " + "; ".join(what))
    live = f"taskset -a -p -c {format_cpulist(rank_cpus)} {worker.pid}" if outside_cpus and rank_cpus else ""
    fix = ("bind no worker outside its rank: the worker_init_fn or initializer that bound it to a node or GPU's "
           f"node widened it; bind within the rank's CPUs {format_cpulist(rank_cpus) or '(its mask)'} instead, or "
           "not at all; to give workers cores of their own, start the ranks with numatune launch --reserve-cores N"
           + (f" (the running worker: {live})" if live else ""))
    return check._replace(reason=reason, fix=fix)


def with_worker_check(a: ProcessAudit, check: WorkerCheck) -> ProcessAudit:
    """The worker's audit with its check against the rank: a worker outside the binding is a warning with the fix."""
    a = a._replace(role="worker", rank_pid=check.rank_pid, worker=check)
    if not check.reason:
        return a
    loc = a.locality
    verdict = loc.verdict if loc.verdict == "misplaced" else "warning"
    reasons = tuple(r for r in loc.reasons if not r.startswith("all resident memory and threads")) + (check.reason,)
    fix = loc.fix
    if check.outside_cpus and check.rank_cpus:
        fix = fix._replace(taskset=f"taskset -a -p -c {format_cpulist(check.rank_cpus)} {a.process.pid}")
    return a._replace(locality=loc._replace(verdict=verdict, reasons=reasons, fix=fix))


def job_findings(topo: Topology, procs: list[ProcessInfo], known: Mapping[int, ProcessInfo] | None = None,
                 ) -> list[Finding]:
    """audit's findings for each process as its job sees it (`check --pid`): a worker owns no GPU without a
    context of its own, and one outside its rank's binding is NT408."""
    from numatune.analysis.locality import audit_findings

    role = roles(procs, known)
    by_pid = {**(known or {}), **{p.pid: p for p in procs}}
    out: list[Finding] = []
    for p in procs:
        kind, rank_pid = role[p.pid]
        if kind != "worker" or rank_pid is None:
            out += audit_findings(topo, p)
            continue
        p = as_worker(p, rank_pid)
        out += audit_findings(topo, p)
        check = check_worker(p, by_pid[rank_pid], topo)
        if check.reason:
            out.append(NT408(check.reason, check.fix, f"pid {p.pid}"))
    return out


def job_order(audits: list[ProcessAudit]) -> list[ProcessAudit]:
    """Ranks by local rank, each followed by its workers (by PID); then launchers and other processes, as given."""
    ranks = sorted((a for a in audits if a.role == "rank"), key=lambda a: (a.process.rank, a.process.pid))
    workers: dict[int, list[ProcessAudit]] = {}
    for a in audits:
        if a.role == "worker" and a.rank_pid is not None:
            workers.setdefault(a.rank_pid, []).append(a)
    out: list[ProcessAudit] = []
    for r in ranks:
        out.append(r)
        out += sorted(workers.pop(r.process.pid, []), key=lambda a: a.process.pid)
    for rest in workers.values():  # a worker whose rank was not audited
        out += sorted(rest, key=lambda a: a.process.pid)
    out += [a for a in audits if a.role not in ("rank", "worker")]
    return out
