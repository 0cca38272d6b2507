"""numatune.bind(): bind the running process from inside, completely: every thread, the memory policy, the
pages it already touched. For frameworks that start their own workers (vLLM and SGLang workers, Ray
actors, DataLoader and multiprocessing pools), where `numatune launch` cannot sit in front of an exec.

    import numatune
    report = numatune.bind()            # rank -> GPU -> node exactly as `numatune launch` resolves it
    report = numatune.bind(node=1)      # or a node; cpu_bind=, mem_policy=, nic= as launch's options
    print(report.describe())            # or report.to_dict() (numatune.bind/1, docs/json-schemas.md)

What a late binding (sched_setaffinity or numa_bind inside the program) leaves behind, and what bind() does:
- Threads that already exist keep their old CPU mask: bind() sets the mask of every task in /proc/self/task
  (scanning again until no new thread appears) and reads each one back.
- set_mempolicy(2) changes the calling thread's policy only; no call sets another thread's. Threads the
  caller creates afterwards inherit it (and its mask), so call bind() first thing, from the thread that starts
  the others. Threads that already exist keep their own (default: local) policy, which with their new mask
  allocates on the bound node whenever it has free pages; the anonymous mappings that exist (heap, thread
  arenas and stacks, tensors) get the policy as a range policy (mbind), which holds for every thread. A
  thread pool can apply the caller's policy to its threads with `bind_thread` as its initializer.
- Pages first touched elsewhere stay there: bind() moves the process's own anonymous pages (mbind with
  MPOL_MF_MOVE, mapping by mapping, at most `max_move_bytes`) and reports what could not move and why
  (shared with forked workers, pinned, over the bound, a range policy the program set itself).
- A process that `numatune launch` bound (or a bind() in a parent process) carries that binding in
  NUMATUNE_BINDING: the worker helpers stay within it (they narrow it, never widen or move it), so a DataLoader
  worker of a rank launched with `--cpu-bind cores:6` keeps the rank's six cores, not the whole node. Without a
  record, or where the rank narrowed itself since, the mask and memory policy it runs with are the limit
  (taskset, numactl, Slurm --cpu-bind, mpirun --bind-to, torchrun --numa-binding).
- A binding the kernel refuses (EPERM from seccomp, no CAP_SYS_NICE) raises PermissionDenied starting NT410
  with the fix (numatune/analysis/binding_failures.py); best effort, the report carries the same line.
Best effort (`best_effort=True`): nothing raises for a binding that cannot be honoured (a node this machine
lacks); the report says why nothing was bound. NUMATUNE_BIND=0 in the environment turns bind() into a
no-op whose report says so. Importable without click or rich.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence

from numatune.cpulist import format_cpulist
from numatune.errors import NumatuneError
from numatune.model._record import record

TYPE_CHECKING = False  # typing costs ~15 ms to import; a worker's first call should not pay it
if TYPE_CHECKING:
    from typing import Any

DEFAULT_MAX_MOVE = 16 << 30  # bytes of already-touched memory bind() moves at most (a few seconds of migration)
DISABLE = "NUMATUNE_BIND"  # "0" turns bind() into a no-op that says so
OWN_KINDS = ("anon", "heap", "stack", "hugetlb")  # moved: the process's private anonymous memory
MAX_SCANS = 8  # passes over /proc/self/task while threads keep appearing

# The last binding applied in this process (mode, nodes, cpus): bind_thread repeats it, and a later bind()
# treats range policies it set itself as its own to replace.
_LAST: dict[str, Any] = {}


@record
class ThreadBinding:
    """One task of the process: its mask before and after (read back from the kernel)."""

    tid: int
    name: str
    before: tuple[int, ...]
    after: tuple[int, ...]
    error: str | None = None  # why its mask was not set ("exited", the kernel's refusal)


@record
class BindReport:
    """What bind() did. `bound` is False when nothing was applied: `skipped` says why."""

    bound: bool
    skipped: str | None
    pid: int
    node: int | None
    cpus: tuple[int, ...]
    memory_policy: str
    memory_nodes: tuple[int, ...]
    threads: tuple[ThreadBinding, ...] = ()
    pages_before: Mapping[int, int] = {}  # node -> resident pages of the process's own memory, before
    pages_after: Mapping[int, int] = {}
    moved: int = 0  # pages that left nodes outside the target
    left: Mapping[str, int] = {}  # reason -> pages left outside the target
    ranges: int = 0  # anonymous mappings given the memory policy as a range policy (mbind)
    env: Mapping[str, str] = {}  # variables set in os.environ (OMP_NUM_THREADS, the NIC's)
    reasons: tuple[str, ...] = ()  # launch's planning sentences
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0
    page_size: int = 4096
    plan: Any = None  # the LaunchPlan (None when skipped before planning)
    inherited: Any = None  # the binding NUMATUNE_BINDING recorded (plan.inherited.Inherited), when it holds
    within: bool = False  # planned within `inherited` (the worker helpers; bind() naming no placement)
    relation: str | None = None  # same | narrows | widens | moves: this binding against `inherited`

    @property
    def target_nodes(self) -> tuple[int, ...]:
        return self.memory_nodes or ((self.node,) if self.node is not None else ())

    @property
    def moved_from(self) -> dict[int, int]:
        """node -> pages fewer there than before, for the nodes outside the target (where the moved pages came
        from; a page freed meanwhile counts too)."""
        return {n: p - self.pages_after.get(n, 0) for n, p in sorted(self.pages_before.items())
                if n not in self.target_nodes and p > self.pages_after.get(n, 0)}

    @property
    def on_target(self) -> float:
        """The share of the process's own resident pages on the target nodes now (1.0 when it has none)."""
        total = sum(self.pages_after.values())
        if not total or not self.target_nodes:
            return 1.0
        return sum(p for n, p in self.pages_after.items() if n in self.target_nodes) / total

    def describe(self) -> str:
        if not self.bound:
            return f"numatune.bind: nothing bound: {self.skipped}"  # a kept inherited binding: in `skipped`
        set_ = [t for t in self.threads if t.error is None]
        parts = [f"numatune.bind: pid {self.pid} bound to node {self.node}"]
        if self.cpus:
            parts.append(f"CPUs {format_cpulist(self.cpus)} on {len(set_)} of {len(self.threads)} thread(s)")
        if self.memory_policy != "none":
            parts.append(f"memory {self.memory_policy} {format_cpulist(self.memory_nodes)}")
        parts.append(f"{self.moved} page(s) moved, {self.on_target:.1%} of its own pages on node(s) "
                     f"{format_cpulist(self.target_nodes)}")
        text = "; ".join(parts)
        if self.left:
            text += "; left: " + ", ".join(f"{n} {why}" for why, n in self.left.items())
        if self.inherited is not None and self.relation is not None:
            text += f"; {RELATION_WORDS[self.relation]} {self.inherited.describe()}"
        if self.plan is not None and self.plan.notes:  # why this node (no GPU), one cluster of a socket (SNC)
            text += "; note: " + "; ".join(self.plan.notes)
        return text

    def to_dict(self) -> dict[str, Any]:
        """The report as the numatune.bind/1 document (docs/json-schemas.md)."""
        from numatune.render.envelope import envelope

        plan = None
        if self.plan is not None:
            from numatune.render.launch_json import launch_document

            plan = launch_document(self.plan, "/")
        return envelope(
            "bind",
            bound=self.bound,
            skipped=self.skipped,
            pid=self.pid,
            node=self.node,
            cpus=list(self.cpus),
            cpulist=format_cpulist(self.cpus),
            memory={"policy": self.memory_policy, "nodes": list(self.memory_nodes), "ranges": self.ranges},
            threads=[{"tid": t.tid, "name": t.name, "before": format_cpulist(t.before),
                      "after": format_cpulist(t.after), "error": t.error} for t in self.threads],
            pages={"page_size": self.page_size, "before": {str(n): p for n, p in sorted(self.pages_before.items())},
                   "after": {str(n): p for n, p in sorted(self.pages_after.items())}, "moved": self.moved,
                   "moved_from": {str(n): p for n, p in self.moved_from.items()},
                   "on_target": round(self.on_target, 6), "left": dict(self.left)},
            env=dict(self.env),
            seconds=round(self.seconds, 6),
            warnings=list(self.warnings),
            inherited=None if self.inherited is None else {**self.inherited.to_dict(), "within": self.within,
                                                           "relation": self.relation},
            plan=plan,
        )


