"""numatune check."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import format_option

FAIL_ON = ("info", "warning", "error")


@click.command("check")
@click.option("--policy", "-p", "policy_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Policy file (numatune.toml) with the node's expected shape and settings.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None,
              help="Exit 1 when a finding reaches this severity [default: the policy's check.fail_on, else "
                   "warning].")
@click.option("--pid", "pids", type=int, multiple=True,
              help="Also run audit's locality rules on this process (repeatable).")
@format_option("text", "json", "junit")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to this file instead of stdout (the exit status is unchanged).")
@click.option("--verbose", "-v", is_flag=True, help="Text: list the checks that passed too.")
@click.pass_obj
def check_cmd(
    app: App,
    policy_path: Path | None,
    fail_on: str | None,
    pids: tuple[int, ...],
    fmt: str,
    output: Path | None,
    verbose: bool,
) -> None:
    """Run every finding rule (inspect's, irq's, audit's with --pid) and a policy's expectations.

    Exit status: 0 when no finding reaches --fail-on, 1 when one does, 2 for usage errors and 3
    when the root or the policy cannot be read. A check that cannot run on this root (no
    /proc/interrupts, numactl's version on a saved tree) is reported as skipped, never as passed.
    """
    from numatune.analysis.check import fails
    from numatune.analysis.policy import apply_overrides, load_policy
    from numatune.errors import ExitCode, InputError
    from numatune.model.findings import Severity

    policy = load_policy(policy_path) if policy_path is not None else None
    if fail_on is not None:
        level = Severity(fail_on)
    elif policy is not None and policy.fail_on is not None:
        level = policy.fail_on
    else:
        level = Severity.WARNING

    results, topo = run_checks(app, policy, pids)
    from numatune.readers import host_skipped

    skipped = host_skipped(app.host, topo.skipped)  # and what irq's and audit's readers could not read
    results = apply_overrides(results, policy)
    source = app.root
    policy_name = str(policy_path) if policy_path is not None else None

    if fmt == "json":
        from numatune.render.check_json import check_document
        from numatune.render.envelope import dumps

        text = dumps(check_document(source, policy_name, level, results, skipped)) + "\n"
    elif fmt == "junit":
        from numatune.render.junit import check_junit

        text = check_junit(source, level, results)
    else:
        from numatune.render.check_text import render_check_text

        text = render_check_text(source, policy_name, level, results, verbose=verbose)
    if output is not None:
        try:
            output.write_text(text)
        except OSError as exc:
            raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    else:
        click.echo(text, nl=False)
    if fmt == "text":
        for s in skipped:
            app.note(f"skipped {s.subject}: {s.reason}")
    if fails(results, level):
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))


def run_checks(app: App, policy, pids: tuple[int, ...]):  # noqa: ANN001, ANN201 - (results, topology)
    """Every rule group that can run on this root, then the policy's expectations."""
    from numatune.analysis.check import supersede, topology_results
    from numatune.analysis.policy import PolicyFacts, evaluate_policy
    from numatune.cli.inspect import build_inspect

    topo, _matrix, _findings = build_inspect(app)
    results = topology_results(topo)
    reserved = (policy.get("irq.rank_cpus") if policy is not None else None) or frozenset()
    irq_results, irq_report, irq_note = _irq_results(app, topo, reserved)
    results += irq_results
    if pids:
        results += _audit_results(app, topo, pids)
    if policy is not None:
        facts = PolicyFacts(
            numactl_version=None,
            numactl_note="",
            irqs=_placements(irq_report),
            irq_note=irq_note,
        )
        if policy.get("tools.numactl_min_version") is not None:
            version, note = numactl_version(app)
            facts = PolicyFacts(version, note, facts.irqs, facts.irq_note)
        results += evaluate_policy(policy, topo, facts)
    return supersede(results), topo


def _irq_results(app: App, topo, reserved: frozenset[int]):  # noqa: ANN001, ANN202
    """irq's rules when this root has /proc/interrupts; else one skipped result saying why.

    `reserved`: the policy's rank cores, so irq's own rule about IRQs on rank cores runs too.
    """
    from numatune.analysis.check import grouped_results
    from numatune.model.check import CheckResult

    host = app.host
    if not host.exists("/proc/interrupts"):
        note = "this root has no /proc/interrupts"
        return [CheckResult("irq.all", "irq", "IRQ placement rules", skipped=note)], None, note
    try:
        from numatune.analysis.irq import irq_findings
        from numatune.readers.irqs import read_irq_report
    except ModuleNotFoundError:
        note = "the IRQ rules are not part of this build"
        return [CheckResult("irq.all", "irq", "IRQ placement rules", skipped=note)], None, note
    report = read_irq_report(host, topo)
    note = "" if report.has_proc_irq else "this root has no /proc/irq (IRQ affinity unknown)"
    return grouped_results("irq", irq_findings(topo, report, reserved), "IRQ placement rules"), report, note


def _placements(report):  # noqa: ANN001, ANN202 - IrqReport | None -> tuple[IrqPlacement, ...] | None
    from numatune.model.check import IrqPlacement

    if report is None or not getattr(report, "has_proc_irq", False):
        return None
    out = []
    for dev in report.devices:
        for irq in dev.irqs:
            where = irq.where
            if where is not None:
                out.append(IrqPlacement(irq.irq, dev.bdf, dev.label, frozenset(where)))
    return tuple(out)


def _audit_results(app: App, topo, pids: tuple[int, ...]):  # noqa: ANN001, ANN202
    from numatune.analysis.check import grouped_results
    from numatune.model.check import CheckResult

    try:
        from numatune.analysis.locality import audit_findings
        from numatune.readers.procs import read_process
    except ModuleNotFoundError:
        return [CheckResult("audit.all", "audit", "process locality rules",
                            skipped="the audit rules are not part of this build")]
    findings = []
    for pid in pids:
        findings += audit_findings(topo, read_process(app.host, pid, topo))
    return grouped_results("audit", findings, "process locality rules")


def numactl_version(app: App) -> tuple[str | None, str]:
    """numactl's installed version on the live node (numactl has no --version before 2.0.19)."""
    import shutil
    import subprocess

    if not app.host.is_live:
        return None, "numactl's version is only known on the live node, not in a saved root"
    if shutil.which("numactl") is None:
        return None, "numactl is not installed (not on PATH)"
    attempts = (
        ["numactl", "--version"],
        ["dpkg-query", "-W", "-f=${Version}", "numactl"],
        ["rpm", "-q", "--qf", "%{VERSION}", "numactl"],
    )
    for cmd in attempts:
        if shutil.which(cmd[0]) is None:
            continue
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = proc.stdout.strip()
        if proc.returncode == 0 and text:
            return text.split()[-1], ""
    return None, "numactl is installed but its version could not be found (no --version, dpkg or rpm)"
