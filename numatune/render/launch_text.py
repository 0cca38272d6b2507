"""`numatune launch --dry-run`: the exact command and the reasoning, as plain text (no rich on this path)."""

from __future__ import annotations

from numatune.cpulist import format_cpulist
from numatune.model.launch import LaunchPlan
from numatune.render.launch_sh import sh_word


def render_dry_run(plan: LaunchPlan) -> str:
    lines = [f"  {r}" for r in plan.reasons]
    lines += [f"  note: {n}" for n in plan.notes]
    lines += [f"  warning: {w}" for w in plan.warnings]
    env = " ".join(f"{k}={sh_word(v)}" for k, v in plan.env.items())
    cmd = " ".join(sh_word(a) for a in plan.argv)
    lines.append(f"command ({plan.method}):")
    lines.append(f"  {'env ' + env + ' ' if env else ''}{cmd}")
    return "plan:\n" + "\n".join(lines) + "\n"


def summary_line(plan: LaunchPlan) -> str:
    """The one stderr line printed before exec (--quiet silences it)."""
    who = f"rank {plan.rank.rank}"
    if plan.gpu is not None:
        who += f" → {plan.gpu.kind} {plan.gpu.bdf}"
    if plan.node is not None:
        who += f" → node {plan.node}"
    if plan.unbound:
        return f"{who}: running unbound (--best-effort)"
    kinds = "".join(f", {len(k.cpus)} {k.name or '?'} {k.role}" for k in plan.cpu_kinds)
    cpus = f"cpus {format_cpulist(plan.cpus)} ({plan.cpu_mode}{kinds})" if plan.cpus else "cpus unbound"
    mem = plan.memory
    memory = f"memory {mem.policy}:{format_cpulist(mem.nodes)}" if mem.mode is not None else "memory unbound"
    if mem.weights:
        memory += " weights " + ",".join(f"{n}:{w}" for n, w in mem.weights.items())
    nic = f", nic {plan.nic.rdma or plan.nic.netdev or plan.nic.bdf}" if plan.nic is not None else ""
    inside = f", inside {plan.confined}" if plan.confined else ""
    return f"{who}: {cpus}, {memory}{nic}, via {plan.method}{inside}"
