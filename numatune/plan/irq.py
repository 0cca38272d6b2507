"""IRQ placement plan: each device's queue interrupts spread over free cores of its own node.

Pure: topology and IRQ report in, decisions out. "Free" means not reserved for ranks (the same
split as `launch --cpu-bind exclusive` in plan/launch.py: rank i on the i-th GPU in PCI order; a
node's usable physical cores, minus the first `--reserve-cores`, split evenly among the ranks
sharing that node, SMT siblings together, the remainder left over), not given in
`--exclude-cpus`, and not isolated. On CPUs with several kinds the rank split takes performance
cores first, as launch does, and `--irq-cpu-kind efficiency` keeps IRQs on the efficiency cores
left free (all free cores when a node has none). Queue IRQs get one CPU each, physical cores first, continuing
round-robin across the devices of a node so two NICs do not pile onto the same first core; control
IRQs (async, admin, misc) get the whole free set of the node.
"""

from __future__ import annotations

from collections.abc import Iterable

from numatune.cpulist import format_cpulist
from numatune.model._record import record
from numatune.model.irq import IrqReport
from numatune.model.topology import Topology
from numatune.plan.cores import even_share, physical_cores, topology_order


@record
class PlannedIrq:
    irq: int
    device: str  # key (BDF or name)
    label: str  # netdev/NVMe names or BDF
    kind: str
    node: int | None
    actions: tuple[str, ...]
    role: str
    current: tuple[int, ...] | None  # smp_affinity_list now (None: unknown)
    target: tuple[int, ...] | None  # None when skipped
    action: str  # set | keep | skip
    reason: str = ""


@record
class IrqPlan:
    entries: tuple[PlannedIrq, ...]
    reserved: tuple[int, ...]  # CPUs kept free of IRQs: rank cores, --exclude-cpus
    isolated: tuple[int, ...]
    free_by_node: dict[int, tuple[int, ...]] = {}  # CPUs the plan may use (shared default: never mutate)
    rank_cpus: dict[int, tuple[int, ...]] = {}  # rank -> CPUs (with --ranks-per-node)
    notes: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[PlannedIrq, ...]:
        return tuple(e for e in self.entries if e.action == "set")

    @property
    def banned(self) -> tuple[int, ...]:
        """CPUs irqbalance must stay off: the reserved and isolated ones."""
        return tuple(sorted(set(self.reserved) | set(self.isolated)))


def spread_order(topo: Topology, cpus: Iterable[int]) -> list[int]:
    """First thread of every core, then the second threads, and so on (physical cores first)."""
    cores = physical_cores(topo, cpus)
    out: list[int] = []
    depth = max((len(c) for c in cores), default=0)
    for level in range(depth):
        out.extend(core[level] for core in cores if len(core) > level)
    return out


def rank_nodes(topo: Topology, ranks: int) -> tuple[list[int], str | None]:
    """The node of each local rank, as `launch` picks it: rank i uses the i-th GPU (accelerator when there
    is no GPU) in PCI order; when some rank has no such device with a known node, ranks go in
    contiguous blocks over the nodes that have CPUs, with a note: launch then needs --node (or --gpu)
    for those ranks, and the cores kept free are this guess, not what launch was told."""
    from numatune.model.order import gpu_order

    gpus, what = gpu_order([d for d in topo.devices if d.path])
    if len(gpus) >= ranks and all(g.node is not None for g in gpus[:ranks]):
        return [g.node for g in gpus[:ranks]], None  # type: ignore[misc]
    nodes = [n.id for n in topo.nodes if n.cpus]
    if not nodes:
        return [], None
    per, extra = divmod(ranks, len(nodes))
    out: list[int] = []
    for i, nid in enumerate(nodes):
        out.extend([nid] * (per + (1 if i < extra else 0)))
    known = sum(1 for g in gpus[:ranks] if g.node is not None)
    note = (f"{ranks} ranks per node but {known} {what}(s) with a known node: ranks are assumed in blocks over"
            f" nodes {format_cpulist(nodes)} (ranks 0-{len(out) - 1} on nodes {', '.join(map(str, out))}); launch"
            " needs --node for a rank without its own device: give the ranks the same nodes, or --exclude-cpus"
            if gpus else None)
    return out, note


