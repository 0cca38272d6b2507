"""JUnit XML for `numatune check`: the format GitHub Actions, GitLab and Jenkins show as test results.

One <testsuite> per rule group (topology, irq, audit, policy), one <testcase> per rule or policy
expectation. Findings at or above --fail-on are <failure>s; below it they pass, listed in
<system-out>; a check that cannot run here is <skipped> with the reason.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from numatune.analysis.check import fails
from numatune.model.check import CheckResult
from numatune.model.findings import Finding, Severity


def _describe(findings: tuple[Finding, ...]) -> str:
    out = []
    for f in findings:
        out.append(f"{f.code} {f.severity.value}: {f.message}" + (f" [{f.subject}]" if f.subject else ""))
        if f.fix:
            out.append(f"  fix: {f.fix}")
    return "\n".join(out)


def check_junit(source: str, fail_on: Severity, results: list[CheckResult]) -> str:
    groups: dict[str, list[CheckResult]] = {}
    for r in results:
        groups.setdefault(r.group, []).append(r)
    root = ET.Element("testsuites", name="numatune check")
    total = {"tests": 0, "failures": 0, "skipped": 0}
    for group, items in groups.items():
        suite = ET.SubElement(root, "testsuite", name=f"numatune.{group}", hostname=source)
        counts = {"tests": len(items), "failures": 0, "skipped": 0}
        for r in items:
            case = ET.SubElement(suite, "testcase", classname=f"numatune.{group}", name=r.name, time="0")
            if r.skipped is not None:
                ET.SubElement(case, "skipped", message=r.skipped)
                counts["skipped"] += 1
            elif r.findings and fails([r], fail_on):
                top = max(r.findings, key=lambda f: f.severity.rank)
                failure = ET.SubElement(
                    case, "failure", message=f"{top.code}: {top.message}", type=top.severity.value
                )
                failure.text = _describe(r.findings)
                counts["failures"] += 1
            elif r.findings:
                ET.SubElement(case, "system-out").text = _describe(r.findings)
        for key, value in counts.items():
            suite.set(key, str(value))
            total[key] += value
        suite.set("errors", "0")
    for key, value in total.items():
        root.set(key, str(value))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
