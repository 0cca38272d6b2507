"""`numatune check` without the command line: every rule group that can run on a root, then a policy.

The click command and the click-free entry point (`numatune.entry`) both call `check_report`, so
the report is built one way. No click, no rich; the policy module (TOML, dataclasses) is imported
only when a policy is given.
"""

from __future__ import annotations

from numatune.host import Host

FAIL_ON = ("info", "warning", "error")


def check_report(host: Host, source: str, policy=None, policy_name: str | None = None,  # noqa: ANN001
                 pids: tuple[int, ...] = (), fail_on: str | None = None, fmt: str = "text",
                 verbose: bool = False):  # noqa: ANN201 - (text, failed, skipped)
    """(report text, whether it fails, skipped (subject, reason) pairs): what `check` prints and exits on."""
    from numatune.analysis.check import fails
    from numatune.model.findings import Severity

    if fail_on is not None:
        level = Severity(fail_on)
    elif policy is not None and policy.fail_on is not None:
        level = policy.fail_on
    else:
        level = Severity.WARNING
    results, topo = run_checks(host, policy, pids)
    if policy is not None:
        from numatune.analysis.policy import apply_overrides

        results = apply_overrides(results, policy)
    if fmt == "json":
        from numatune.render.check_json import check_document
        from numatune.render.envelope import dumps

        text = dumps(check_document(source, policy_name, level, results, topo.skipped)) + "\n"
    elif fmt == "junit":
        from numatune.render.junit import check_junit

        text = check_junit(source, level, results)
    else:
        from numatune.render.check_text import render_check_text

        text = render_check_text(source, policy_name, level, results, verbose=verbose)
    return text, fails(results, level), [(s.subject, s.reason) for s in topo.skipped]


def run_checks(host: Host, policy, pids: tuple[int, ...]):  # noqa: ANN001, ANN201 - (results, topology)
    """Every rule group that can run on this root, then the policy's expectations."""
    from numatune.analysis.check import supersede, topology_results
    from numatune.readers.pci import pci_ids_from_env
    from numatune.reports import node_topology

    topo = node_topology(host, pci_ids_from_env())  # the rules run below, once
    results = topology_results(topo)
    reserved = (policy.get("irq.rank_cpus") if policy is not None else None) or frozenset()
    irq_results, irq_report, irq_note = _irq_results(host, topo, reserved)
    results += irq_results
    if pids:
        results += _audit_results(host, topo, pids)
    if policy is not None:
        from numatune.analysis.policy import PolicyFacts, evaluate_policy

        facts = PolicyFacts(
            numactl_version=None,
            numactl_note="",
            irqs=_placements(irq_report),
            irq_note=irq_note,
        )
        if policy.get("tools.numactl_min_version") is not None:
            version, note = numactl_version(host)
            facts = PolicyFacts(version, note, facts.irqs, facts.irq_note)
        results += evaluate_policy(policy, topo, facts)
    return supersede(results), topo


def _irq_results(host: Host, topo, reserved: frozenset[int]):  # noqa: ANN001, ANN202
    """irq's rules when this root has /proc/interrupts; else one skipped result saying why.

    `reserved`: the policy's rank cores, so irq's own rule about IRQs on rank cores runs too.
    """
    from numatune.analysis.check import grouped_results
    from numatune.model.check import CheckResult

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


def _audit_results(host: Host, topo, pids: tuple[int, ...]):  # noqa: ANN001, ANN202
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
        findings += audit_findings(topo, read_process(host, pid, topo))
    return grouped_results("audit", findings, "process locality rules")


def numactl_version(host: Host) -> tuple[str | None, str]:
    """numactl's installed version on the live node (numactl has no --version before 2.0.19)."""
    import shutil
    import subprocess

    if not host.is_live:
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