def exclusive_split(
    topo: Topology, ranks: int, reserve_cores: int = 0, isolated: Iterable[int] = ()
) -> tuple[dict[int, tuple[int, ...]], list[str]]:
    """rank -> CPUs as `launch --cpu-bind exclusive` gives them; plus notes about ranks left without cores.

    Per node: physical cores (isolated ones left out), `reserve_cores` kept for housekeeping (the first,
    on hybrid CPUs the least performant: plan.launch.without_reserved), the rest split evenly among
    the node's ranks (the first ranks take one more when the split is uneven, as launch and torchrun's
    exclusive mode give them; over mixed CPU kinds the remainder stays free). On CPUs with several
    kinds the split is over the performance cores when they are enough, as launch's default
    `--cpu-kind performance` does (plan.launch.kind_tiers), so IRQs never land on the cores ranks get.
    """
    from numatune.plan.launch import kind_tiers, one_kind, without_reserved

    placement, guess = rank_nodes(topo, ranks)
    out: dict[int, tuple[int, ...]] = {}
    notes: list[str] = [guess] if guess else []
    for nid in sorted(set(placement)):
        members = [r for r, n in enumerate(placement) if n == nid]
        usable: list[tuple[int, ...]] = []
        for tier in kind_tiers(topo, without_reserved(topo, _node_cores(topo, nid, isolated), reserve_cores),
                               "performance"):
            if len(usable) >= len(members):
                break
            usable += tier
        per = len(usable) // len(members) if members else 0
        if per == 0:
            notes.append(f"node {nid}: {len(usable)} cores for {len(members)} ranks: ranks get no exclusive cores")
        for j, rank in enumerate(members):
            start, end = even_share(len(usable), len(members), j, spread=one_kind(topo, usable)) if per else (0, 0)
            out[rank] = tuple(sorted(c for core in usable[start:end] for c in core))
    return out, notes


def _node_cores(topo: Topology, node_id: int, isolated: Iterable[int] = ()) -> list[tuple[int, ...]]:
    """A node's physical cores in topology order (package, die, then CPU id; plan.launch.topology_order, as launch
    orders them without cache information), isolated ones left out: what the rank split and the reserve cut."""
    iso = set(isolated)
    node = topo.node(node_id)
    return topology_order(topo, [c for c in physical_cores(topo, node.cpus if node else ()) if not set(c) & iso])


def refuse_impossible_reserve(topo: Topology, reserve_cores: int, isolated: Iterable[int] = ()) -> None:
    """A `--reserve-cores N` the user asked for that takes every core of a node with CPUs leaves jobs, pods or
    ranks nothing there: UsageError (exit 2) with the reason and the most this machine allows, the same in emit
    slurm, emit kubelet and irq plan (launch says it of the node it binds, before binding)."""
    from numatune.errors import UsageError

    if not reserve_cores:
        return
    counts = {n.id: len(_node_cores(topo, n.id, isolated)) for n in topo.nodes if n.cpus}
    short = sorted(nid for nid, k in counts.items() if k <= reserve_cores)
    if not short:
        return
    fewest = min(counts[nid] for nid in short)
    most = min(counts.values()) - 1
    iso = " (isolated CPUs left out)" if set(isolated) else ""
    can = f"at most {most} here" if most > 0 else "none here: a node has a single core"
    raise UsageError(f"--reserve-cores {reserve_cores}: node(s) {format_cpulist(short)} have only {fewest} core(s)"
                     f"{iso}; reserving {reserve_cores} would leave no core there for jobs, pods or ranks ({can})")


