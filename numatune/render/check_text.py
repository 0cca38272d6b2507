"""`numatune check` as plain text: failures first with their fix, then what was skipped, then a verdict."""

from __future__ import annotations

from numatune.analysis.check import all_findings, fails
from numatune.model.check import CheckResult
from numatune.model.findings import Severity
from numatune.render.check_json import status
from numatune.render.finding_text import finding_block

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def render_check_text(
    source: str, policy: str | None, fail_on: Severity, results: list[CheckResult], verbose: bool = False,
    names: Mapping[str, str] | None = None,
) -> str:
    lines = [f"numatune check: {source}" + (f" (policy {policy})" if policy else "")]
    for r in results:
        st = status(r, fail_on)
        if st in ("failed", "warned"):
            for f in r.findings:
                mark = "FAIL" if f.severity.rank >= fail_on.rank else "note"
                lines += finding_block(f, f"{mark:<5} ", r.name, names)
        elif st == "skipped":
            lines.append(f"skip  {r.name}: {r.skipped}")
        elif verbose:
            lines.append(f"ok    {r.name}: {r.description}")
    findings = all_findings(results)
    n = {s: sum(1 for f in findings if f.severity == s) for s in Severity}
    count = dict.fromkeys(("passed", "failed", "warned", "skipped"), 0)  # every check has exactly one status
    for r in results:
        count[status(r, fail_on)] += 1
    verdict = "FAIL" if fails(results, fail_on) else "PASS"
    lines.append(
        f"{verdict}: {len(results)} checks: {count['passed']} passed, {count['failed']} failed, "
        f"{count['warned']} warned (findings below --fail-on), {count['skipped']} skipped; findings: "
        f"{n[Severity.ERROR]} error, {n[Severity.WARNING]} warning, {n[Severity.INFO]} info "
        f"(fails on {fail_on.value} and above)"
    )
    return "\n".join(lines) + "\n"
