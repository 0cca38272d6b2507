"""Findings: what a rule concluded, with a stable code so CI policies can refer to it."""

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
    code: str  # stable, e.g. "NT102"; never reused for another meaning
    severity: Severity
    message: str  # one line
    fix: str  # what to do about it, one line ("" when nothing can be done)
    subject: str = ""  # what it is about: "node 2", "0000:18:00.0", "irq 45"


@record
class Skipped:
    """Something that could not be read or analysed, and why; shown, never silently dropped."""

    subject: str
    reason: str