def housekeeping_cores(topo: Topology, reserve_cores: int,
                       isolated: Iterable[int] = ()) -> dict[int, list[tuple[int, ...]]]:
    """node -> the `reserve_cores` cores of every node with CPUs that `exclusive_split` keeps out of the rank
    split (the first; on hybrid CPUs the least performant: plan.launch.without_reserved), where IRQs (irq plan)
    and system daemons (emit's CpuSpecList, reservedSystemCPUs) go."""
    from numatune.plan.launch import without_reserved

    out: dict[int, list[tuple[int, ...]]] = {}
    for n in topo.nodes:
        if n.cpus and reserve_cores:
            cores = _node_cores(topo, n.id, isolated)
            kept = set(without_reserved(topo, cores, reserve_cores))
            out[n.id] = [c for c in cores if c not in kept]
    return out


def plan_irqs(
    topo: Topology,
    report: IrqReport,
    *,
    exclude_cpus: Iterable[int] = (),
    ranks_per_node: int | None = None,
    reserve_cores: int = 0,
    cpu_kind: str = "any",
) -> IrqPlan:
    """Decide a target affinity for every movable IRQ of every device of interest.

    `cpu_kind="efficiency"`: on CPUs with several kinds, only the free CPUs of the node's least
    performant kinds take IRQs (all free CPUs where the node has none of those free).
    """
    isolated = frozenset(report.isolated_cpus)
    notes: list[str] = []
    rank_cpus: dict[int, tuple[int, ...]] = {}
    reserved = set(exclude_cpus)
    if ranks_per_node:
        rank_cpus, split_notes = exclusive_split(topo, ranks_per_node, reserve_cores, isolated)
        notes += split_notes
        for cpus in rank_cpus.values():
            reserved.update(cpus)
    online = {c.id for c in topo.cpus if c.online}
    free_by_node: dict[int, tuple[int, ...]] = {}
    for n in topo.nodes:
        free = [c for c in n.cpus if c not in reserved and c not in isolated and (not online or c in online)]
        if cpu_kind == "efficiency" and free:
            free = _efficiency_first(topo, n.id, free, notes)
        free_by_node[n.id] = tuple(spread_order(topo, free))
    cursor: dict[int, int] = {}
    entries: list[PlannedIrq] = []
    for dev in report.devices:
        free = free_by_node.get(dev.node) if dev.node is not None else None
        queue_irqs = [i for i in dev.irqs if i.role == "queue"]
        ordered = sorted(dev.irqs, key=lambda i: (i.role != "queue", i.queue if i.queue is not None else i.irq, i.irq))
        for irq in ordered:
            base = {
                "irq": irq.irq, "device": dev.key, "label": dev.label, "kind": dev.kind, "node": dev.node,
                "actions": irq.actions, "role": irq.role, "current": irq.smp_affinity_list,
            }
            reason = _skip_reason(irq, dev.node, free, report.has_proc_irq)
            if reason:
                entries.append(PlannedIrq(**base, target=None, action="skip", reason=reason))
                continue
            assert free is not None and dev.node is not None
            if irq.role == "queue" and len(queue_irqs) > 0:
                at = cursor.get(dev.node, 0)
                target: tuple[int, ...] = (free[at % len(free)],)
                cursor[dev.node] = at + 1
                why = (f"queue {irq.queue}: " if irq.queue is not None else "") + "one local CPU"
            else:
                target = tuple(sorted(free))
                why = "control IRQ: every free CPU of the node"
            same = irq.smp_affinity_list is not None and tuple(irq.smp_affinity_list) == target
            entries.append(PlannedIrq(**base, target=target, action="keep" if same else "set",
                                      reason="already there" if same else why))
    if reserved:
        notes.append(f"CPUs kept free of device IRQs: {format_cpulist(reserved)}")
    if isolated:
        notes.append(f"isolated CPUs left out: {format_cpulist(isolated)}")
    return IrqPlan(
        entries=tuple(entries),
        reserved=tuple(sorted(reserved)),
        isolated=tuple(sorted(isolated)),
        free_by_node=free_by_node,
        rank_cpus=rank_cpus,
        notes=tuple(notes),
    )


