"""Findings: what a rule concluded, with a stable code so CI policies can refer to it.

Every code is declared once, with `register` (code, default severity, title, doc), by the module
whose rules report it; `numatune.analysis.codes.all_codes()` loads them all for docs and tests.
"""

from __future__ import annotations

from numatune.model._record import record


class _Levels(type):
    """`for s in Severity` (info, warning, error), as over the Enum this replaced: `enum` pulls in functools
    and collections, ~10% of a `check`'s start-up."""

    def __iter__(cls):  # noqa: ANN204
        return iter(cls._members)

    def __len__(cls) -> int:
        return len(cls._members)

    def __getitem__(cls, name: str) -> Severity:  # Severity["WARNING"]
        member = getattr(cls, name, None) if name.isupper() else None
        if not isinstance(member, cls):
            raise KeyError(name)
        return member


class Severity(str, metaclass=_Levels):
    """info < warning < error: a str equal to its value ("warning"), so it renders and serialises as one;
    `Severity("warning")` gives the member, any other value a ValueError, as an Enum's lookup."""

    __slots__ = ()
    _members: tuple[Severity, ...] = ()
    INFO: Severity
    WARNING: Severity
    ERROR: Severity

    def __new__(cls, value: str) -> Severity:
        for member in cls._members:
            if member == value:
                return member
        raise ValueError(f"{value!r} is not a valid Severity")

    @property
    def value(self) -> str:
        return str.__str__(self)

    @property
    def name(self) -> str:
        return self.upper()

    @property
    def rank(self) -> int:
        return Severity._members.index(self)

    def __repr__(self) -> str:
        return f"<Severity.{self.name}: {str.__repr__(self)}>"

    def __str__(self) -> str:
        return f"Severity.{self.name}"  # as the Enum's str() and format()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


Severity._members = tuple(str.__new__(Severity, v) for v in ("info", "warning", "error"))
Severity.INFO, Severity.WARNING, Severity.ERROR = Severity._members


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

