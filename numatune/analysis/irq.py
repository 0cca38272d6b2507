"""Findings about device interrupts (codes NT2xx, stable). Pure: `check` calls `irq_findings` too."""

from __future__ import annotations

from collections.abc import Iterable

from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding, Severity, register
from numatune.model.irq import DeviceIrqs, Irq, IrqReport
from numatune.model.topology import Topology

REMOTE_SHARE = 0.10  # a device whose interrupts land more than this share off its node is flagged
PLAN_FIX = "run `numatune irq plan` to see the local placement, then `numatune irq apply`"

NT201 = register("NT201", Severity.WARNING, "irq", "a device's interrupts fire on other nodes", """
    More than 10% of a device's interrupts (managed IRQs aside) fired on CPUs of other nodes since boot:
    each one crosses the socket link and pollutes a remote cache.""")
NT202 = register("NT202", Severity.WARNING, "irq", "IRQs routed outside the device's node", """
    Movable IRQs of a device are routed only to CPUs outside the device's node.""")
NT203 = register("NT203", Severity.WARNING, "irq", "IRQs can land on cores reserved for ranks", """
    IRQs that can land on cores reserved for ranks (irq --exclude-cpus, --ranks-per-node; check: the
    policy's irq.rank_cpus). For a GPU-local NIC under a policy, NT340 reports the same IRQs instead.""")
NT204 = register("NT204", Severity.WARNING, "irq", "IRQs routed only to isolated CPUs", """
    IRQs routed only to isolated CPUs (/sys/devices/system/cpu/isolated), which are kept for
    latency-critical work.""")
NT205 = register("NT205", Severity.WARNING, "irq", "irqbalance is running", """
    irqbalance is running: a warning, since it will undo affinity set by hand, with the
    IRQBALANCE_BANNED_CPULIST line that keeps it off the reserved and isolated CPUs; info when the running
    daemon already bans them.""")
NT206 = register("NT206", Severity.INFO, "irq", "kernel-managed IRQs", """
    Kernel-managed IRQs (NVMe queues, some NICs) are spread by the kernel and cannot be moved.""")
NT207 = register("NT207", Severity.INFO, "irq", "device node unknown: IRQ locality cannot be judged", """
    The device reports numa_node -1 (see NT001) on a machine with several nodes, so whether its
    interrupts are local cannot be told.""")
NT208 = register("NT208", Severity.INFO, "irq", "IRQs land on performance cores of a hybrid CPU", """
    On a CPU with several core kinds, movable IRQs of a device are routed only to performance cores
    while its node has efficiency cores: interrupt work takes cycles from the cores ranks want.
    `numatune irq plan --irq-cpu-kind efficiency` moves them to the node's efficiency cores, never
    onto the cores it gives ranks.""")


def node_map(topo: Topology) -> dict[int, int]:
    """CPU -> node, for every CPU of a node."""
    return {cpu: n.id for n in topo.nodes for cpu in n.cpus}


def locality(irq: Irq, dev_node: int | None, node_of: dict[int, int]) -> bool | None:
    """True when the IRQ is routed only to CPUs of the device's node; None when that cannot be told."""
    where = irq.where
    if dev_node is None or not where or not node_of:
        return None
    nodes = {node_of.get(c) for c in where}
    if None in nodes:
        return None
    return nodes == {dev_node}


def remote_counts(irq: Irq, dev_node: int | None, node_of: dict[int, int]) -> tuple[int, int]:
    """(interrupts counted on other nodes' CPUs, all counted) since boot."""
    if dev_node is None or not node_of:
        return 0, irq.total or 0
    remote = sum(n for cpu, n in irq.per_cpu if node_of.get(cpu, dev_node) != dev_node)
    return remote, irq.total or 0


def _label(dev: DeviceIrqs) -> str:
    if dev.gpu:
        return dev.label  # "GPU0 0000:18:00.0"
    names = dev.label
    return f"{dev.kind.upper()} {names}" + (f" ({dev.bdf})" if dev.bdf and dev.bdf != names else "")