def _efficiency_first(topo: Topology, node: int, free: list[int], notes: list[str]) -> list[int]:
    """The free CPUs of the node's lowest-ranked kind that has any free; `free` unchanged on one kind."""
    from numatune.plan.launch import kind_tiers

    kinds = topo.cpu_kinds
    if not kinds.heterogeneous:
        return free
    tiers = kind_tiers(topo, [(c,) for c in free], "efficiency")
    chosen = sorted(c for (c,) in tiers[0])
    names = "/".join(sorted({(kinds.kind_of(c).name or "?") for c in chosen if kinds.kind_of(c)}))
    role = "efficiency" if all(kinds.role_of(c) == "efficiency" for c in chosen) else "performance"
    if role == "efficiency":
        notes.append(f"node {node}: IRQs kept on efficiency cores {names} ({format_cpulist(chosen)}), "
                     f"--irq-cpu-kind efficiency")
    elif all(kinds.role_of(c) == "unranked" for c in chosen):
        notes.append(f"node {node}: the CPU kinds are not ranked (no capacity or frequency): every free CPU is used")
    else:
        notes.append(f"node {node}: no free efficiency core; IRQs go to free {names} cores")
    return chosen


def _skip_reason(irq, node: int | None, free: tuple[int, ...] | None, has_proc_irq: bool) -> str:  # noqa: ANN001
    if not irq.present:
        return "vanished: no longer in /proc/irq or /proc/interrupts"
    if irq.managed:
        why = f" ({irq.managed_evidence})" if irq.managed_evidence else ""
        return "kernel-managed affinity: cannot be moved" + why
    if node is None:
        return "device node unknown"
    if not free:
        return f"no free CPU on node {node} (all reserved, excluded or isolated): use --reserve-cores"
    if not has_proc_irq:
        return "no /proc/irq in this root: current affinity unknown"
    return ""


# -- persistent forms ---------------------------------------------------------------------------
def irqbalance_lines(plan: IrqPlan) -> list[str]:
    """The /etc/default/irqbalance lines that keep irqbalance off rank cores and off the planned IRQs."""
    lines = []
    if plan.banned:
        lines.append(f"IRQBALANCE_BANNED_CPULIST={format_cpulist(plan.banned)}")
    banirq = " ".join(f"--banirq={e.irq}" for e in plan.entries if e.action in ("set", "keep"))
    if banirq:
        lines.append(f'IRQBALANCE_ARGS="{banirq}"')
    return lines


def tuned_snippet(plan: IrqPlan) -> str:
    """A tuned profile fragment: one [irq] plugin instance per distinct target (tuned >= 2.22)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for e in plan.entries:
        if e.action in ("set", "keep") and e.target:
            groups.setdefault(e.target, []).append(e.irq)
    if not groups:
        return ""
    out = [
        "# tuned profile fragment written by numatune irq plan; IRQ numbers can change across",
        "# reboots and driver reloads: re-run `numatune irq plan` after either.",
        "[scheduler]",
        "irq_process=false",
    ]
    for target, irqs in sorted(groups.items()):
        name = "numatune_irq_cpu" + format_cpulist(target).replace(",", "_").replace("-", "to")
        out += ["", f"[{name}]", "type=irq", "devices=" + ",".join(f"irq{n}" for n in sorted(irqs)),
                f"affinity={format_cpulist(target)}"]
    return "\n".join(out) + "\n"


def shell_script(plan: IrqPlan, source: str) -> str:
    """A standalone script doing what `irq apply` does, minus rollback: for review or configuration tools."""
    lines = [
        "#!/bin/sh",
        f"# IRQ affinity plan written by numatune irq plan for {source}",
        "# Each line moves one IRQ; an IRQ that vanished or is kernel-managed is reported and left alone.",
        "set -u",
        "move() {",
        '  f="/proc/irq/$1/smp_affinity_list"',
        '  if [ ! -e "$f" ]; then echo "irq $1: gone, skipped" >&2; return 0; fi',
        '  if ! echo "$2" > "$f" 2>/dev/null; then echo "irq $1: write refused (managed?), skipped" >&2; fi',
        "}",
    ]
    for e in plan.changes:
        assert e.target is not None
        lines.append(f"move {e.irq} {format_cpulist(e.target)}  # {e.label} {' '.join(e.actions)}".rstrip())
    lines.append("exit 0")
    return "\n".join(lines) + "\n"
