"""numatune irq: show (bare), plan, apply, restore."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from numatune.cli._app import App
from numatune.cli._options import format_option
from numatune.render.printable import echo


def _cpulist(ctx: click.Context, param: click.Parameter, value: str | None) -> frozenset[int]:
    from numatune.cpulist import parse_cpulist

    if not value:
        return frozenset()
    try:
        return parse_cpulist(value)
    except ValueError:
        raise click.BadParameter(f"not a CPU list: {value!r} (expected e.g. 0-3,8)") from None


def cpu_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--exclude-cpus, --ranks-per-node, --reserve-cores: the cores IRQs must stay off."""
    func = click.option("--reserve-cores", type=click.IntRange(min=0), default=0, show_default=True,
                        help="With --ranks-per-node: cores per node kept out of the rank split "
                             "(as `launch --reserve-cores`); IRQs may use them.")(func)
    func = click.option("--ranks-per-node", type=click.IntRange(min=1), default=None, metavar="N",
                        help="Keep IRQs off the cores N ranks get from `launch --cpu-bind exclusive`.")(func)
    func = click.option("--exclude-cpus", callback=_cpulist, default=None, metavar="LIST",
                        help="CPUs reserved for ranks: no device IRQ may land there (e.g. 4-15,20-31).")(func)
    return func


def build_report(app: App):  # noqa: ANN201 - (topology, report)
    from numatune.commands.inspect import irq_report

    return irq_report(app.host)


def _reserved(topo, report, exclude: frozenset[int], ranks: int | None, reserve: int) -> frozenset[int]:  # noqa: ANN001
    out = set(exclude)
    if ranks:
        from numatune.plan.irq import exclusive_split

        split, _ = exclusive_split(topo, ranks, reserve, report.isolated_cpus)
        for cpus in split.values():
            out.update(cpus)
    return frozenset(out)


@click.group("irq", invoke_without_command=True)
@format_option("text", "json", "prometheus")
@cpu_options
@click.pass_context
def irq_group(ctx: click.Context, fmt: str, exclude_cpus: frozenset[int],
              ranks_per_node: int | None, reserve_cores: int) -> None:
    """Show the interrupts of NICs, GPUs, NVMe and CXL devices: where they may fire, where they do.

    Per device: BDF, netdev/RDMA/NVMe names, node, IRQ numbers (from msi_irqs/ and the action names
    in /proc/interrupts), per-CPU counts, smp_affinity_list, effective_affinity_list, whether the
    kernel manages the IRQ, whether it lands on local cores; then findings (NT2xx).
    Subcommands: plan, apply, restore.
    """
    if ctx.invoked_subcommand is not None:
        return
    app: App = ctx.obj
    from numatune.analysis.irq import irq_findings

    topo, report = build_report(app)
    reserved = _reserved(topo, report, exclude_cpus, ranks_per_node, reserve_cores)
    findings = irq_findings(topo, report, reserved)
    if fmt in ("json", "prometheus"):
        from numatune.render.envelope import dumps
        from numatune.render.irq_json import ROW_KEYS, irq_document

        doc = irq_document(topo, report, findings)
        if fmt == "json":
            click.echo(dumps(doc, ROW_KEYS))
            return
        try:
            from numatune.render.prometheus import irq_metrics
        except ImportError:
            from numatune.errors import Unsupported

            raise Unsupported("--format prometheus for irq is not available in this build") from None
        echo(irq_metrics(doc))
        return
    from numatune.render.irq_text import render_irq

    app.console().print(render_irq(topo, report, findings))
    for s in report.skipped:
        app.note(f"skipped {s.subject}: {s.reason}")


def _make_plan(app: App, exclude_cpus: frozenset[int], ranks_per_node: int | None, reserve_cores: int,  # noqa: ANN202
               cpu_kind: str = "any"):
    from numatune.plan.irq import plan_irqs

    topo, report = build_report(app)
    plan = plan_irqs(topo, report, exclude_cpus=exclude_cpus, ranks_per_node=ranks_per_node,
                     reserve_cores=reserve_cores, cpu_kind=cpu_kind)
    return topo, report, plan


def irq_cpu_kind_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--irq-cpu-kind", "irq_cpu_kind", type=click.Choice(("any", "efficiency")), default="any",
                        show_default=True,
                        help="On hybrid CPUs: efficiency keeps IRQs on the free efficiency cores (never rank cores)."
                        )(func)


@irq_group.command("plan")
@format_option("text", "json")
@cpu_options
@irq_cpu_kind_option
@click.option("--emit", "emit", type=click.Path(dir_okay=False, readable=False), default=None, metavar="FILE",
              help="Also write the plan as a shell script (for review or a configuration tool).")
