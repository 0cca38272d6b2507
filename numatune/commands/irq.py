"""`numatune irq` as library calls: show (the bare command), plan, apply and restore.

Each reads the node through `app.host`, plans (numatune.plan.irq), writes through
numatune.live.irq_apply (the only writer of system state) and renders; no click. The command line
layer parses the options and hands in `app` (host, root, console, note, echo_json).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from numatune.model.irq import IrqReport
    from numatune.model.topology import Topology


def build_report(app):  # noqa: ANN001, ANN201 - (topology, report)
    from numatune.commands.inspect import irq_report

    return irq_report(app.host)


def refuse_foreign_cpus(topo: Topology, exclude: frozenset[int], ranks: int | None) -> None:
    """--exclude-cpus naming CPUs this machine does not have, or more --ranks-per-node than it has CPUs: a
    usage error (exit 2), never a plan that quietly leaves the rest out."""
    from numatune.cpulist import format_cpulist
    from numatune.errors import UsageError

    have = frozenset(c.id for c in topo.cpus) | frozenset(topo.cpu.possible)
    if not have:  # a partial capture (its /proc/interrupts alone): no CPU list to hold them against
        return
    foreign = exclude - have
    if foreign:
        raise UsageError(f"--exclude-cpus: CPU(s) {format_cpulist(foreign)} are not on this machine "
                         f"(its CPUs: {format_cpulist(have)})")
    online = len(topo.cpu.online) or len(have)
    if ranks is not None and ranks > online:
        raise UsageError(f"--ranks-per-node {ranks}: more ranks than this machine's {online} online CPUs")


def reserved_cpus(topo: Topology, report: IrqReport, exclude: frozenset[int], ranks: int | None,
                  reserve: int) -> frozenset[int]:
    """--exclude-cpus and, with --ranks-per-node, the cores `launch --cpu-bind exclusive` gives the ranks."""
    out = set(exclude)
    if ranks:
        from numatune.plan.irq import exclusive_split

        split, _ = exclusive_split(topo, ranks, reserve, report.isolated_cpus)
        for cpus in split.values():
            out.update(cpus)
    return frozenset(out)


def show_irqs(app, fmt: str, exclude_cpus: frozenset[int], ranks_per_node: int | None,  # noqa: ANN001
              reserve_cores: int) -> None:
    """`numatune irq`: each device's interrupts, where they may fire and where they do, and the findings."""
    from numatune.analysis.irq import irq_findings
    from numatune.render.printable import echo

    topo, report = build_report(app)
    refuse_foreign_cpus(topo, exclude_cpus, ranks_per_node)
    reserved = reserved_cpus(topo, report, exclude_cpus, ranks_per_node, reserve_cores)
    findings = irq_findings(topo, report, reserved)
    if fmt in ("json", "prometheus"):
        from numatune.render.envelope import dumps
        from numatune.render.irq_json import ROW_KEYS, irq_document

        doc = irq_document(topo, report, findings)
        if fmt == "json":
            echo(dumps(doc, ROW_KEYS) + "\n")  # JSON is printable as it is (its encoder escapes controls)
            return
        try:
            from numatune.render.prometheus import irq_metrics
        except ImportError:
            from numatune.errors import Unsupported

            raise Unsupported("--format prometheus for irq is not available in this build") from None
        echo(irq_metrics(doc))
        return
    from numatune.render.irq_text import render_irq

    console = app.console()
    console.print(render_irq(topo, report, findings, terminal=console.is_terminal))
    for s in report.skipped:
        app.note(f"skipped {s.subject}: {s.reason}")


def make_plan(app, exclude_cpus: frozenset[int], ranks_per_node: int | None, reserve_cores: int,  # noqa: ANN001, ANN201
              cpu_kind: str = "any"):
    """(topology, report, IRQ plan) for the node `app` reads."""
    from numatune.plan.irq import plan_irqs, refuse_impossible_reserve

    topo, report = build_report(app)
    refuse_foreign_cpus(topo, exclude_cpus, ranks_per_node)
    refuse_impossible_reserve(topo, reserve_cores, report.isolated_cpus)
    plan = plan_irqs(topo, report, exclude_cpus=exclude_cpus, ranks_per_node=ranks_per_node,
                     reserve_cores=reserve_cores, cpu_kind=cpu_kind)
    return topo, report, plan


