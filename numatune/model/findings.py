"""Findings: what a rule concluded, with a stable code so CI policies can refer to it.

Every code is declared once, with `register` (code, default severity, title, doc), by the module
whose rules report it; `numatune.analysis.codes.all_codes()` loads them all for docs and tests.
"""

from __future__ import annotations

from enum import Enum

from numatune.model._record import record


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@record
class Finding:
    code: str  # stable, e.g. "NT002"; never reused for another meaning
    severity: Severity
    message: str  # one line
    fix: str  # what to do about it, one line ("" when nothing can be done)
    subject: str = ""  # what it is about: "node 2", "0000:18:00.0", "irq 45"


@record
class Skipped:
    """Something that could not be read or analysed, and why; shown, never silently dropped."""

    subject: str
    reason: str


@record
class Code:
    """One finding code as documented: the registry entry a rule reports under."""

    code: str  # "NT001"
    severity: Severity  # the default; some rules lower it (a one-node machine) and policies override it
    group: str  # "topology" | "irq" | "policy" | "audit": the command family that reports it
    title: str  # one line, what is wrong
    doc: str  # why it matters, when it fires (man page text)
    supersedes: str = ""  # a code whose finding on the same subject this one replaces (see `supersede`)

    def __call__(self, message: str, fix: str, subject: str = "", severity: Severity | None = None) -> Finding:
        return Finding(self.code, severity or self.severity, message, fix, subject)


REGISTRY: dict[str, Code] = {}


def register(code: str, severity: Severity, group: str, title: str, doc: str, supersedes: str = "") -> Code:
    """Declare a finding code; a second declaration of the same code is a programming error."""
    if code in REGISTRY:
        raise ValueError(f"finding code {code} is registered twice")
    entry = Code(code, severity, group, title, " ".join(doc.split()), supersedes)
    REGISTRY[code] = entry
    return entry

