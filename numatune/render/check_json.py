"""The `numatune.check/1` JSON document (documented in docs/json-schemas.md)."""

from __future__ import annotations

from numatune.analysis.check import all_findings, fails
from numatune.model.check import CheckResult
from numatune.model.findings import Severity, Skipped
from numatune.render.envelope import envelope
from numatune.render.jsonable import to_jsonable

TYPE_CHECKING = False  # typing costs ~8 ms to import; check's default path starts without it
if TYPE_CHECKING:
    from typing import Any


def status(result: CheckResult, fail_on: Severity) -> str:
    """passed | failed | warned (findings below --fail-on) | skipped."""
    if result.skipped is not None:
        return "skipped"
    if not result.findings:
        return "passed"
    return "failed" if fails([result], fail_on) else "warned"


def check_document(
    source: str,
    policy: str | None,
    fail_on: Severity,
    results: list[CheckResult],
    skipped: tuple[Skipped, ...] = (),
) -> dict[str, Any]:
    findings = all_findings(results)
    counts = {s.value: sum(1 for f in findings if f.severity == s) for s in Severity}
    return envelope(
        "check",
        source=source,
        policy=policy,
        fail_on=fail_on.value,
        result="fail" if fails(results, fail_on) else "pass",
        counts=counts,
        checks=[
            {
                "name": r.name,
                "group": r.group,
                "description": r.description,
                "status": status(r, fail_on),
                "skipped_reason": r.skipped,
                "findings": to_jsonable(r.findings),
            }
            for r in results
        ],
        findings=to_jsonable(findings),
        skipped=to_jsonable(skipped),
    )
