"""Run every finding rule as a named check, so a CI report lists what passed as well as what failed."""

from __future__ import annotations

from numatune.model.check import CheckResult
from numatune.model.findings import REGISTRY, Finding, Severity
from numatune.model.topology import Topology

TYPE_CHECKING = False  # annotations only: collections.abc imports collections (~5% of a start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable


def topology_results(topo: Topology) -> list[CheckResult]:
    """inspect's rules (NT0xx), one result per rule function."""
    from numatune.analysis.topology_findings import CHECKS

    out = []
    for code, check in CHECKS:
        name = check.__name__.removeprefix("check_")
        findings = tuple(sorted(check(topo), key=lambda f: (f.code, f.subject)))
        # what is checked, in neutral words (the code's title says what is wrong, which reads oddly on a pass)
        out.append(CheckResult(f"topology.{name}", "topology", f"{code.code} {name.replace('_', ' ')}", findings))
    return out


def grouped_results(group: str, findings: Iterable[Finding], ran: str) -> list[CheckResult]:
    """Findings from a rule set that returns one flat list: one result per code, or one passing result."""
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    if not by_code:
        return [CheckResult(f"{group}.all", group, ran)]
    return [
        CheckResult(f"{group}.{code}", group, f"{ran}: {_titled(code)}", tuple(sorted(fs, key=lambda f: f.subject)))
        for code, fs in sorted(by_code.items())
    ]


def _titled(code: str) -> str:
    return f"{code} {REGISTRY[code].title}" if code in REGISTRY else code


def supersede(results: list[CheckResult]) -> list[CheckResult]:
    """Drop a finding that another one replaces on the same subject (the registry's `supersedes`): one fact,
    one report (NT340 for a GPU-local NIC's IRQs on rank cores, not NT340 and NT203)."""
    replaced = {(REGISTRY[f.code].supersedes, f.subject) for r in results for f in r.findings
                if f.code in REGISTRY and REGISTRY[f.code].supersedes}
    if not replaced:
        return results
    return [r._replace(findings=tuple(f for f in r.findings if (f.code, f.subject) not in replaced))
            for r in results]


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