# BindReport.describe()'s words for its relation to the inherited binding
RELATION_WORDS = {"same": "the same as", "narrows": "within", "widens": "widens", "moves": "moves"}
# bind()'s keywords that are not launch's options
BIND_ONLY = ("move", "max_move_bytes", "set_env", "environ", "dry_run", "root", "inherit")


def _skipped(why: str, *, plan: Any = None, warnings: Sequence[str] = (), started: float = 0.0,
             inherited: Any = None, within: bool = False) -> BindReport:
    return BindReport(False, why, os.getpid(), plan.node if plan is not None else None, (), "none", (),
                      reasons=tuple(plan.reasons) if plan is not None else (), warnings=tuple(warnings),
                      seconds=time.perf_counter() - started if started else 0.0, plan=plan, inherited=inherited,
                      within=within, relation="same" if inherited is not None else None)


def options(node: int | None = None, *, gpu: str | int | None = None, rank: int | None = None,
            local_size: int | None = None, cpu_bind: str = "node", cpu_kind: str = "performance",
            reserve_cores: int = 0, allow_isolated: bool = False, mem_policy: str = "bind",
            mem_nodes: Sequence[int] | None = None, weights: Mapping[int, int] | None = None, nic: str = "none",
            nic_transport: str = "rdma", best_effort: bool = False) -> Any:
    """launch's options (LaunchOptions) from bind()'s keywords, checked as launch's command line checks them."""
    from numatune.errors import UsageError
    from numatune.model.launch import CPU_KIND_CHOICES, MEM_POLICIES, NIC_TRANSPORTS, LaunchOptions
    from numatune.plan.launch import parse_cpu_bind

    for name, value, choices in (("cpu_kind", cpu_kind, CPU_KIND_CHOICES), ("mem_policy", mem_policy, MEM_POLICIES),
                                 ("nic_transport", nic_transport, NIC_TRANSPORTS)):
        if value not in choices:
            raise UsageError(f"numatune.bind: {name}={value!r}: expected one of {', '.join(choices)}")
    for name, value in (("node", node), ("rank", rank), ("local_size", local_size), ("reserve_cores", reserve_cores)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise UsageError(f"numatune.bind: {name}={value!r}: expected a non-negative integer")
    if local_size == 0:
        raise UsageError("numatune.bind: local_size=0: expected at least 1")
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, (str, int))):
        raise UsageError(f"numatune.bind: gpu={gpu!r}: expected an index, a PCI address or a GPU UUID")
    for name, value, forms in (("cpu_bind", cpu_bind, "node, socket, exclusive, core-complex, cores:N or none"),
                               ("nic", nic, "none, auto, or a NIC's name or PCI address")):
        if not isinstance(value, str):
            raise UsageError(f"numatune.bind: {name}={value!r}: expected a string: {forms}")
    for name, value in (("allow_isolated", allow_isolated), ("best_effort", best_effort)):
        if not isinstance(value, bool):
            raise UsageError(f"numatune.bind: {name}={value!r}: expected True or False")
    if mem_nodes is not None:
        given = mem_nodes
        mem_nodes = tuple(given) if isinstance(given, (list, tuple, set, frozenset, range)) else None
        if mem_nodes is None or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in mem_nodes):
            raise UsageError(f"numatune.bind: mem_nodes={given!r}: expected a list of node ids (non-negative integers)")
        if not mem_nodes:
            raise UsageError("numatune.bind: mem_nodes is empty")
    if weights is not None and (not isinstance(weights, Mapping) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 and isinstance(w, int)
            and not isinstance(w, bool) and 1 <= w <= 255 for n, w in weights.items())):
        raise UsageError(f"numatune.bind: weights={weights!r}: expected {{node: weight}} with weights 1-255, "
                         "as the kernel accepts them")
    try:
        parsed = parse_cpu_bind(cpu_bind)
    except UsageError as exc:
        _in_keyword_words(exc)
        raise
    return LaunchOptions(rank=rank, local_size=local_size, gpu=None if gpu is None else str(gpu), node=node,
                         cpu_bind=parsed, reserve_cores=reserve_cores,
                         allow_isolated=allow_isolated, mem_policy=mem_policy,
                         mem_nodes=tuple(sorted(set(mem_nodes))) if mem_nodes is not None else None,
                         weights=dict(weights) if weights is not None else None, via="direct",
                         best_effort=best_effort, cpu_kind=cpu_kind, nic=nic, nic_transport=nic_transport)


