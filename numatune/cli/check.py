"""numatune check."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import PID, deliver, format_option

FAIL_ON = ("info", "warning", "error")


class _DerivedHelp(click.Option):
    """An option whose help names what only the rules know (the codes they register): `help_from` gives the text
    when help is shown, so starting the command imports no rule module."""

    def __init__(self, *args, help_from, **kwargs) -> None:  # noqa: ANN001, ANN003 - click's own signature
        super().__init__(*args, **kwargs)
        self._help_from = help_from

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self._help_from()
        return super().get_help_record(ctx)


def _resource_slices_help() -> str:
    from numatune.commands.check import resource_slice_codes

    return ("Check the DRA ResourceSlices of this node (kubectl get resourceslices -o yaml): the standard "
            f"pcieRoot/numaNode/pciBusID each device publishes ({resource_slice_codes()}).")


@click.command("check")
@click.option("--policy", "-p", "policy_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Policy file (numatune.toml) with the node's expected shape and settings.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None,
              help="Exit 1 when a finding reaches this severity [default: the policy's check.fail_on, else "
                   "warning].")
@click.option("--pid", "pids", type=PID, multiple=True,
              help="Also run audit's locality rules on this process (repeatable).")
@click.option("--slurm-conf", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Check this slurm.conf's NodeName line against the node (NT520, NT521, NT524, NT525).")
@click.option("--gres-conf", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Check this gres.conf's GPU lines: files, Cores= sockets (NT522-NT524).")
@click.option("--kubelet-config", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Check a KubeletConfiguration (YAML or JSON): reservations per NUMA node (NT530-NT536).")
@click.option("--resource-slices", type=click.Path(dir_okay=False), default=None, metavar="FILE", cls=_DerivedHelp,
              help_from=_resource_slices_help)
@click.option("--node-name", default=None, metavar="NAME",
              help="The node's name in slurm.conf/gres.conf and the ResourceSlices' nodeName [default: the only "
                   "NodeName line of a slurm.conf with one, else the root's short hostname].")
@format_option("text", "json", "junit", output=True)  # -o report.xml: JUnit; the exit status is unchanged
@click.option("--verbose", "-v", is_flag=True, help="Text: list the checks that passed too.")
@click.pass_obj
def check_cmd(
    app: App,
    policy_path: Path | None,
    fail_on: str | None,
    pids: tuple[int, ...],
    slurm_conf: str | None,
    gres_conf: str | None,
    kubelet_config: str | None,
    resource_slices: str | None,
    node_name: str | None,
    fmt: str,
    output: Path | None,
    verbose: bool,
) -> None:
    """Run every finding rule (inspect's, irq's, audit's with --pid, the scheduler files given) and a policy.

    Exit status: 0 when no finding reaches --fail-on, 1 when one does, 2 for usage errors and 3
    when the root or the policy cannot be read. A check that cannot run on this root (no
    /proc/interrupts, numactl's version on a saved tree) is reported as skipped, never as passed.
    """
    from numatune.commands.check import SchedFiles, check_report, load_policy
    from numatune.errors import ExitCode

    policy = load_policy(policy_path) if policy_path is not None else None
    sched = SchedFiles(slurm_conf, gres_conf, kubelet_config, node_name, resource_slices)
    policy_name = str(policy_path) if policy_path is not None else None
    text, failed, skipped = check_report(app.host, app.root, policy, policy_name, pids, fail_on, fmt, verbose,
                                         sched)
    deliver(app, text, output, fmt)
    if fmt == "text":
        for subject, reason in skipped:
            app.note(f"skipped {subject}: {reason}")
    if failed:
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))
