"""The binding a process was given, recorded where the processes it starts can read it: NUMATUNE_BINDING.

`numatune launch` puts it in the environment of the command it execs, `numatune.bind()` in its own process's
environment when it binds; every child (a DataLoader or Pool worker, forked or spawned) inherits it. The worker
helpers (`bind_worker`, `bind_actor`, `bind_thread`) read it to stay within what the launcher gave the rank:
they may narrow that binding, never widen or move it. Format, version 1: one line of space-separated fields,
the version first, then key=value pairs (unknown keys are skipped; `-` is "none"):

    1 by=launch pid=578 node=0 cpus=0-5 mem=bind mems=0

`by` launch or bind; `pid` the process that was bound (the command launch exec'd keeps launch's PID);
`node` the NUMA node chosen; `cpus` the CPU mask (a kernel CPU list; `-` when the CPUs were not bound);
`mem` the memory policy (launch's --mem-policy names, `none`); `mems` its nodes. Pure: the caller reads
the environment and its own affinity.
"""

from __future__ import annotations

from numatune.cpulist import MAX_NODES, format_cpulist, parse_cpulist
from numatune.errors import NumatuneError
from numatune.mempolicy import (
    MPOL_BIND,
    MPOL_INTERLEAVE,
    MPOL_MODE_FLAGS,
    MPOL_PREFERRED,
    MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE,
)
from numatune.model._record import record
from numatune.model.launch import POLICY_SUPPORT, LaunchPlan, MemPolicy
from numatune.numbers import maybe_int

TYPE_CHECKING = False  # annotations only: launch's exec path imports this module (typing costs ~15 ms)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

VARIABLE = "NUMATUNE_BINDING"
VERSION = "1"
MAX_CHARS = 4096  # a record is one short line; a longer value is not one numatune wrote
BYS = ("launch", "bind")
# Inherited.by for no record: the mask and memory policy the process runs with (taskset, numactl, Slurm
# --cpu-bind, mpirun --bind-to, torchrun --numa-binding or the program itself gave them); never written.
OWN = "process"
# get_mempolicy's modes as launch's --mem-policy names (the others, default and local, limit nothing)
MODE_POLICIES = {MPOL_BIND: "bind", MPOL_INTERLEAVE: "interleave", MPOL_PREFERRED: "preferred",
                 MPOL_PREFERRED_MANY: "preferred-many", MPOL_WEIGHTED_INTERLEAVE: "weighted"}
# relation of a new binding to the inherited one, mildest first
RELATIONS = ("same", "narrows", "widens", "moves")


@record
class Inherited:
    """A binding recorded in NUMATUNE_BINDING."""

    by: str  # launch | bind | process (OWN: no record, the process's own mask and memory policy)
    pid: int | None
    node: int | None
    cpus: frozenset[int]  # empty: the CPUs were not bound
    mem: str  # a --mem-policy name, "none"
    mems: frozenset[int]
    narrowed: bool = False  # a record's binding cut down to what the process runs with now (it narrowed itself)

    def describe(self) -> str:
        """'the binding numatune launch gave pid 578 (node 0, CPUs 0-5, memory bind 0)'."""
        parts = [f"node {self.node}"] if self.node is not None else []
        if self.cpus:
            parts.append(f"CPUs {format_cpulist(self.cpus)}")
        if self.mem != "none":
            parts.append(f"memory {self.mem} {format_cpulist(self.mems)}")
        pid = f" pid {self.pid}" if self.pid is not None else ""
        if self.by == OWN:
            return (f"the binding this process runs with ({', '.join(parts)}: its own CPU mask and memory policy, "
                    "as taskset, numactl, Slurm --cpu-bind, mpirun --bind-to, torchrun --numa-binding or the "
                    "program set them)")
        who = "numatune launch" if self.by == "launch" else "numatune.bind()"
        since = ", narrowed since by the process itself" if self.narrowed else ""
        return f"the binding {who} gave{pid}{since} ({', '.join(parts) or 'nothing bound'})"

    def to_dict(self) -> dict:
        return {"by": self.by, "pid": self.pid, "node": self.node, "cpus": sorted(self.cpus),
                "cpulist": format_cpulist(self.cpus), "memory": {"policy": self.mem, "nodes": sorted(self.mems)},
                "narrowed": self.narrowed}


def _list(value: Iterable[int]) -> str:
    return format_cpulist(value) or "-"


def format_record(by: str, pid: int | None, node: int | None, cpus: Iterable[int], mem: str,
                  mems: Iterable[int]) -> str:
    """The NUMATUNE_BINDING value for a binding."""
    return (f"{VERSION} by={by} pid={'-' if pid is None else pid} node={'-' if node is None else node} "
            f"cpus={_list(cpus)} mem={mem or 'none'} mems={_list(mems)}")


def plan_record(plan: LaunchPlan, by: str, pid: int) -> str | None:
    """The record of what a launch plan binds; None when it binds nothing (an unbound --best-effort run,
    cpu_bind and mem_policy none), where the process keeps what it inherited."""
    nodes = tuple(plan.memory.nodes) if plan.memory.mode is not None else ()
    if plan.unbound or not (plan.cpus or nodes):
        return None
    return format_record(by, pid, plan.node, plan.cpus, plan.memory.policy if nodes else "none", nodes)