def bind(node: int | None = None, *, gpu: str | int | None = None, rank: int | None = None,
         local_size: int | None = None, cpu_bind: str = "node", cpu_kind: str = "performance",
         reserve_cores: int = 0, allow_isolated: bool = False, mem_policy: str = "bind",
         mem_nodes: Sequence[int] | None = None, weights: Mapping[int, int] | None = None, nic: str = "none",
         nic_transport: str = "rdma", best_effort: bool = False, move: bool = True,
         max_move_bytes: int = DEFAULT_MAX_MOVE, set_env: bool = True,
         environ: Mapping[str, str] | None = None, dry_run: bool = False, root: str | None = None,
         inherit: bool | None = None) -> BindReport:
    """Bind this whole process as `numatune launch` would bind a rank, from inside it; returns a BindReport.

    The node comes from `node`, else from the rank's GPU (`gpu`, else LOCAL_RANK/SLURM_LOCALID/... and
    CUDA_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES, as launch reads them). The keywords are
    launch's options (cpu_bind: node, socket, exclusive, core-complex, cores:N, none; mem_policy: bind,
    preferred, preferred-many, interleave, weighted, cxl-spill, socket, socket-interleave, gpu-memory, none);
    errors name them as keywords (`mem_policy gpu-memory needs a GPU`). A re-bind plans within the cgroup's
    CPUs (cpuset.cpus.effective); inside a Slurm step within the step's CPUs. Unless the call names its own
    node, gpu or mem_nodes (or inherit=False), it never widens what the process was given: its current CPU mask
    and memory policy are the outer limit (taskset, numactl, Slurm --cpu-bind, mpirun --bind-to, torchrun
    --numa-binding or the program itself set them), cut from the NUMATUNE_BINDING record when there is one.

    Applies: the CPU mask to every thread; the memory policy to the calling thread (threads it creates
    later inherit it; see `bind_thread` for a pool's threads) and, as a range policy, to the anonymous
    memory that exists; and moves up to `max_move_bytes` of the process's own pages onto the node(s)
    (`move=False` moves none). With `set_env`, the variables launch would export (OMP_NUM_THREADS, the
    NIC's) are set in os.environ where unset: they reach child processes and libraries initialised later.

    `dry_run` plans only (the report's plan, cpus and memory say what would be bound; nothing is applied),
    for this machine or for a saved `root` (a snapshot or fixture tree, as `numatune --root R launch --dry-run`);
    `environ` replaces os.environ for the planning (LOCAL_RANK, CUDA_VISIBLE_DEVICES, NUMATUNE_BIND, ...).

    In a process that `numatune launch` or an earlier bind() bound, NUMATUNE_BINDING records that binding
    (plan/inherited.py; ignored once this process's mask reaches outside it). `inherit=True` plans within it
    (narrower CPUs and memory nodes, never others: a memory policy that would reach outside keeps the
    recorded one); `None` (the default) does so unless the call names its own placement (node, gpu or
    mem_nodes); `False` plans as if nothing were recorded. The report says how the binding stands to the
    recorded one (`relation`: same, narrows, widens, moves; a warning for the last two), and a successful
    bind() records what it bound in os.environ for the processes this one starts.

    Raises BindingError (launch exits 7 for it) when the binding cannot be honoured, UsageError for
    impossible keywords; with `best_effort=True` a binding error returns an unbound report instead.
    """
    started = time.perf_counter()
    if environ is not None and not isinstance(environ, Mapping):
        from numatune.errors import UsageError

        raise UsageError(f"numatune.bind: environ is a {type(environ).__name__}: expected a mapping, as os.environ")
    if not isinstance(max_move_bytes, int) or isinstance(max_move_bytes, bool) or max_move_bytes < 0:
        from numatune.errors import UsageError

        raise UsageError(f"numatune.bind: max_move_bytes={max_move_bytes!r}: expected a non-negative integer")
    if root is not None:
        root = _root_keyword(root)
    env = os.environ if environ is None else environ
    if env.get(DISABLE, "").strip() == "0":
        return _skipped(f"{DISABLE}=0 in the environment: binding is turned off", started=started)
    if inherit is not None and not isinstance(inherit, bool):
        from numatune.errors import UsageError

        raise UsageError(f"numatune.bind: inherit={inherit!r}: expected True, False or None")
    opts = options(node, gpu=gpu, rank=rank, local_size=local_size, cpu_bind=cpu_bind, cpu_kind=cpu_kind,
                   reserve_cores=reserve_cores, allow_isolated=allow_isolated, mem_policy=mem_policy,
                   mem_nodes=mem_nodes, weights=weights, nic=nic, nic_transport=nic_transport,
                   best_effort=best_effort)
    if root is not None and not dry_run:
        from numatune.errors import UsageError

        raise UsageError(f"numatune.bind: root={root!r} needs dry_run=True: bind() applies to this process only")
    from numatune.live.bind import plan_live
    from numatune.plan.inherited import OWN, VARIABLE, given, holding, relation, within_memory
    from numatune.system.host import Host

    # The binding a launcher (or an earlier bind()) recorded: only this process's own mask says whether it holds.
    # Either way the mask and memory policy the process runs with now are the outer limit (what taskset,
    # numactl, Slurm, mpirun, torchrun or the program itself gave it): `given`, never widened by the helpers.
    affinity = None if root is not None else frozenset(os.sched_getaffinity(os.getpid()))
    rec, stale = holding(env, affinity)
    if affinity is not None:
        rec = given(rec, os.getpid(), affinity, _unbound_cpus(), _current_memory())
    within = rec is not None and (inherit if inherit is not None else
                                  node is None and gpu is None and mem_nodes is None)
    early = [stale] if stale else []
    inherited_node = within and opts.node is None and opts.gpu is None and rec.node is not None
    if inherited_node:
        opts = opts._replace(node=rec.node)  # the node the launcher resolved: no second GPU lookup
    try:
        plan = plan_live(Host.open(root or "/"), env, opts, rebind=True,
                         within=rec.cpus if within and rec.cpus else None,
                         within_source=(rec.describe() + (f" ({VARIABLE})" if rec.by != OWN else "")) if within else "")
    except NumatuneError as exc:
        _in_keyword_words(exc)
        if within:
            exc.hint = exc.hint or f"inherit=False binds outside {rec.describe()}"
        if not best_effort:
            raise
        kept = f"; kept {rec.describe()}" if within else ""
        return _skipped(f"{exc.message}; nothing bound (best effort){kept}", warnings=(*early, exc.message),
                        started=started, inherited=rec, within=within)
    if inherited_node:
        source = f"{VARIABLE}: {rec.describe()}"
        plan = plan._replace(node_source=source, reasons=tuple(
            f"node: {plan.node} ({source})" if r == f"node: {plan.node} (--node)" else r for r in plan.reasons))
    if within:
        mem, why = within_memory(rec, plan.memory)
        if why:
            plan = plan._replace(memory=mem, reasons=(*plan.reasons, why))
    if plan.unbound:
        why = "; ".join(w for w in plan.warnings if "best-effort" in w) or "the plan is unbound"
        return _skipped(why + (f"; kept {rec.describe()}" if within else ""), plan=plan,
                        warnings=(*early, *plan.warnings), started=started, inherited=rec, within=within)
    mem = plan.memory
    nodes = tuple(mem.nodes) if mem.mode is not None else ()
    how = relation(rec, plan.cpus, nodes) if rec is not None else None
    warnings = [*early, *plan.warnings]
    if how in ("widens", "moves"):
        new = ", ".join(p for p in (f"node {plan.node}" if plan.node is not None else "",
                                    f"CPUs {format_cpulist(plan.cpus)}" if plan.cpus else "",
                                    f"memory {mem.policy} {format_cpulist(nodes)}" if nodes else "") if p)
        warnings.append(f"{how} {rec.describe()}: to {new} (asked for explicitly; the worker helpers stay within it)")
    if dry_run:
        return BindReport(False, "dry run: nothing applied", os.getpid(), plan.node, tuple(plan.cpus), mem.policy,
                          nodes, env=dict(plan.env), reasons=tuple(plan.reasons), warnings=tuple(warnings),
                          seconds=time.perf_counter() - started, plan=plan, inherited=rec, within=within, relation=how)
    reset = _LAST.get("mode") is not None  # mem_policy none after a bind() that set one: back to the default
    try:
        report = _apply(plan, opts, move, max_move_bytes, set_env, warnings, started)
    except NumatuneError as exc:
        if not best_effort:
            raise
        return _skipped(f"{exc.message}; stopped (best effort)", plan=plan, warnings=[*warnings, exc.message],
                        started=started, inherited=rec, within=within)
    _record(report, None if reset else rec)
    return report._replace(inherited=rec, within=within, relation=how)


