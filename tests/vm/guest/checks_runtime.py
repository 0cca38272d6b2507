"""Checks that need a real kernel acting: `launch` binds, `audit` sees pages, `irq` moves IRQs.

Issue items 2-4. Small workloads (toucher.py) are started in the guest and looked at from
outside with the kernel's own views: sched_getaffinity, /proc/PID/numa_maps, `numastat -p`,
/proc/irq/N/smp_affinity_list.

A numatune start costs 10-20 s in a TCG guest (Python imports over 9p), so work is batched:
the launches of the policy check run concurrently, one `audit` call covers every audited
process, and one apply/restore round serves both IRQ checks. The shared parts are computed
once per boot and cached on the Context.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vm_checks import Context, check
from vm_guest import (
    READY_TIMEOUT,
    CheckFailed,
    NotImplementedYet,
    irq_affinity,
    msi_irqs,
    numatune,
    numatune_json,
    pages_by_node,
    parse_cpulist,
    read,
    run,
    safe_to_bind_to_cxl,
    spawn_toucher,
    stop,
    wait_for,
)

TOUCH_MIB = 64  # audited processes: large against the interpreter's own ~10 MB
LAUNCH_MIB = 32  # launched children: up to ten run at once, most of them on node 1 (1 GiB)
#: The launched process that audit must call local: a realistic working set, so the shared
#: library pages that other processes faulted in on node 0 stay a small share (see KNOWN.md).
LOCAL_MIB = 128
TOUCHER = Path(__file__).with_name("toucher.py")


_HELP: dict[str, str] = {}


def _require(sub: str) -> str:
    """Help text of a numatune subcommand (cached: a start costs seconds in TCG); fails the
    check when the subcommand does not exist yet."""
    if sub not in _HELP:
        res = numatune(*sub.split(), "--help", timeout=120)
        if res.returncode != 0:
            raise NotImplementedYet(f"`numatune {sub}` is not available (yet):\n{res.summary(600)}")
        _HELP[sub] = res.stdout
    return _HELP[sub]


def _numastat_mb(pid: int) -> dict[int, float]:
    """Per-node totals (MB) from `numastat -p PID`."""
    res = run(["numastat", "-p", str(pid)], check=True)
    header: list[int] = []
    for line in res.stdout.splitlines():
        if re.match(r"\s+Node \d+", line):
            header = [int(x) for x in re.findall(r"Node (\d+)", line)]
        elif line.startswith("Total") and header:
            vals = [float(x) for x in line.split()[1:]]
            return dict(zip(header, vals, strict=False))
    raise CheckFailed(f"cannot parse numastat -p:\n{res.stdout}")


def _share(bytes_by_node: dict[str, int], nodes: set[int]) -> float:
    total = sum(bytes_by_node.values())
    return sum(v for k, v in bytes_by_node.items() if int(k) in nodes) / total if total else 0.0


@dataclass
class Launched:
    """One `numatune launch ... -- toucher` run: its process and the toucher's self-report."""

    label: str
    argv: list[str]
    proc: subprocess.Popen[bytes]
    ready: Path
    report: dict[str, Any] | None = None
    error: str | None = None
    stderr: str = ""

    def finish(self) -> None:
        """Wait for the report (or the launcher's exit) and fill report/error."""
        wait_for(lambda: self.ready.exists() or self.proc.poll() is not None, timeout=READY_TIMEOUT)
        if self.ready.exists():
            self.report = json.loads(self.ready.read_text())
            return
        if self.proc.poll() is None:
            stop(self.proc)
        out, err = self.proc.communicate()
        self.stderr = err.decode(errors="replace")
        self.error = (f"$ {' '.join(self.argv)}\n-> rc={self.proc.returncode}, the child never reported\n"
                      f"stdout: {out.decode(errors='replace')[-600:]}\n"
                      f"stderr: {self.stderr[-1500:]}")

    def require(self) -> dict[str, Any]:
        if self.report is None:
            raise CheckFailed(self.error or f"{self.label}: no report")
        return self.report