def irq_findings(topo: Topology, irqs: IrqReport, reserved: Iterable[int] = ()) -> list[Finding]:
    """Remote-node IRQs, IRQs on rank or isolated cores, irqbalance undoing manual settings."""
    node_of = node_map(topo)
    multi = len([n for n in topo.nodes if n.cpus]) > 1
    reserved_set = frozenset(reserved)
    isolated = frozenset(irqs.isolated_cpus)
    out: list[Finding] = []
    for dev in irqs.devices:
        movable = [i for i in dev.irqs if i.present and i.managed is not True]
        if dev.node is None:
            if dev.irqs and multi:
                out.append(NT207(
                    f"{_label(dev)}: node unknown, locality of its {len(dev.irqs)} IRQs cannot be judged",
                    "fix the device's numa_node (see NT001) or plan with a root that has sysfs", dev.key,
                ))
        elif multi:
            remote = total = 0
            hot: list[int] = []
            for i in movable:  # managed IRQs are spread over every node by design
                r, t = remote_counts(i, dev.node, node_of)
                remote += r
                total += t
                if t and r / t > 0.5:
                    hot.append(i.irq)
            if total and remote / total > REMOTE_SHARE:
                out.append(NT201(
                    f"{_label(dev)} on node {dev.node}: {remote / total:.0%} of its {total:,} interrupts fired on "
                    f"other nodes' CPUs ({len(hot)} of {len(movable)} movable IRQs mostly remote: {_irqs(hot)})",
                    PLAN_FIX, dev.key,
                ))
            off = [i.irq for i in movable if locality(i, dev.node, node_of) is False]
            if off:
                out.append(NT202(
                    f"{_label(dev)} on node {dev.node}: {len(off)} IRQs are routed to CPUs outside node {dev.node} "
                    f"({_irqs(off)})",
                    PLAN_FIX, dev.key,
                ))
        if reserved_set:
            on_rank = [i.irq for i in movable if set(i.where or ()) & reserved_set]
            if on_rank:
                out.append(NT203(
                    f"{_label(dev)}: {len(on_rank)} IRQs can land on cores reserved for ranks "
                    f"({format_cpulist(reserved_set)}): {_irqs(on_rank)}",
                    "run `numatune irq plan` with the same --ranks-per-node/--exclude-cpus, then `numatune irq apply`",
                    dev.key,
                ))
        if isolated:
            on_iso = [i.irq for i in movable if i.where and set(i.where) <= isolated]
            if on_iso:
                out.append(NT204(
                    f"{_label(dev)}: {len(on_iso)} IRQs are routed only to isolated CPUs "
                    f"({format_cpulist(isolated)}): {_irqs(on_iso)}",
                    PLAN_FIX, dev.key,
                ))
        out += _on_performance_cores(topo, dev, movable)
        managed = [i.irq for i in dev.irqs if i.managed]
        if managed:
            out.append(NT206(
                f"{_label(dev)}: {len(managed)} IRQs are kernel-managed and cannot be moved ({_irqs(managed)})",
                "", dev.key,
            ))
    if irqs.irqbalance_running:
        keep_off = reserved_set | isolated
        banned = frozenset(irqs.irqbalance_banned or ())
        if keep_off and keep_off <= banned:
            out.append(NT205(
                f"irqbalance is running and already keeps off CPUs {format_cpulist(banned)}",
                "", "irqbalance", Severity.INFO,
            ))
        else:
            line = f"IRQBALANCE_BANNED_CPULIST={format_cpulist(keep_off)}" if keep_off else ""
            out.append(NT205(
                "irqbalance is running: it moves interrupts on its own and will undo affinity set by hand"
                + (f"; it is not kept off CPUs {format_cpulist(keep_off - banned)}" if keep_off - banned else ""),
                (f"set {line} in /etc/default/irqbalance (or /etc/sysconfig/irqbalance) and restart it, "
                 if line else "")
                + "or stop it (`systemctl disable --now irqbalance`) before `numatune irq apply`",
                "irqbalance",
            ))
    return out


def _on_performance_cores(topo: Topology, dev: DeviceIrqs, movable: list[Irq]) -> list[Finding]:
    kinds = topo.cpu_kinds
    if not kinds.heterogeneous or dev.node is None or not any(k.role == "performance" for k in kinds.kinds):
        return []
    node = topo.node(dev.node)
    online = set(topo.cpu.online)
    efficiency = [c for c in (node.cpus if node else ()) if c in online and kinds.role_of(c) == "efficiency"]
    if not efficiency:
        return []
    hot = [i.irq for i in movable if i.where and all(kinds.role_of(c) == "performance" for c in i.where)]
    if not hot:
        return []
    return [NT208(
        f"{_label(dev)}: {len(hot)} IRQs are routed only to performance cores ({_irqs(hot)}) while node "
        f"{dev.node} has efficiency cores {format_cpulist(efficiency)}",
        "run `numatune irq plan --irq-cpu-kind efficiency` (with --ranks-per-node N to keep rank cores free), "
        "then `numatune irq apply` with the same options",
        dev.key,
    )]


def _irqs(numbers: list[int], limit: int = 8) -> str:
    shown = ", ".join(str(n) for n in numbers[:limit])
    return shown + (f" and {len(numbers) - limit} more" if len(numbers) > limit else "")