def _unbound_cpus() -> frozenset[int] | None:
    """The CPUs this process could run on without any binder: its cgroup's cpuset (cpuset.cpus.effective)
    within the online CPUs; None when neither is readable."""
    from numatune.live.bind import cgroup_cpuset
    from numatune.system.host import Host

    host = Host.open("/")
    online = host.read_cpulist("/sys/devices/system/cpu/online")
    cpuset, _ = cgroup_cpuset(host)
    if cpuset is None:
        return online or None
    return cpuset & online if online else cpuset


def _current_memory() -> tuple[str, frozenset[int]] | None:
    """The calling thread's memory policy as (launch's policy name, nodes) where it limits where memory goes
    (numactl --membind, an inherited set_mempolicy); None for the default or local policy, or unreadable."""
    from numatune.plan.inherited import policy_name
    from numatune.system import memsys

    try:
        mode, nodes = memsys.get_mempolicy()
    except NumatuneError:  # no NUMA syscalls here (ENOSYS, a filter): nothing known limits the memory
        return None
    return policy_name(mode, nodes)


def _record(report: BindReport, rec: Any) -> None:
    """Write what bind() bound to NUMATUNE_BINDING in os.environ, for the processes this one starts (its
    DataLoader and pool workers). What it left alone (cpu_bind="none", mem_policy="none" where no earlier bind()
    set a policy to undo) keeps the inherited record's `rec`."""
    from numatune.plan.inherited import VARIABLE, format_record

    cpus = report.cpus or (rec.cpus if rec is not None else ())
    policy, nodes = report.memory_policy, report.memory_nodes
    if policy == "none" and rec is not None:  # the inherited policy still holds
        policy, nodes = rec.mem, tuple(rec.mems)
    if cpus or policy != "none":
        os.environ[VARIABLE] = format_record("bind", report.pid, report.node, cpus, policy, nodes)