def _start_launch(label: str, args: list[str], out: Path, stay: bool = False, mib: int = LAUNCH_MIB) -> Launched:
    """Start `numatune launch -q ARGS -- python toucher.py MIB READY [--exit]` (not waiting)."""
    ready = out / f"launch-{label}.json"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "numatune", "launch", "-q", *args, "--",
            sys.executable, str(TOUCHER), str(mib), str(ready), *([] if stay else ["--exit"])]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return Launched(label, argv, proc, ready)


#: MiB a CXL-resident workload touches. QEMU 7.2 serves CXL memory as MMIO (every guest access
#: is a trip through the device model), so a Python interpreter bound there crawls; a `dd`
#: holding one buffer is used instead (blocked writing into a pipe nobody reads, it stays alive).
CXL_MIB = 6  # the audited CXL-resident process: large against dd's mapped libc pages
CXL_LAUNCH_MIB = 2  # launched onto the CXL node: only where its pages land matters


def _dd_argv(mib: int) -> list[str]:
    return ["dd", "if=/dev/zero", f"bs={mib}M", "count=1", "status=none"]


def _big_mapping(pid: int, mib: int) -> tuple[str, dict[int, int]] | None:
    """(policy, bytes per node) of the anonymous mapping of at least 90% of ``mib`` MiB."""
    for line in read(f"/proc/{pid}/numa_maps", "").splitlines():
        nodes = {int(n): int(c) * 4096 for n, c in re.findall(r"\bN(\d+)=(\d+)", line)}
        if "anon=" in line and sum(nodes.values()) >= 0.9 * mib * 1024 * 1024:
            m = re.match(r"\S+ (.*?) (?:anon|dirty|N\d+)=", line)
            return (m[1] if m else ""), nodes
    return None


@dataclass
class DdRun:
    """A `dd` (possibly under numatune launch or numactl) holding a touched buffer."""

    label: str
    argv: list[str]
    proc: subprocess.Popen[bytes]
    mib: int
    mapping: tuple[str, dict[int, int]] | None = None
    status: str = ""
    error: str | None = None

    def finish(self) -> None:
        pid = self.proc.pid  # launch and numactl exec: the pid ends up being dd's

        def ready() -> bool:  # the launcher's own Python heap must not be taken for dd's buffer
            return read(f"/proc/{pid}/comm", "") == "dd" and _big_mapping(pid, self.mib) is not None

        if not wait_for(lambda: self.proc.poll() is not None or ready(), READY_TIMEOUT):
            self.error = (f"$ {' '.join(self.argv)}\n-> no {self.mib} MiB buffer in numa_maps after"
                          f" {READY_TIMEOUT} s")
        elif self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
            self.error = f"$ {' '.join(self.argv)}\n-> exited {self.proc.returncode}: {err[-1500:]}"
        else:
            self.mapping = _big_mapping(pid, self.mib)
            self.status = read(f"/proc/{pid}/status", "")

    def require(self) -> tuple[str, dict[int, int]]:
        if self.mapping is None:
            raise CheckFailed(self.error or f"{self.label}: no buffer")
        return self.mapping


