"""numatune irq: show (bare), plan, apply, restore. Options only: the use cases are numatune.commands.irq."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from numatune.cli._app import App
from numatune.cli._options import MAX_COUNT, Count, OptionGroup, format_option


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
    func = click.option("--reserve-cores", type=Count(0, MAX_COUNT), default=0, show_default=True,
                        help="With --ranks-per-node: cores per node kept out of the rank split "
                             "(as `launch --reserve-cores`); IRQs may use them.")(func)
    func = click.option("--ranks-per-node", type=Count(1, MAX_COUNT), default=None, metavar="N",
                        help="Keep IRQs off the cores N ranks get from `launch --cpu-bind exclusive`.")(func)
    func = click.option("--exclude-cpus", callback=_cpulist, default=None, metavar="LIST",
                        help="CPUs reserved for ranks: no device IRQ may land there (e.g. 4-15,20-31).")(func)
    return func


@click.group("irq", cls=OptionGroup, invoke_without_command=True)
@format_option("text", "json", "prometheus")
@cpu_options
@click.pass_context
def irq_group(ctx: click.Context, fmt: str, exclude_cpus: frozenset[int],
              ranks_per_node: int | None, reserve_cores: int) -> None:
    """Show the interrupts of NICs, GPUs, NVMe and CXL devices: where they may fire, where they do.

    Per device: BDF, netdev/RDMA/NVMe names, node, IRQ numbers (from msi_irqs/ and the action names
    in /proc/interrupts), per-CPU counts, smp_affinity_list, effective_affinity_list, whether the
    kernel manages the IRQ, whether it lands on local cores; then findings (NT2xx).
    Subcommands: plan, apply, restore. The options given here, before a subcommand's name, are that
    subcommand's (`irq --exclude-cpus 0 apply` excludes CPU 0), or refused when it has no such option.
    """
    if ctx.invoked_subcommand is not None:
        return
    from numatune.commands.irq import show_irqs

    show_irqs(ctx.obj, fmt, exclude_cpus, ranks_per_node, reserve_cores)


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
    from numatune.commands.irq import plan_irqs_report

    plan_irqs_report(app, fmt, exclude_cpus, ranks_per_node, reserve_cores, irq_cpu_kind, emit)


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
    from numatune.commands.irq import apply_irqs

    apply_irqs(app, fmt, exclude_cpus, ranks_per_node, reserve_cores, irq_cpu_kind, plan_file, save, dry_run)


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
    from numatune.commands.irq import restore_irqs

    # named: --root or NUMATUNE_ROOT; otherwise the root the state file records is restored
    restore_irqs(app, fmt, state_file, dry_run, root_named=app.root_named)