def _root_keyword(root: object) -> str:
    """bind()'s `root` as Host.open takes it: a path as text (a str or a pathlib.Path); bytes, a number or a path
    holding NUL are UsageError naming the keyword, never a TypeError from deep in the root's reader."""
    from numatune.errors import UsageError

    path = os.fspath(root) if isinstance(root, os.PathLike) else root
    if not isinstance(path, str) or not path or "\0" in path:
        raise UsageError(f"numatune.bind: root={repr(root)[:80]}: expected a path as text (a str or a pathlib.Path): a "
                         "snapshot archive or a saved tree")
    return path


def _in_keyword_words(exc: NumatuneError) -> None:
    """The planner's errors name launch's option, a caller of bind() wrote the keyword: `--mem-policy gpu-memory
    needs a GPU` reads `mem_policy gpu-memory needs a GPU`. The keywords are options()'s own parameters."""
    import re

    code = options.__code__
    names = [n.replace("_", "-") for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
    flag = re.compile(r"--(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b(?!-)")

    def words(text: str) -> str:
        return flag.sub(lambda m: m[1].replace("-", "_"), text)

    exc.message = words(exc.message)
    exc.args = (exc.message, *exc.args[1:])
    if exc.hint:
        exc.hint = words(exc.hint)


# os.strerror of the refusals, back to their errno (a thread's error is kept as the kernel's words)
_REFUSALS = {os.strerror(e): e for e in (1, 13)}  # EPERM, EACCES


def _apply(plan: Any, opts: Any, move: bool, max_move_bytes: int, set_env: bool, warnings: list[str],
           started: float) -> BindReport:
    from numatune.analysis.binding_failures import refused
    from numatune.errors import PermissionDenied
    from numatune.system import memsys
    from numatune.system.host import Host

    host = Host.open("/")
    cpus = tuple(plan.cpus)
    threads: tuple[ThreadBinding, ...] = ()
    if cpus:
        threads = bind_threads(host, cpus)
        failed = [t for t in threads if t.error and t.error != "exited"]
        if failed and len(failed) == len(threads):
            line = refused("sched_setaffinity", _REFUSALS.get(failed[0].error or "", 0), format_cpulist(cpus))
            if line is not None:
                raise PermissionDenied(line + " (every thread)")
            raise NumatuneError(f"sched_setaffinity({format_cpulist(cpus)}) refused for every thread: "
                                f"{failed[0].error}")
        warnings += [f"thread {t.tid} ({t.name}): mask not set: {t.error}" for t in failed]
    mem = plan.memory
    try:
        try:
            if mem.mode is not None:
                memsys.set_mempolicy(mem.mode, mem.nodes)
            elif _LAST.get("mode") is not None:  # mem_policy none after a bind() that set one: back to the default
                memsys.set_mempolicy(memsys.MPOL_DEFAULT)
        except memsys.SyscallFailed as exc:
            line = refused("set_mempolicy", exc.errno, f"{mem.policy}, nodes {format_cpulist(mem.nodes)}")
            if line is None:
                raise
            raise PermissionDenied(line) from None
    except NumatuneError as exc:
        if not opts.best_effort or not cpus:
            raise
        warnings.append(f"{exc.message}: the CPUs are bound, the memory policy is not (best effort)")
        mem = mem._replace(policy="none", mode=None, nodes=())
    targets = tuple(mem.nodes) if mem.mode is not None else ((plan.node,) if plan.node is not None else ())
    mode = mem.mode if mem.mode is not None else memsys.MPOL_BIND
    ps = memsys.page_size()
    before = after = {}
    moved = ranges = 0
    left: dict[str, int] = {}
    if targets:
        before, after, moved, left, ranges = move_own_pages(host, mode, targets, keep_policy=mem.mode is not None,
                                                            move=move, budget=max_move_bytes, ps=ps)
    set_vars: dict[str, str] = {}
    if set_env:
        for key, value in plan.env.items():
            if key not in os.environ:
                os.environ[key] = value
                set_vars[key] = value
    _LAST.update(mode=mem.mode, nodes=tuple(mem.nodes), cpus=cpus)
    nodes = tuple(mem.nodes) if mem.mode is not None else ()
    return BindReport(True, None, os.getpid(), plan.node, cpus, mem.policy, nodes,
                      threads, before, after, moved, left, ranges, set_vars, tuple(plan.reasons),
                      tuple(warnings), time.perf_counter() - started, ps, plan)


def bind_threads(host: Any, cpus: Sequence[int]) -> tuple[ThreadBinding, ...]:
    """Set `cpus` as the mask of every task of this process, scanning /proc/self/task again until a pass
    finds no thread it has not seen (a thread started meanwhile by one not yet bound); each mask read back."""
    want = set(cpus)
    seen: dict[int, ThreadBinding] = {}
    for _ in range(MAX_SCANS):
        tids = sorted(int(t) for t in host.listdir("/proc/self/task") if t.isdigit())
        new = [t for t in tids if t not in seen]
        if not new:
            break
        for tid in new:
            name = (host.read_optional(f"/proc/self/task/{tid}/comm") or "").strip()
            before: tuple[int, ...] = ()
            try:
                before = tuple(sorted(os.sched_getaffinity(tid)))
                os.sched_setaffinity(tid, want)
                seen[tid] = ThreadBinding(tid, name, before, tuple(sorted(os.sched_getaffinity(tid))))
            except ProcessLookupError:
                seen[tid] = ThreadBinding(tid, name, (), (), "exited")
            except OSError as exc:
                seen[tid] = ThreadBinding(tid, name, before, before, exc.strerror or str(exc))
    return tuple(seen[t] for t in sorted(seen))


def _own_mappings(host: Any) -> tuple[list[Any], list[tuple[int, int, str]]]:
    """(numa_maps placements, sorted (start, end, path) ranges of /proc/self/maps) of this process."""
    from numatune.readers.procs import parse_maps, parse_numa_maps

    text = host.read_optional("/proc/self/numa_maps") or ""
    placements = list(parse_numa_maps(text, per_mapping=True).by_mapping or ())
    ranges = [(lo, hi, path) for lo, hi, _, path in parse_maps(host.read_optional("/proc/self/maps") or "")]
    return placements, ranges


def _range_at(ranges: list[tuple[int, int, str]], addr: int) -> tuple[int, str] | None:
    """(end, path) of the mapping holding `addr`. The two files are read one after the other and Python
    allocates in between: a new arena next to a mapping merges with it, so a numa_maps start may now lie
    inside a wider range of maps, whose end still closes it."""
    from bisect import bisect_right

    i = bisect_right(ranges, (addr, 1 << 64)) - 1
    if i >= 0 and ranges[i][0] <= addr < ranges[i][1]:
        return ranges[i][1], ranges[i][2]
    return None


def _pages(placements: Sequence[Any], ps: int) -> dict[int, int]:
    """node -> pages (in base pages of `ps`) of the process's own memory."""
    out: dict[int, int] = {}
    for m in placements:
        if m.kind in OWN_KINDS:
            for n, p in m.pages.items():
                out[n] = out.get(n, 0) + p * (m.page_size // ps)
    return out


def move_own_pages(host: Any, mode: int, targets: Sequence[int], *, keep_policy: bool, move: bool, budget: int,
                   ps: int) -> tuple[dict[int, int], dict[int, int], int, dict[str, int], int]:
    """Give the process's own anonymous mappings the policy and move their pages onto `targets`.

    Each mapping (heap, stacks, thread arenas, anonymous mmaps, resident or only reserved) gets
    mbind(mode, targets), with MPOL_MF_MOVE when it has pages elsewhere and `budget` bytes allow, unless it
    carries a range policy the program set itself (kept; a policy a previous bind() set is replaced).
    `keep_policy` False (mem_policy none) only moves, and resets each range to the default policy.
    Shared memory (shm, memfd) is never touched: other processes map it. Returns (pages by node before,
    after, pages moved off other nodes, reason -> pages left off the targets, mappings given the policy).
    """
    from numatune.system import memsys

    want = frozenset(targets)
    placements, ranges = _own_mappings(host)
    before = _pages(placements, ps)
    left: dict[str, int] = {}

    def leave(why: str, pages: int) -> None:
        if pages:
            left[why] = left.get(why, 0) + pages

    ours = (_LAST.get("mode"), frozenset(_LAST.get("nodes", ())))
    tried: list[tuple[int, int]] = []
    given = 0
    remaining = budget
    for m in placements:
        off = sum(p for n, p in m.pages.items() if n not in want) * (m.page_size // ps)
        if m.kind == "shm":
            leave("shared memory (shm, memfd): other processes map it, not moved", off)
            continue
        if m.kind not in OWN_KINDS:
            continue
        found = _range_at(ranges, m.start)
        if found is None:
            leave("unmapped while binding", off)
            continue
        end, path = found
        if path.startswith("[v"):  # [vdso], [vvar], [vsyscall]: the kernel's, never migratable
            continue
        try:
            vma_mode, vma_nodes = memsys.get_mempolicy(m.start)
        except NumatuneError:
            leave("unmapped while binding", off)
            continue
        if vma_mode != memsys.MPOL_DEFAULT and (vma_mode & ~memsys.MPOL_MODE_FLAGS, vma_nodes) != ours:
            leave("a range policy the program set (mbind) is kept", off)
            continue
        moving = bool(off) and move and off * ps <= remaining
        if off and not moving:
            leave("not moved (move=False)" if not move else f"over max_move_bytes ({budget} bytes)", off)
        if not (moving or keep_policy or vma_mode != memsys.MPOL_DEFAULT):
            continue
        try:
            if moving or keep_policy:
                memsys.mbind(m.start, end - m.start, mode, want, memsys.MPOL_MF_MOVE if moving else 0)
            if not keep_policy:  # and a range policy a previous bind() set goes too
                memsys.mbind(m.start, end - m.start, memsys.MPOL_DEFAULT)
        except memsys.SyscallFailed as exc:
            leave(f"mbind refused: {exc.message}", off)
            continue
        given += keep_policy
        if moving:
            remaining -= off * ps
            tried.append((m.start, end))
    if not tried:  # nothing moved: the kernel's numa_maps walk (every page of the process) is not repeated
        return before, dict(before), 0, left, given
    placements, _ = _own_mappings(host)
    after = _pages(placements, ps)
    off_before = sum(p for n, p in before.items() if n not in want)
    off_after = sum(p for n, p in after.items() if n not in want)
    for start, end in tried:  # what stayed in the mappings that were moved: the kernel says why, page by page
        from numatune.placement.move import why_left
        from numatune.placement.pages import page_status

        status = page_status(start, end, ps=ps)
        if any(s >= 0 and s not in want for s in status):
            for why, n in why_left(start, status, [(0, end - start, sorted(want))], ps, False).items():
                leave(why, n)
    return before, after, max(0, off_before - off_after), left, given


def bind_thread() -> bool:
    """Give the calling thread the memory policy and CPU mask of this process's last bind(), else of the
    binding `numatune launch` (or a bind() in a parent process) recorded in NUMATUNE_BINDING while it still
    holds; False when there is neither. For pools whose threads exist before bind() or are started by
    threads that were not bound: ThreadPoolExecutor(initializer=numatune.bind_thread)."""
    from numatune.system import memsys

    if _LAST:
        cpus, mode, nodes = _LAST["cpus"], _LAST["mode"], _LAST["nodes"]
    else:
        from numatune.model.launch import POLICY_SUPPORT
        from numatune.plan.inherited import holding

        rec, _ = holding(os.environ, os.sched_getaffinity(os.getpid()))  # the main thread's: a library moved this one
        if rec is None:
            return False
        cpus, nodes = rec.cpus, tuple(sorted(rec.mems))
        mode = POLICY_SUPPORT[rec.mem][0] if rec.mem in POLICY_SUPPORT and nodes else None
    if cpus:
        os.sched_setaffinity(0, cpus)
    if mode is not None:
        memsys.set_mempolicy(mode, nodes)
    return True


_REPORTS: list[BindReport] = []


def last_report() -> BindReport | None:
    """The report of the last bind() a worker helper made in this process (None before one ran)."""
    return _REPORTS[-1] if _REPORTS else None


class BindWorker:
    """A picklable callable that binds the process it runs in: a DataLoader `worker_init_fn`, a
    multiprocessing / torch.multiprocessing Pool `initializer`, or the first line of a worker's entry point.

    Arguments it is called with (DataLoader's worker id, a pool's initargs) are passed on to `then`, the
    caller's own initializer, which runs after the binding. `report_to` (a path; "{pid}" is replaced) gets
    the report as JSON. Keywords are bind()'s; best_effort defaults to True here: a worker that cannot be
    bound keeps running unbound (its report, `last_report()`, says why). inherit defaults to True: in a rank
    that `numatune launch` or bind() bound (NUMATUNE_BINDING), each worker stays within the rank's binding, also
    with node= or gpu= given; it may narrow it, never widen or move it (inherit=False binds as asked).
    """

    def __init__(self, then: Callable[..., Any] | None = None, report_to: str | None = None, **kw: Any) -> None:
        kw.setdefault("best_effort", True)
        kw.setdefault("inherit", True)
        options(**{k: v for k, v in kw.items() if k not in BIND_ONLY})
        self.then = then
        self.report_to = report_to
        self.kw = kw

    def __call__(self, *args: Any) -> BindReport:
        report = bind(**self.kw)
        _REPORTS.append(report)
        if self.report_to:
            from numatune.render.envelope import dumps
            from numatune.system.outfile import write_file

            write_file(self.report_to.replace("{pid}", str(os.getpid())), dumps(report.to_dict()) + "\n")
        if self.then is not None:
            self.then(*args)
        return report


def bind_worker(then: Callable[..., Any] | None = None, *, report_to: str | None = None, **kw: Any) -> BindWorker:
    """A worker_init_fn / initializer that binds each worker process (see BindWorker):

        DataLoader(ds, num_workers=4, worker_init_fn=numatune.bind_worker())    # the rank's node
        torch.multiprocessing.Pool(4, initializer=numatune.bind_worker(node=1))
    """
    return BindWorker(then, report_to, **kw)


def bind_actor(**kw: Any) -> BindReport:
    """Bind a Ray actor (or task) from its __init__: Ray gives each actor its GPUs by setting
    CUDA_VISIBLE_DEVICES to their indices, so the actor is rank 0 of its own view and its first visible
    GPU names the node, as launch resolves CUDA_VISIBLE_DEVICES. Where a local rank is set (Ray Train sets
    LOCAL_RANK, and shows each worker the node's GPUs) launch's rule applies unchanged. Keywords are bind()'s
    (rank defaults to 0 without a local rank variable, best_effort to True: an actor without a GPU, or on a
    node without it, runs unbound and says why; inherit to True, as bind_worker's)."""
    from numatune.model.resolve import RANK_VARS

    env = os.environ if kw.get("environ") is None else kw["environ"]
    if not any(env.get(key, "").strip() for key, _ in RANK_VARS):  # Ray Train sets LOCAL_RANK: launch's rule
        kw.setdefault("rank", 0)
    kw.setdefault("best_effort", True)
    kw.setdefault("inherit", True)
    report = bind(**kw)
    _REPORTS.append(report)
    return report
