"""A training job as it runs: the launchers above its ranks, the ranks, the workers and helpers under each rank
(job_places, from the process tree the kernel shows), and each worker against its rank's binding (code NT408).

A rank is the process that runs the training program: not a launcher (torchrun, srun, mpirun, a shell that waits
on it) that carries rank variables too, and not a worker that inherited them; a rank that set its own variables at
run time is known by the children that inherited them. Workers inherit the rank's open GPU
descriptors and its /dev/nvidiactl mappings across fork, but hold no GPU context (no NVML compute-process
entry, no /dev/nvidia-uvm mapping): they own no GPU unless they hold one. Pure: records in, records out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numatune.analysis.locality import own_memory, policy_node_set
from numatune.cpulist import format_cpulist
from numatune.errors import BindingError
from numatune.model.findings import Finding, Severity, register
from numatune.model.jobshape import HELPER_KINDS, REAPERS, WRAPPERS, launcher_name, worker_pattern
from numatune.model.process import GpuUse, JobPlace, ProcEntry, ProcessAudit, ProcessInfo, WorkerCheck
from numatune.model.resolve import local_rank as resolve_local_rank
from numatune.model.resolve import local_rank_arg
from numatune.model.resolve import rank_identity as identity
from numatune.model.topology import Topology

ProcessLike = ProcEntry | ProcessInfo  # what the job tree reads of a process: pid, ppid, comm, cmdline, environ


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

MIN_OUTSIDE_BYTES = 1 << 20  # a worker's own pages elsewhere below 1 MiB are noise (libraries' data)


class _Facts:
    """What one process shows: its local rank (environment, else command line), rank variables, names."""

    __slots__ = ("ident", "key", "launcher", "pattern", "rank")

    def __init__(self, e: ProcessLike) -> None:
        try:
            rank, key, _ = resolve_local_rank(e.environ)
        except BindingError:
            rank, key = None, None
        ident = identity(e.environ)
        if rank is None and (rank := local_rank_arg(e.cmdline)) is not None:
            key = "--local-rank"
            ident = (*ident, ("--local-rank", str(rank)))
        self.rank, self.key, self.ident = rank, key, ident
        self.launcher = launcher_name(e.comm, e.cmdline)
        self.pattern = worker_pattern(e.comm, e.cmdline)


def _conflict(idents: Iterable[tuple[tuple[str, str], ...]]) -> bool:
    """Two of the identities give one rank variable different values (two ranks, not a rank and its workers)."""
    seen: dict[str, str] = {}
    for ident in idents:
        for k, v in ident:
            if seen.setdefault(k, v) != v:
                return True
    return False


def job_places(entries: Mapping[int, ProcessLike]) -> dict[int, JobPlace]:
    """pid -> its place in the job tree, for the processes of `entries` that belong to a job (the others are left
    out: role "process"). `entries` are the processes seen (pid, ppid, comm, cmdline, environ: ProcEntry or
    ProcessInfo): the whole node for `audit --ranks`, the audited processes and their ancestors otherwise.

    From the tree the kernel shows, in two passes over it (linear in processes; a parent cycle or a process
    that is its own parent is walked once):
    - a launcher is a program named as one (torchrun, srun, slurmstepd, mpirun, orted, prted, hydra, deepspeed,
      accelerate) above a rank or carrying rank variables itself (srun in an sbatch script inherits the batch
      step's SLURM_PROCID=0 while its tasks run under slurmstepd), a shell or wrapper carrying rank variables
      that waits on a child of the job, a process with rank variables above a launcher, or one whose children
      carry different ranks; it is above its ranks;
    - a rank is the topmost process below the launchers that carries a local rank (its environment, or
      `--local-rank=N` on its command line), or a process without one whose spawned workers, resource tracker or
      forkserver carry it (it set its own variables at run time: DeepSpeed's MPI discovery, os.environ["RANK"]);
    - everything below a rank is its worker (fork, spawn, forkserver, dataloader, compile) or helper (the
      resource tracker, torch_shm_manager, the forkserver, another program it runs), unless it carries a
      different rank (a rank started under it);
    - a job is the tree under its topmost launcher (a rank without a launcher seen is a job of its own);
    - PID 1 and the processes that adopt orphans (systemd, tini...) are never a rank or launcher by their children,
      and a worker or helper left carrying rank variables when its rank died is shown as such, with no rank."""
    children: dict[int, list[int]] = {}
    for pid, e in entries.items():
        if e.ppid is not None and e.ppid != pid and e.ppid in entries:
            children.setdefault(e.ppid, []).append(pid)
    order: list[int] = []
    parent: dict[int, int | None] = {}

    def walk(root: int) -> None:
        parent[root] = None
        queue, i = [root], 0
        while i < len(queue):
            for c in children.get(queue[i], ()):
                if c not in parent:
                    parent[c] = queue[i]
                    queue.append(c)
            i += 1
        order.extend(queue)

    for pid in sorted(entries):
        e = entries[pid]
        if e.ppid is None or e.ppid == pid or e.ppid not in entries:
            walk(pid)
    for pid in sorted(entries):  # what only a parent cycle reaches: walked from its smallest PID
        if pid not in parent:
            walk(pid)

    facts = {pid: _Facts(entries[pid]) for pid in order}
    below: dict[int, bool] = {}  # a local rank in its subtree
    launcher: dict[int, bool] = {}
    worker_child: dict[int, int] = {}  # a process's smallest child that carries rank variables as its worker would
    for pid in reversed(order):
        f, e = facts[pid], entries[pid]
        kids = [c for c in children.get(pid, ()) if parent[c] == pid]
        carrying = [c for c in kids if below[c]]
        below[pid] = f.rank is not None or bool(carrying)
        is_launcher = False
        reaper = pid == 1 or e.comm in REAPERS  # its children may be orphans: never a rank or launcher by them
        if carrying and f.pattern is None:
            ranked = [facts[c].ident for c in carrying if facts[c].rank is not None]
            is_launcher = f.launcher is not None or not reaper and (
                (f.rank is not None and (e.comm in WRAPPERS or any(launcher[c] for c in kids)))
                or _conflict([f.ident, *ranked] if f.rank is not None else ranked))
        elif f.launcher is not None and f.rank is not None and f.pattern is None:
            # A named launcher with rank variables and no rank under it here: srun in an sbatch script (its tasks
            # run under slurmstepd, not under it), torchrun before its ranks start. Never a rank.
            is_launcher = True
        launcher[pid] = is_launcher
        if f.rank is None and not is_launcher and f.pattern is None and e.comm not in WRAPPERS and not reaper:
            mine = [c for c in carrying if facts[c].rank is not None and not launcher[c]
                    and (facts[c].pattern is not None or entries[c].cmdline == e.cmdline)]
            if mine:
                worker_child[pid] = min(mine)

    out: dict[int, JobPlace] = {}
    rank_ident: dict[int, tuple[tuple[str, str], ...]] = {}
    for pid in order:
        f, e = facts[pid], entries[pid]
        up = parent[pid]
        above = out.get(up) if up is not None else None
        if above is not None and above.role in ("rank", "worker", "helper"):
            rank = above.rank_pid if above.role != "rank" else up
            assert rank is not None
            if f.rank is not None and _conflict([rank_ident[rank], f.ident]):  # a rank started under a rank
                out[pid] = JobPlace("rank", pid, None, above.job, f.rank, f.key)
                rank_ident[pid] = f.ident
                continue
            kind = f.pattern
            if kind is None:
                kind = "fork" if e.cmdline == entries[up].cmdline else "subprocess"  # type: ignore[index]
            role = "helper" if kind in HELPER_KINDS else "worker"
            if kind == "forkserver" and facts[up].pattern != "forkserver":  # type: ignore[index]
                role = "helper"  # the forkserver itself; its children are its rank's forkserver workers
            out[pid] = JobPlace(role, rank, kind, above.job)
            continue
        job = above.job if above is not None and above.role == "launcher" else None
        if launcher[pid]:
            out[pid] = JobPlace("launcher", None, f.launcher or e.comm, job or pid)
        elif f.rank is not None and f.pattern is not None and job is None:  # a worker whose rank is gone (orphaned)
            out[pid] = JobPlace("helper" if f.pattern in HELPER_KINDS else "worker", None, f.pattern, None)
        elif f.rank is not None:
            out[pid] = JobPlace("rank", pid, None, job or pid, f.rank, f.key,
                                "command line" if f.key == "--local-rank" else None)
            rank_ident[pid] = f.ident
        elif pid in worker_child:
            child = facts[worker_child[pid]]
            out[pid] = JobPlace("rank", pid, None, job or pid, child.rank, child.key, "children")
            rank_ident[pid] = child.ident
    return out


def places(procs: Iterable[ProcessLike], known: Mapping[int, ProcessLike] | None = None) -> dict[int, JobPlace]:
    """job_places of `procs` (their ancestors in `known`: read for a process audited alone), every one of `procs`
    given a place (role "process" outside any job)."""
    procs = list(procs)
    found = job_places({**(known or {}), **{p.pid: p for p in procs}})
    return {p.pid: found.get(p.pid) or JobPlace("process") for p in procs}


def roles(procs: Iterable[ProcessLike], known: Mapping[int, ProcessLike] | None = None,
          ) -> dict[int, tuple[str, int | None]]:
    """pid -> (role, the rank's PID for a worker or helper) for each of `procs` (see job_places)."""
    return {pid: (p.role, p.rank_pid if p.role in ("worker", "helper") else None)
            for pid, p in places(procs, known).items()}


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
    """audit's findings for each process as its job sees it (`check --pid`): a worker or helper owns no GPU without
    a context of its own, and a worker outside its rank's binding is NT408."""
    from numatune.analysis.locality import audit_findings

    place = places(procs, known)
    by_pid = {**(known or {}), **{p.pid: p for p in procs}}
    out: list[Finding] = []
    for p in procs:
        where = place[p.pid]
        if where.role not in ("worker", "helper") or where.rank_pid is None:
            out += audit_findings(topo, p)
            continue
        p = as_worker(p, where.rank_pid)
        out += audit_findings(topo, p)
        rank = by_pid.get(where.rank_pid)
        check = check_worker(p, rank, topo) if where.role == "worker" and rank is not None else None
        if check is not None and check.reason:
            out.append(NT408(check.reason, check.fix, f"pid {p.pid}"))
    return out


def job_order(audits: list[ProcessAudit]) -> list[ProcessAudit]:
    """Job by job (by the PID of its topmost process): its launchers (by PID), then its ranks by local rank, each
    followed by its workers and helpers (by PID); then workers whose rank was not audited; then other processes,
    as given."""
    def job_of(a: ProcessAudit) -> int | None:
        return a.place.job if a.place is not None else None

    by_job: dict[int | None, list[ProcessAudit]] = {}
    under: dict[int, list[ProcessAudit]] = {}
    for a in audits:
        by_job.setdefault(job_of(a), []).append(a)
        if a.role in ("worker", "helper") and a.rank_pid is not None:
            under.setdefault(a.rank_pid, []).append(a)
    out: list[ProcessAudit] = []
    for job in [*sorted(j for j in by_job if j is not None), None]:
        mine = by_job.get(job, [])
        out += sorted((a for a in mine if a.role == "launcher"), key=lambda a: a.process.pid)
        for r in sorted((a for a in mine if a.role == "rank"), key=lambda a: (a.process.rank is None,
                                                                              a.process.rank, a.process.pid)):
            out.append(r)
            out += sorted(under.pop(r.process.pid, []), key=lambda a: a.process.pid)
    for rest in under.values():  # a worker whose rank was not audited
        out += sorted(rest, key=lambda a: a.process.pid)
    out += [a for a in audits if a.role not in ("launcher", "rank", "worker", "helper")]
    return out
