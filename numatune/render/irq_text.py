"""Rich tables for `irq` (show), `irq plan` and `irq apply/restore`."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from numatune.analysis.irq import locality, node_map
from numatune.cpulist import format_cpulist
from numatune.model.findings import Finding
from numatune.model.irq import Irq, IrqReport
from numatune.model.topology import Topology
from numatune.render.inspect_text import findings_table
from numatune.render.table import Table


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def _short(n: int) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def fires_on(irq: Irq, node_of: dict[int, int]) -> str:
    """Where it actually fired: per node share when nodes are known, else the busiest CPUs."""
    if irq.total is None:
        return "?"
    if not irq.total:
        return "0"
    if node_of:
        per: dict[str, int] = {}
        for cpu, n in irq.per_cpu:
            key = f"n{node_of[cpu]}" if cpu in node_of else "n?"
            per[key] = per.get(key, 0) + n
        parts = [f"{k} {v / irq.total:.0%}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])]
        return f"{_short(irq.total)}: " + " ".join(parts[:3])
    top = sorted(irq.per_cpu, key=lambda cn: -cn[1])[:3]
    return f"{_short(irq.total)}: " + " ".join(f"cpu{c}" for c, _ in top)


def _yn(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def render_irq(topo: Topology, report: IrqReport, findings: list[Finding], terminal: bool = True) -> Group:
    node_of = node_map(topo)
    parts: list = []
    head = Text()
    head.append("IRQs of devices", style="bold")
    head.append(f"  ({report.source}; {len(report.devices)} devices, "
                f"{sum(len(d.irqs) for d in report.devices)} IRQs")
    if report.irqbalance_running is not None:
        head.append(f"; irqbalance {'running' if report.irqbalance_running else 'not running'}")
    if report.isolated_cpus:
        head.append(f"; isolated CPUs {format_cpulist(report.isolated_cpus)}")
    head.append(")")
    parts.append(head)
    table = Table(show_edge=False, pad_edge=False)
    for col in ("device", "kind", "node", "irq", "action", "role", "fired (share by node)", "affinity",
                "effective", "managed", "local"):
        table.add_column(col, overflow="fold")
    for dev in report.devices:
        first = True
        if not dev.irqs:
            table.add_row(dev.label, dev.kind, _n(dev.node), "-", "no IRQs found", "", "", "", "", "", "")
            continue
        for irq in dev.irqs:
            local = locality(irq, dev.node, node_of)
            table.add_row(
                dev.label if first else "",
                dev.kind if first else "",
                (_n(dev.node) + ("?" if dev.node_inferred else "")) if first else "",
                str(irq.irq) + ("" if irq.present else " (gone)"),
                ", ".join(irq.actions) or "-",
                irq.role,
                fires_on(irq, node_of),
                "?" if irq.smp_affinity_list is None else format_cpulist(irq.smp_affinity_list),
                "?" if irq.effective_affinity_list is None else format_cpulist(irq.effective_affinity_list),
                _yn(irq.managed),
                Text(_yn(local), style="red" if local is False else ""),
            )
            first = False
    parts.append(table if report.devices else Text("no NIC, GPU, NVMe or CXL device with interrupts found"))
    parts.append(findings_table(findings, terminal))
    return Group(*parts)


def render_plan(plan, irqbalance: list[str], tuned: str) -> Group:  # noqa: ANN001
    table = Table(show_edge=False, pad_edge=False)
    for col in ("device", "node", "irq", "action name", "role", "now", "plan", "do", "why"):
        table.add_column(col, overflow="fold")
    for e in plan.entries:
        table.add_row(
            e.label, _n(e.node), str(e.irq), ", ".join(e.actions) or "-", e.role,
            "?" if e.current is None else format_cpulist(e.current),
            "-" if e.target is None else format_cpulist(e.target),
            Text(e.action, style={"set": "bold", "skip": "yellow"}.get(e.action, "")),
            e.reason,
        )
    parts: list = [Text("IRQ plan", style="bold"), table]
    counts = {a: sum(1 for e in plan.entries if e.action == a) for a in ("set", "keep", "skip")}
    parts.append(Text(f"{counts['set']} to move, {counts['keep']} already in place, {counts['skip']} skipped"))
    for note in plan.notes:
        parts.append(Text(f"note: {note}"))
    return Group(*parts)


def paste_blocks(irqbalance: list[str], tuned: str) -> list[tuple[str, str]]:
    """(heading, body) of the configuration meant for pasting; the body is printed line for line, outside
    any table and never wrapped or cut (`print_verbatim`), whatever the width."""
    blocks = []
    if irqbalance:
        blocks.append(("Persistent form, irqbalance (/etc/default/irqbalance or /etc/sysconfig/irqbalance):",
                       "\n".join(irqbalance)))
    if tuned:
        blocks.append(("Persistent form, tuned profile fragment:", tuned.rstrip("\n")))
    return blocks


def print_verbatim(console, blocks: list[tuple[str, str]]) -> None:  # noqa: ANN001 - rich Console
    """Each block after a blank line: its heading (bold), then its body exactly as written."""
    for heading, body in blocks:
        console.print()
        console.print(Text(heading, style="bold"))
        console.print(body, soft_wrap=True, crop=False)


def render_apply(result, *, dry_run: bool, restore: bool = False) -> Group:  # noqa: ANN001
    verb = "restore" if restore else "apply"
    parts: list = []
    if dry_run:
        parts.append(Text(f"dry run: irq {verb} would write {len(result.planned)} files", style="bold"))
        for c in result.planned:
            parts.append(Text(f"  /proc/irq/{c.irq}/{c.file} <- {c.text.strip()}   {c.label}"))
    else:
        parts.append(Text(f"irq {verb}: {len(result.applied)} changed, {len(result.unchanged)} already in place, "
                          f"{len(result.skipped)} skipped", style="bold"))
        if result.applied:
            parts.append(Text("  changed: " + ", ".join(str(i) for i in result.applied)))
    for irq, why in result.skipped:
        parts.append(Text(f"  skipped IRQ {irq}: {why}", style="yellow"))
    if result.state_file:
        parts.append(Text(f"previous affinity saved in {result.state_file}; undo with:"))
        parts.append(Text(f"  {result.undo}"))  # printed soft-wrapped (cli): one line to paste, whatever the width
    return Group(*parts)