def plan_irqs_report(app, fmt: str, exclude_cpus: frozenset[int], ranks_per_node: int | None,  # noqa: ANN001
                     reserve_cores: int, irq_cpu_kind: str, emit: str | None) -> None:
    """`numatune irq plan`: the moves, the irqbalance and tuned forms, and the script with --emit."""
    from numatune.plan.irq import irqbalance_lines, shell_script, tuned_snippet
    from numatune.render.printable import echo, printable

    _, report, plan = make_plan(app, exclude_cpus, ranks_per_node, reserve_cores, irq_cpu_kind)
    balance, tuned = irqbalance_lines(plan), tuned_snippet(plan)
    if emit:
        from numatune.system.outfile import write_file

        write_file(emit, printable(shell_script(plan, report.source)), mode=0o755)
        app.note(f"wrote {emit} ({len(plan.changes)} moves)")
    if fmt == "json":
        from numatune.render.envelope import dumps
        from numatune.render.irq_json import ROW_KEYS, plan_document

        echo(dumps(plan_document(plan, report, balance, tuned), ROW_KEYS) + "\n")
        return
    from numatune.render.irq_text import paste_blocks, print_verbatim, render_plan

    console = app.console()
    console.print(render_plan(plan, balance, tuned))
    print_verbatim(console, paste_blocks(balance, tuned))
    for s in report.skipped:
        app.note(f"skipped {s.subject}: {s.reason}")


def _writable(app) -> None:  # noqa: ANN001
    from numatune.errors import InputError
    from numatune.live.irq_apply import require_write_access

    if app.host.is_archive:
        raise InputError(f"--root {app.root} is a snapshot archive: nothing is ever written into one",
                         hint="extract the archive (or copy the tree) and pass that directory")
    require_write_access(app.host)


def apply_irqs(app, fmt: str, exclude_cpus: frozenset[int], ranks_per_node: int | None,  # noqa: ANN001
               reserve_cores: int, irq_cpu_kind: str, plan_file: str | None, save: str | None,
               dry_run: bool) -> None:
    """`numatune irq apply`: save the current affinity, write the plan (or `plan_file`), verify, roll back."""
    from pathlib import Path

    from numatune.live.irq_apply import default_state_path, plan_changes, read_plan, run_changes
    if not dry_run:
        _writable(app)
    if plan_file:
        changes = read_plan(plan_file)
        skipped_in_plan: list[tuple[int, str]] = []
    else:
        _, _, plan = make_plan(app, exclude_cpus, ranks_per_node, reserve_cores, irq_cpu_kind)
        changes = plan_changes(plan.entries)
        skipped_in_plan = [(e.irq, e.reason) for e in plan.entries if e.action == "skip"]
        kept_in_plan = [e.irq for e in plan.entries if e.action == "keep"]
    state = None if dry_run else (Path(save) if save else default_state_path(app.host))
    result = run_changes(app.host, changes, state_path=state if changes else None, dry_run=dry_run)
    result.skipped = skipped_in_plan + result.skipped
    if not plan_file:  # the plan's "keep" IRQs are already where it wants them: counted, as `irq plan` counts them
        result.unchanged = kept_in_plan + result.unchanged
    _report(app, fmt, result, dry_run=dry_run)


def restore_irqs(app, fmt: str, state_file: str, dry_run: bool, *, root_named: bool) -> None:  # noqa: ANN001
    """`numatune irq restore`: put back the affinity saved in `state_file`, on the root it was taken from
    unless the command line named one (`root_named`: --root or NUMATUNE_ROOT)."""
    from numatune.live.irq_apply import restore_changes, root_of, run_changes, state_of, undo_command

    recorded, saved = state_of(state_file)
    if recorded is not None:
        if not root_named and recorded != "/":
            app.root, app._host = recorded, None  # noqa: SLF001 - the recorded root, opened as --root would be
        elif root_of(app.host) != recorded:
            from numatune.errors import InputError

            raise InputError(f"{state_file} holds the IRQ state of {recorded}, not of --root {app.root}",
                             hint=f"run `{undo_command(state_file)}` without --root to restore {recorded}")
    if not dry_run:
        _writable(app)
    result = run_changes(app.host, restore_changes(saved), dry_run=dry_run)
    _report(app, fmt, result, dry_run=dry_run, restore=True)


def _report(app, fmt: str, result, *, dry_run: bool, restore: bool = False) -> None:  # noqa: ANN001
    if fmt == "json":
        from numatune.render.irq_json import apply_document

        app.echo_json(apply_document(result, dry_run=dry_run, restore=restore))
        return
    from numatune.render.irq_text import render_apply

    app.console().print(render_apply(result, dry_run=dry_run, restore=restore), soft_wrap=True)
