"""Run every finding rule as a named check, so a CI report lists what passed as well as what failed."""

from __future__ import annotations

from collections.abc import Iterable

from numatune.model.check import CheckResult
from numatune.model.findings import Finding, Severity
from numatune.model.topology import Topology


def topology_results(topo: Topology) -> list[CheckResult]:
    """inspect's rules (NT0xx), one result per rule function."""
    from numatune.analysis.topology_findings import CHECKS

    out = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        doc = (check.__doc__ or "").strip().splitlines()
        findings = tuple(sorted(check(topo), key=lambda f: (f.code, f.subject)))
        out.append(CheckResult(f"topology.{name}", "topology", doc[0] if doc else name.replace("_", " "), findings))
    return out


def grouped_results(group: str, findings: Iterable[Finding], ran: str) -> list[CheckResult]:
    """Findings from a rule set that returns one flat list: one result per code, or one passing result."""
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    if not by_code:
        return [CheckResult(f"{group}.all", group, ran)]
    return [
        CheckResult(f"{group}.{code}", group, f"{ran}: {code}", tuple(sorted(fs, key=lambda f: f.subject)))
        for code, fs in sorted(by_code.items())
    ]


def all_findings(results: Iterable[CheckResult]) -> list[Finding]:
    out = [f for r in results for f in r.findings]
    return sorted(out, key=lambda f: (-f.severity.rank, f.code, f.subject))


def worst(results: Iterable[CheckResult]) -> Severity | None:
    levels = [f.severity for r in results for f in r.findings]
    return max(levels, key=lambda s: s.rank) if levels else None


def fails(results: Iterable[CheckResult], fail_on: Severity) -> bool:
    """True when a finding reaches the --fail-on level."""
    w = worst(results)
    return w is not None and w.rank >= fail_on.rank