def _start_dd(label: str, prefix: list[str], mib: int, env: dict[str, str] | None = None) -> DdRun:
    argv = [*prefix, *_dd_argv(mib)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    return DdRun(label, argv, proc, mib)


def _node1_cpus(ctx: Context) -> list[int]:
    return list(ctx.topo.node(1).cpus)


def _placement_problems(rep: dict[str, Any], cpus: list[int], mem_nodes: set[int]) -> list[str]:
    problems = []
    if rep["affinity"] != cpus:
        problems.append(f"sched_getaffinity {rep['affinity']} != {cpus}")
    if _share(rep["bytes_by_node"], mem_nodes) < 0.95:
        problems.append(f"touched memory not on node(s) {sorted(mem_nodes)}: {rep['bytes_by_node']} "
                        f"(numa_maps policy {rep['policy']!r})")
    return problems


@dataclass
class PolicyCase:
    """One --mem-policy run: extra launch args, the numa_maps policy prefix, where pages go."""

    args: list[str]
    policy_prefix: str
    nodes: set[int]
    spread: bool = False  # pages must land on every node of `nodes` (interleave)
    refuse: str | None = None  # expected refusal (exit 7) text instead of a run
    extra: dict[str, Any] = field(default_factory=dict)


def _policy_cases(ctx: Context, choices: list[str]) -> dict[str, PolicyCase]:
    cxl = ctx.cxl_chain["node"] if ctx.cxl_chain and ctx.cxl_chain.get("node", -1) >= 0 else None
    cases: dict[str, PolicyCase] = {}
    for choice in choices:
        base = ["--node", "1", "--mem-policy", choice]
        if choice == "bind":
            cases[choice] = PolicyCase(base, "bind:1", {1})
        elif choice == "preferred":
            cases[choice] = PolicyCase(base, "prefer:1", {1})
        elif choice == "preferred-many":
            cases[choice] = PolicyCase([*base, "--mem-nodes", "0,1"], "prefer (many):0-1", {0, 1})
        elif choice == "interleave":
            cases[choice] = PolicyCase([*base, "--mem-nodes", "0,1"], "interleave:0-1", {0, 1}, spread=True)
        elif choice == "weighted":
            cases[choice] = PolicyCase([*base, "--mem-nodes", "0,1"], "weighted interleave:0-1", {0, 1},
                                       spread=True)
        elif choice == "cxl-spill":
            if cxl is None:
                cases[choice] = PolicyCase(base, "", set(), refuse="no CXL memory node")
            else:  # local DRAM first: 64 MiB fits node 1, nothing spills
                cases[choice] = PolicyCase(base, f"bind:1,{cxl}", {1})
        elif choice == "none":
            cases[choice] = PolicyCase(base, "default", {1})
        elif choice == "socket":  # one node per socket in these guests: the socket is node 1
            cases[choice] = PolicyCase(base, "bind:1", {1})
        elif choice == "socket-interleave":
            cases[choice] = PolicyCase(base, "interleave:1", {1})
        elif choice == "gpu-memory":  # no GPU in the guest: refused, with the reason
            cases[choice] = PolicyCase(base, "", set(), refuse="needs a GPU")
        else:
            cases[choice] = PolicyCase(base, "", {0, 1, 2, 3}, extra={"unknown": True})
    return cases


def _policy_choices(help_text: str) -> list[str]:
    flat = " ".join(help_text.split())
    m = re.search(r"--mem-policy \[([^\]]+)\]", flat)
    if not m:
        raise NotImplementedYet(f"`numatune launch --help` shows no --mem-policy [choices]:\n{help_text[:1500]}")
    return [c.strip() for c in m[1].split("|")]


# --------------------------------------------------------------------------------------------
# The workload round: every launch and every audited process of this boot is started at once
# (numatune starts overlap), the audit is one call over all of them, then everything stops.
# The launch and audit checks below only read their part of the round.


@dataclass
class Round:
    launched: dict[str, Launched] = field(default_factory=dict)
    cases: dict[str, PolicyCase] = field(default_factory=dict)
    touchers: dict[str, int] = field(default_factory=dict)  # audit role -> pid (numactl-started)
    dd: dict[str, DdRun] = field(default_factory=dict)
    slow_truth: float = 0.0  # share of the CXL-resident process's own pages (no file pages) on the CXL node
    numastat: dict[int, float] = field(default_factory=dict)
    status_node1: str = ""
    audit: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def run_round(ctx: Context, attr: str, rnd: Any, fill: Any) -> Any:
    """The batch's one round of starts (`fill(ctx, rnd, procs)`), kept on ctx as `attr`: the checks that read
    it share one set of processes, all stopped (launched, dd runs, helpers) once the round is read."""
    cached = getattr(ctx, attr, None)
    if cached is not None:
        return cached
    setattr(ctx, attr, rnd)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        fill(ctx, rnd, procs)
    finally:
        for launched in rnd.launched.values():
            stop(launched.proc)
        for run_ in getattr(rnd, "dd", {}).values():
            stop(run_.proc)
        for p in procs:
            stop(p)
    return rnd


def _round(ctx: Context) -> Round:
    return run_round(ctx, "_round", Round(), _fill_round)


def _fill_round(ctx: Context, rnd: Round, procs: list[subprocess.Popen[bytes]]) -> None:
    out = ctx.out
    help_text = _require("launch")
    cxl = ctx.cxl_chain["node"] if ctx.cxl_chain and ctx.cxl_chain.get("node", -1) >= 0 else None
    # Long-lived: node1 (for numastat -p and the "launched is local" audit).
    starts: list[tuple[str, list[str], bool]] = [("node1", ["--node", "1"], True)]
    try:
        nic = ctx.node1_nic()
        if ctx.topo.cxl is None:  # launch_near_device runs on two-socket only
            starts.append(("near", ["--gpu", Path(f"/sys/class/net/{nic}/device").resolve().name], False))
    except CheckFailed as exc:
        rnd.errors["near"] = str(exc)
    try:
        rnd.cases = _policy_cases(ctx, _policy_choices(help_text))
    except CheckFailed as exc:
        rnd.errors["policies"] = str(exc)
    starts += [(f"policy-{name}", case.args, False) for name, case in rnd.cases.items()]
    for label, args, stay in starts:
        rnd.launched[label] = _start_launch(label, args, out, stay=stay, mib=LOCAL_MIB if stay else LAUNCH_MIB)
    for launched in rnd.launched.values():
        launched.finish()
    # After the launched workloads are ready, not beside them: on a loaded host a toucher started
    # while a dozen guest processes fault in their memory took over two minutes to get ready.
    roles = [("remote", ["numactl", "--cpunodebind=0", "--membind=1"])]
    if cxl is None and ctx.topo.cxl:
        rnd.errors["slow"] = f"no CXL node: {ctx.cxl_error}"
    for role, prefix in roles:
        ready = out / f"audit-{role}.json"
        try:
            procs.append(spawn_toucher(prefix, TOUCH_MIB, ready))
            rnd.touchers[role] = json.loads(ready.read_text())["pid"]
        except CheckFailed as exc:
            rnd.errors[role] = str(exc)
    if cxl is not None:
        # One at a time and after the Python workloads: CXL accesses are MMIO under QEMU's big
        # lock, so concurrent CXL writers stall every vCPU.
        launch = [sys.executable, "-m", "numatune", "launch", "-q", "--node", "1"]
        with safe_to_bind_to_cxl("dd", "numactl") as env:
            for label, prefix, mib in (
                ("cxl-bind", [*launch, "--mem-policy", "bind", "--mem-nodes", str(cxl), "--"], CXL_LAUNCH_MIB),
                ("cxl-weighted", [*launch, "--mem-policy", "weighted", "--mem-nodes", f"1,{cxl}", "--"],
                 CXL_LAUNCH_MIB),
                ("slow", ["numactl", "--cpunodebind=1", f"--membind={cxl}"], CXL_MIB),
            ):
                rnd.dd[label] = _start_dd(label, prefix, mib, env)
                rnd.dd[label].finish()
    if "slow" in rnd.dd:
        if rnd.dd["slow"].mapping is not None:
            rnd.touchers["slow"] = rnd.dd["slow"].proc.pid
            pages = pages_by_node(rnd.dd["slow"].proc.pid, own_only=True)
            rnd.slow_truth = pages.get(cxl, 0) / max(1, sum(pages.values()))
        else:
            rnd.errors["slow"] = rnd.dd["slow"].error or "dd on the CXL node failed"
    node1 = rnd.launched["node1"].report
    if node1:
        rnd.status_node1 = read(f"/proc/{node1['pid']}/status", "")
        try:
            rnd.numastat = _numastat_mb(node1["pid"])
        except CheckFailed as exc:
            rnd.errors["numastat"] = str(exc)
    pids = dict(rnd.touchers)
    if node1:
        pids["local"] = node1["pid"]
    audit_round(rnd, pids)


def audit_round(rnd: Any, pids: dict[str, int]) -> None:
    """One `audit --json --mappings` over the round's processes: each role's entry in rnd.audit, or why not in
    rnd.errors["audit-ROLE"]."""
    if not pids:
        return
    try:
        data = numatune_json("audit", *map(str, pids.values()), "--json", "--mappings", ok_codes=(0, 1))
    except CheckFailed as exc:
        for role in pids:
            rnd.errors.setdefault(f"audit-{role}", str(exc))
        return
    by_pid = {p.get("pid"): p for p in data.get("processes", [])}
    for role, pid in pids.items():
        if pid in by_pid:
            rnd.audit[role] = by_pid[pid]
        else:
            rnd.errors[f"audit-{role}"] = f"audit --json has no entry for pid {pid}: {json.dumps(data)[:1200]}"


def _report(ctx: Context, label: str) -> dict[str, Any]:
    rnd = _round(ctx)
    if label in rnd.errors:
        raise CheckFailed(rnd.errors[label])
    if label not in rnd.launched:
        raise CheckFailed(f"launch {label!r} was not started: {rnd.errors}")
    return rnd.launched[label].require()


# --------------------------------------------------------------------------------------------
# 2. launch


@check("two-socket")
def launch_node1_binds(ctx: Context) -> dict[str, Any]:
    """`numatune launch --node 1 -- child`: the child runs on CPUs 2-3 with its memory on node 1."""
    rep = _report(ctx, "node1")
    rnd = _round(ctx)
    problems = _placement_problems(rep, _node1_cpus(ctx), {1})
    allowed = re.search(r"Cpus_allowed_list:\s*(\S+)", rnd.status_node1)
    if not allowed or parse_cpulist(allowed[1]) != _node1_cpus(ctx):
        problems.append(f"/proc/PID/status Cpus_allowed_list {allowed[1] if allowed else None!r}")
    if not rep["policy"].startswith("bind:1"):
        problems.append(f"numa_maps policy {rep['policy']!r}, expected bind:1")
    if "numastat" in rnd.errors:
        problems.append(rnd.errors["numastat"])
    elif rnd.numastat.get(1, 0.0) < 0.8 * sum(rnd.numastat.values()):
        problems.append(f"numastat -p: most memory not on node 1: {rnd.numastat}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nreport: {rep}")
    return {"report": rep, "numastat_mb": rnd.numastat}


@check("two-socket")
def launch_near_device(ctx: Context) -> dict[str, Any]:
    """A rank whose device (the NIC, by BDF via --gpu) sits on node 1 gets node 1's CPUs and memory."""
    rep = _report(ctx, "near")
    problems = _placement_problems(rep, _node1_cpus(ctx), {1})
    if problems:
        raise CheckFailed(f"{' '.join(_round(ctx).launched['near'].argv)}:\n" + "\n".join(problems))
    return {"argv": _round(ctx).launched["near"].argv[3:7], "report": rep}


@check()
def launch_mem_policies(ctx: Context) -> dict[str, Any]:
    """Every --mem-policy choice of launch shows up as that policy in the child's numa_maps and placement."""
    rnd = _round(ctx)
    if "policies" in rnd.errors:
        raise CheckFailed(rnd.errors["policies"])
    seen, problems = {}, []
    for name, case in rnd.cases.items():
        launched = rnd.launched[f"policy-{name}"]
        if case.refuse:
            err = launched.error or ""
            if launched.report is not None or launched.proc.returncode != 7 or case.refuse not in err:
                problems.append(f"{name}: expected a refusal (exit 7, {case.refuse!r}), got rc="
                                f"{launched.proc.returncode} report={launched.report} {err[-400:]}")
            seen[name] = {"refused": launched.proc.returncode}
            continue
        if launched.report is None:
            problems.append(f"{name}: {launched.error}")
            continue
        rep = launched.report
        seen[name] = {"policy": rep["policy"], "bytes_by_node": rep["bytes_by_node"]}
        if not rep["policy"].startswith(case.policy_prefix):
            problems.append(f"{name}: numa_maps policy {rep['policy']!r}, expected {case.policy_prefix!r}")
        if _share(rep["bytes_by_node"], case.nodes) < 0.95:
            problems.append(f"{name}: memory outside nodes {sorted(case.nodes)}: {rep['bytes_by_node']}")
        if case.spread and any(_share(rep["bytes_by_node"], {n}) < 0.05 for n in case.nodes):
            problems.append(f"{name}: pages not spread over {sorted(case.nodes)}: {rep['bytes_by_node']}")
        if rep["affinity"] != _node1_cpus(ctx):
            problems.append(f"{name}: affinity {rep['affinity']} != {_node1_cpus(ctx)}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nseen: {json.dumps(seen)}")
    return {"policies": seen}


@check("cxl")
def launch_cxl_policy(ctx: Context) -> dict[str, Any]:
    """launch puts memory on the CXL node: bind to it, and weighted interleave over node 1 + CXL."""
    cxl = ctx.cxl_node()
    rnd = _round(ctx)
    problems, seen = [], {}
    for label, prefix, nodes, spread in (("cxl-bind", f"bind:{cxl}", {cxl}, False),
                                         ("cxl-weighted", "weighted interleave:", {1, cxl}, True)):
        run_ = rnd.dd.get(label)
        if run_ is None:
            problems.append(f"{label} was not started: {rnd.errors}")
            continue
        try:
            policy, by_node = run_.require()
        except CheckFailed as exc:
            problems.append(str(exc))
            continue
        share = {str(k): v for k, v in by_node.items()}
        seen[label] = {"argv": run_.argv, "policy": policy, "bytes_by_node": by_node}
        if not policy.startswith(prefix) or _share(share, nodes) < 0.95:
            problems.append(f"{label}: policy {policy!r} (want {prefix!r}), memory {by_node} (want on {nodes})")
        if spread and _share(share, {cxl}) < 0.05:
            problems.append(f"{label}: no pages on the CXL node {cxl}: {by_node}")
        allowed = re.search(r"Cpus_allowed_list:\s*(\S+)", run_.status)
        if not allowed or parse_cpulist(allowed[1]) != _node1_cpus(ctx):
            problems.append(f"{label}: Cpus_allowed_list {allowed[1] if allowed else None!r}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return seen


# --------------------------------------------------------------------------------------------
# 3. audit


def _audit_entry(ctx: Context, role: str) -> dict[str, Any]:
    rnd = _round(ctx)
    for key in (role, f"audit-{role}"):
        if key in rnd.errors:
            raise CheckFailed(rnd.errors[key])
    if role not in rnd.audit:
        raise CheckFailed(f"no audit entry for the {role} process: {rnd.errors}")
    return rnd.audit[role]


_AUDIT_KEYS = ("remote_ratio", "slow_tier_ratio", "memory_by_node", "home_nodes", "verdict", "fix", "reasons")


@check()
def audit_remote_process(ctx: Context) -> dict[str, Any]:
    """audit of a process under numactl --cpunodebind=0 --membind=1 reports it remote and gives a fix."""
    a = _audit_entry(ctx, "remote")
    problems = []
    if not isinstance(a.get("remote_ratio"), (int, float)) or a["remote_ratio"] < 0.8:
        problems.append(f"remote_ratio {a.get('remote_ratio')!r} (want >= 0.8)")
    if a.get("verdict") != "misplaced":
        problems.append(f"verdict {a.get('verdict')!r} (want 'misplaced')")
    if not any((a.get("fix") or {}).values()):
        problems.append(f"no fix recommended: {a.get('fix')!r}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\naudit: { {k: a.get(k) for k in _AUDIT_KEYS} }")
    return {k: a.get(k) for k in _AUDIT_KEYS}


@check()
def audit_launched_local(ctx: Context) -> dict[str, Any]:
    """A process started by `numatune launch --node 1` is reported as local (verdict ok)."""
    a = _audit_entry(ctx, "local")
    if not isinstance(a.get("remote_ratio"), (int, float)) or a["remote_ratio"] > 0.05 or a.get("verdict") != "ok":
        raise CheckFailed(f"launched process: remote_ratio {a.get('remote_ratio')!r} verdict {a.get('verdict')!r}"
                          f" (want <= 0.05 and 'ok')\naudit: { {k: a.get(k) for k in _AUDIT_KEYS} }")
    return {k: a.get(k) for k in _AUDIT_KEYS}


@check()
def audit_mappings_remote(ctx: Context) -> dict[str, Any]:
    """audit --mappings of the numactl --membind=1 process: its touched region, largest first, states
    bind:1 with every page on node 1 and none off-policy (the kernel shows the task policy per VMA)."""
    a = _audit_entry(ctx, "remote")
    placement = a.get("mapping_placement") or {}
    maps = placement.get("mappings") or []
    if not maps:
        raise CheckFailed(f"no mapping_placement in audit --mappings: {json.dumps(a)[:1200]}")
    top = maps[0]
    problems = []
    if top.get("policy") != "bind:1":
        problems.append(f"largest mapping's policy {top.get('policy')!r} (want 'bind:1')")
    if set(top.get("pages_by_node") or {}) != {"1"} or top.get("off_policy_pages") != 0:
        problems.append(f"pages_by_node {top.get('pages_by_node')!r}, off_policy_pages "
                        f"{top.get('off_policy_pages')!r} (want only node 1, 0 off-policy)")
    if not isinstance(top.get("bytes"), int) or top["bytes"] < (TOUCH_MIB - 1) << 20:
        problems.append(f"largest mapping {top.get('bytes')!r} bytes (want >= the {TOUCH_MIB} MiB touched)")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nmappings: {json.dumps(maps[:4])}")
    return {"largest": top, "shown": len(maps), "smaller": placement.get("smaller")}


@check("cxl")
def audit_slow_tier(ctx: Context) -> dict[str, Any]:
    """A process whose memory sits on the CXL node is reported in the slow tier (slow_tier_ratio as numa_maps says)."""
    a = _audit_entry(ctx, "slow")
    truth = _round(ctx).slow_truth
    ratio = a.get("slow_tier_ratio")
    summary = {k: a.get(k) for k in _AUDIT_KEYS}
    if not isinstance(ratio, (int, float)) or ratio < 0.5 or abs(ratio - truth) > 0.05:
        raise CheckFailed(f"slow_tier_ratio {ratio!r}; numa_maps says {truth:.3f} of the process's pages are on "
                          f"the CXL node (want >= 0.5 and within 0.05 of that)\naudit: {summary}")
    return {**summary, "numa_maps_cxl_share": round(truth, 4)}


# --------------------------------------------------------------------------------------------
# 4. irq: one plan -> apply -> restore round serves both IRQ checks


@dataclass
class IrqRound:
    nic: str = ""
    nic_irqs: list[int] = field(default_factory=list)
    managed: list[int] = field(default_factory=list)
    before: dict[int, list[int]] = field(default_factory=dict)
    after: dict[int, list[int]] = field(default_factory=dict)
    effective_after: dict[int, list[int]] = field(default_factory=dict)
    restored: dict[int, list[int]] = field(default_factory=dict)
    apply: dict[str, Any] = field(default_factory=dict)
    restore: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _irq_actions() -> dict[int, str]:
    """IRQ number -> the rest of its /proc/interrupts line (chip, hwirq, action names)."""
    out = {}
    for line in read("/proc/interrupts", "").splitlines()[1:]:
        head, _, rest = line.partition(":")
        if head.strip().isdigit():
            out[int(head)] = rest
    return out


def _nvme_irqs() -> list[int]:
    return sorted(int(p.name) for p in Path("/sys/class/nvme").glob("nvme*/device/msi_irqs/*"))


def _irq_round(ctx: Context) -> IrqRound:
    cached = getattr(ctx, "_irq_round", None)
    if cached is not None:
        return cached
    rnd = IrqRound()
    ctx._irq_round = rnd  # type: ignore[attr-defined]
    try:
        rnd.nic = ctx.node1_nic()
        rnd.nic_irqs = msi_irqs(rnd.nic)
        if not rnd.nic_irqs:
            raise CheckFailed(f"{rnd.nic} has no MSI IRQs after `ip link set up` (harness problem)")
        rnd.managed = _nvme_irqs()
        for irq in rnd.nic_irqs:  # a known, wrong placement: node 0's first CPU
            Path(f"/proc/irq/{irq}/smp_affinity_list").write_text("0")
        rnd.before = {i: irq_affinity(i) for i in rnd.nic_irqs + rnd.managed}
        saved = ctx.out / "irq-state.json"
        rnd.apply = numatune_json("irq", "apply", "--json", "--save", str(saved), ok_codes=(0, 1))
        rnd.after = {i: irq_affinity(i) for i in rnd.before}
        rnd.effective_after = {
            i: parse_cpulist(read(f"/proc/irq/{i}/effective_affinity_list", "")) for i in rnd.nic_irqs
        }
        rnd.restore = numatune_json("irq", "restore", str(saved), "--json", ok_codes=(0, 1))
        rnd.restored = {i: irq_affinity(i) for i in rnd.before}
    except CheckFailed as exc:
        rnd.error = str(exc)
    return rnd


@check("two-socket")
def irq_apply_restore(ctx: Context) -> dict[str, Any]:
    """`irq apply` moves the node-1 NIC's MSI IRQs onto node-1 CPUs in /proc/irq; `irq restore` puts them back."""
    rnd = _irq_round(ctx)
    if rnd.error:
        raise CheckFailed(rnd.error)
    node1 = set(_node1_cpus(ctx))
    problems = []
    for irq in rnd.nic_irqs:
        if not rnd.after[irq] or not set(rnd.after[irq]) <= node1:
            problems.append(f"IRQ {irq} ({rnd.nic}) smp_affinity_list after apply {rnd.after[irq]}, "
                            f"want within {sorted(node1)}")
        # effective_affinity_list is not checked: on x86 without interrupt remapping an MSI moves
        # only when it next fires, and the NIC has no link partner, so its RX vector may never fire.
        if rnd.restored[irq] != rnd.before[irq]:
            problems.append(f"IRQ {irq} after restore {rnd.restored[irq]}, was {rnd.before[irq]}")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\napply: {json.dumps(rnd.apply)[:1500]}"
                          f"\nrestore: {json.dumps(rnd.restore)[:800]}")
    return {"nic": rnd.nic, "before": rnd.before, "after": rnd.after, "effective_after": rnd.effective_after,
            "applied": rnd.apply.get("applied")}


@check("two-socket")
def irq_managed_skipped(ctx: Context) -> dict[str, Any]:
    """The NVMe I/O queue IRQs are kernel-managed: `irq apply` reports them skipped and leaves them alone."""
    rnd = _irq_round(ctx)
    if rnd.error:
        raise CheckFailed(rnd.error)
    if not rnd.managed:
        raise CheckFailed("no NVMe MSI IRQs in the guest (harness problem: nvme device missing?)")
    skipped = {s["irq"]: s["reason"] for s in rnd.apply.get("skipped", [])}
    problems = []
    # nvme0q0 is the admin queue (not managed); the I/O queue vectors nvme0qN are.
    queue_irqs = [i for i in rnd.managed if re.search(r"nvme\d+q[1-9]", _irq_actions().get(i, ""))]
    for irq in queue_irqs:
        if rnd.after.get(irq) != rnd.before.get(irq):
            problems.append(f"IRQ {irq} moved by apply: {rnd.before.get(irq)} -> {rnd.after.get(irq)}")
        if "managed" not in skipped.get(irq, ""):
            problems.append(f"IRQ {irq} (NVMe I/O queue) not reported skipped as managed by apply: "
                            f"{skipped.get(irq)!r}")
    if not queue_irqs:
        problems.append(f"no NVMe I/O queue IRQs among {rnd.managed}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return {"nvme_irqs": rnd.managed, "queue_irqs": queue_irqs, "skipped": skipped}