@click.pass_obj
def plan_cmd(app: App, fmt: str, exclude_cpus: frozenset[int], ranks_per_node: int | None,
             reserve_cores: int, irq_cpu_kind: str, emit: str | None) -> None:
    """Spread each device's queue IRQs over free cores of its own node (physical cores first).

    Leaves out --exclude-cpus, the cores of --ranks-per-node ranks and isolated CPUs; kernel-managed
    IRQs are listed as skipped. Prints the persistent form too: an irqbalance
    IRQBALANCE_BANNED_CPULIST line and a tuned [irq] fragment.
    """
    from numatune.plan.irq import irqbalance_lines, shell_script, tuned_snippet

    _, report, plan = _make_plan(app, exclude_cpus, ranks_per_node, reserve_cores, irq_cpu_kind)
    balance, tuned = irqbalance_lines(plan), tuned_snippet(plan)
    if emit:
        from numatune.cli._options import write_output

        write_output(emit, shell_script(plan, report.source), mode=0o755)
        app.note(f"wrote {emit} ({len(plan.changes)} moves)")
    if fmt == "json":
        from numatune.render.envelope import dumps
        from numatune.render.irq_json import ROW_KEYS, plan_document

        click.echo(dumps(plan_document(plan, report, balance, tuned), ROW_KEYS))
        return
    from numatune.render.irq_text import paste_blocks, print_verbatim, render_plan

    console = app.console()
    console.print(render_plan(plan, balance, tuned))
    print_verbatim(console, paste_blocks(balance, tuned))
    for s in report.skipped:
        app.note(f"skipped {s.subject}: {s.reason}")


def _writable(app: App) -> None:
    from numatune.errors import InputError
    from numatune.live.irq_apply import require_write_access

    if app.host.is_archive:
        raise InputError(f"--root {app.root} is a snapshot archive: nothing is ever written into one",
                         hint="extract the archive (or copy the tree) and pass that directory")
    require_write_access(app.host)


@irq_group.command("apply")
@format_option("text", "json")
@cpu_options
@irq_cpu_kind_option
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Apply this plan (from `irq plan --json`) instead of planning now.")
@click.option("--save", "save", type=click.Path(dir_okay=False, readable=False), default=None, metavar="FILE",
              help="State file for `irq restore` [default: /var/lib/numatune/irq-<UTC time>.json, "
                   "under the root with --root].")
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing, save nothing.")
@click.pass_obj
def apply_cmd(app: App, fmt: str, exclude_cpus: frozenset[int], ranks_per_node: int | None,
              reserve_cores: int, irq_cpu_kind: str, plan_file: str | None, save: str | None, dry_run: bool) -> None:
    """Write the plan: save the current affinity first, verify each write, roll back on any failure.

    Needs root on a live node. Kernel-managed IRQs (EIO) and IRQs that vanished are skipped.
    Exit 5 when a write failed and everything was rolled back.
    """
    from pathlib import Path

    from numatune.live.irq_apply import default_state_path, plan_changes, read_plan, run_changes
    if not dry_run:
        _writable(app)
    if plan_file:
        changes = read_plan(plan_file)
        skipped_in_plan: list[tuple[int, str]] = []
    else:
        _, _, plan = _make_plan(app, exclude_cpus, ranks_per_node, reserve_cores, irq_cpu_kind)
        changes = plan_changes(plan.entries)
        skipped_in_plan = [(e.irq, e.reason) for e in plan.entries if e.action == "skip"]
    state = None if dry_run else (Path(save) if save else default_state_path(app.host))
    result = run_changes(app.host, changes, state_path=state if changes else None, dry_run=dry_run)
    result.skipped = skipped_in_plan + result.skipped
    _report(app, fmt, result, dry_run=dry_run)


@irq_group.command("restore")
@format_option("text", "json")
@click.argument("state_file", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing.")
@click.pass_obj
def restore_cmd(app: App, fmt: str, state_file: str, dry_run: bool) -> None:
    """Put back exactly the affinity saved in STATE_FILE by `irq apply` (all or nothing).

    The state file names the root it was taken from; that root is restored (a --root naming
    another one is refused), so the undo line `irq apply` prints works as pasted.
    """
    from numatune.live.irq_apply import restore_changes, root_of, run_changes, state_of, undo_command

    recorded, saved = state_of(state_file)
    if recorded is not None:
        from click.core import ParameterSource

        named = click.get_current_context().find_root().get_parameter_source("root")
        if named is ParameterSource.DEFAULT and recorded != "/":  # neither --root nor NUMATUNE_ROOT
            app.root, app._host = recorded, None  # noqa: SLF001 - the recorded root, opened as --root would be
        elif root_of(app.host) != recorded:
            from numatune.errors import InputError

            raise InputError(f"{state_file} holds the IRQ state of {recorded}, not of --root {app.root}",
                             hint=f"run `{undo_command(state_file)}` without --root to restore {recorded}")
    if not dry_run:
        _writable(app)
    result = run_changes(app.host, restore_changes(saved), dry_run=dry_run)
    _report(app, fmt, result, dry_run=dry_run, restore=True)


def _report(app: App, fmt: str, result, *, dry_run: bool, restore: bool = False) -> None:  # noqa: ANN001
    if fmt == "json":
        from numatune.render.irq_json import apply_document

        app.echo_json(apply_document(result, dry_run=dry_run, restore=restore))
        return
    from numatune.render.irq_text import render_apply

    app.console().print(render_apply(result, dry_run=dry_run, restore=restore), soft_wrap=True)