def parse_record(text: str) -> tuple[Inherited | None, str]:
    """(the record, "") or (None, why it is not one numatune can use)."""
    if len(text) > MAX_CHARS:
        return None, f"{VARIABLE} is {len(text)} characters long: not a record numatune wrote"
    tokens = text.split()
    if not tokens:
        return None, f"{VARIABLE} is empty"
    if tokens[0] != VERSION:
        return None, f"{VARIABLE} version {tokens[0][:20]!r}: this numatune reads version {VERSION}"
    fields: dict[str, str] = {}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if sep:
            fields.setdefault(key, value)
    by = fields.get("by", "")
    if by not in BYS:
        return None, f"{VARIABLE}: by={by[:20]!r}: expected launch or bind"
    try:
        pid = _number(fields.get("pid", "-"))
        node = _number(fields.get("node", "-"))
        cpus = _ids(fields.get("cpus", "-"), None)
        mems = _ids(fields.get("mems", "-"), MAX_NODES)
    except ValueError as exc:
        return None, f"{VARIABLE}: {exc}"
    mem = fields.get("mem", "none") or "none"
    if not cpus and mem == "none":
        return None, f"{VARIABLE} records no binding"
    return Inherited(by, pid, node, cpus, mem, mems), ""


def _number(value: str) -> int | None:
    if value == "-":
        return None
    try:
        number = maybe_int(value, VARIABLE) if value.isdigit() else None
    except NumatuneError:  # more digits than any number numatune reads
        number = None
    if number is None:
        raise ValueError(f"{value[:20]!r} is not a number")
    return number


def _ids(value: str, limit: int | None) -> frozenset[int]:
    if value == "-":
        return frozenset()
    return parse_cpulist(value) if limit is None else parse_cpulist(value, limit)


def holding(environ: Mapping[str, str], affinity: Iterable[int] | None) -> tuple[Inherited | None, str]:
    """The record in `environ` if it still holds for a process whose CPU mask is `affinity` (None: not
    checked): a mask wider than the record's CPUs means the record is stale (the process was re-bound since,
    or the variable reached another machine or container through the environment), and it is not used."""
    text = environ.get(VARIABLE)
    if text is None:
        return None, ""
    rec, why = parse_record(text)
    if rec is None:
        return None, f"{why}: ignored"
    if affinity is not None and rec.cpus:
        outside = frozenset(affinity) - rec.cpus
        if outside:
            return None, (f"{VARIABLE} ({rec.describe()}) no longer holds: this process runs on CPUs "
                          f"{format_cpulist(affinity)}, {format_cpulist(outside)} outside it: ignored")
    return rec, ""


def relation(rec: Inherited, cpus: Iterable[int], mems: Iterable[int]) -> str:
    """How a binding to `cpus` and memory `mems` (empty: left as they are) stands to the inherited one:
    same, narrows (within it), widens (reaches outside it) or moves (shares nothing with it)."""
    worst = 0
    for new, old in ((frozenset(cpus), rec.cpus), (frozenset(mems), rec.mems)):
        if not new or new == old:
            continue
        if not old or new < old:
            worst = max(worst, 1)
        elif new & old:
            worst = max(worst, 2)
        else:
            worst = max(worst, 3)
    return RELATIONS[worst]


def within_memory(rec: Inherited, mem: MemPolicy) -> tuple[MemPolicy, str]:
    """`mem` when its nodes are within the inherited record's, else the record's own policy kept (and why):
    a worker helper narrows the launcher's memory binding, never moves it."""
    if not rec.mems or mem.mode is None or frozenset(mem.nodes) <= rec.mems:
        return mem, ""
    mode = POLICY_SUPPORT[rec.mem][0] if rec.mem in POLICY_SUPPORT else None
    kept = MemPolicy(rec.mem if mode is not None else "none", mode, tuple(sorted(rec.mems)) if mode is not None else ())
    return kept, (f"memory: {mem.policy} {format_cpulist(mem.nodes)} would reach outside {rec.describe()} "
                  f"({VARIABLE}): kept its {rec.mem} {format_cpulist(rec.mems)}")


def policy_name(mode: int, nodes: Iterable[int]) -> tuple[str, frozenset[int]] | None:
    """(launch's policy name, nodes) of a get_mempolicy answer that limits where memory goes; None for the
    default and local policies (and a policy without nodes), which limit nothing."""
    name = MODE_POLICIES.get(mode & ~MPOL_MODE_FLAGS)
    nodes = frozenset(nodes)
    return (name, nodes) if name is not None and nodes else None


def given(rec: Inherited | None, pid: int, affinity: Iterable[int] | None, allowed: Iterable[int] | None,
          memory: tuple[str, frozenset[int]] | None) -> Inherited | None:
    """The outer limit of any binding this process makes for itself or its workers: what it was given, by
    anything. `rec` is the record that holds (holding()); `affinity` the process's current CPU mask (None: not
    live); `allowed` the CPUs it could have without any binder (its cgroup's cpuset, the online CPUs);
    `memory` its current memory policy (policy_name()). With a record: the record cut down to the current mask
    and policy (a rank that narrowed itself after launch is respected). Without one: the current mask where it
    is narrower than `allowed`, and the policy (by OWN); None when neither limits anything."""
    cur = frozenset(affinity) if affinity is not None else None
    if rec is not None:
        cpus = rec.cpus & cur if rec.cpus and cur is not None else rec.cpus
        mem, mems = rec.mem, rec.mems
        if memory is not None:
            both = rec.mems & memory[1]
            mem, mems = (rec.mem, both) if both == rec.mems else (memory if not both else (memory[0], both))
        cut = rec._replace(cpus=cpus or rec.cpus, mem=mem, mems=mems)
        return cut._replace(narrowed=(cut.cpus, cut.mems) != (rec.cpus, rec.mems))
    cpus = cur if cur is not None and allowed is not None and not frozenset(allowed) <= cur else frozenset()
    if not cpus and memory is None:
        return None
    mem, mems = memory if memory is not None else ("none", frozenset())
    return Inherited(OWN, pid, None, cpus, mem, mems)
