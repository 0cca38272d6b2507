"""One finding as a block of plain text, for files, pipes and `check`: a head line (code, severity, subject),
then the message and the fix wrapped at 100 columns. The one writer of findings as text off a terminal
(`check`, and `inspect` when its output is not a terminal)."""

from __future__ import annotations

from numatune.model.findings import Finding

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

WIDTH = 100
INDENT = "      "


def wrap_words(text: str, width: int = WIDTH, first: str = INDENT, rest: str = INDENT) -> list[str]:
    """TEXT wrapped at WIDTH on blanks, the first line after FIRST, the others after REST; a word longer
    than a line is kept whole, never cut or folded (a path, a PCI address)."""
    lines: list[str] = []
    line, lead = "", first
    for word in text.split():
        if line and len(lead) + len(line) + 1 + len(word) > width:
            lines.append(lead + line)
            line, lead = word, rest
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(lead + line)
    return lines


def _wrapped(text: str) -> list[str]:
    return wrap_words(text)


def finding_block(f: Finding, lead: str = "", where: str = "", names: Mapping[str, str] | None = None) -> list[str]:
    """The block's lines: `{lead}{code} {severity} {subject}  [{where}]`, the message, `fix: ...`. A device
    subject is named as the other views name it (`names`, model.order.device_names: "GPU0 0000:18:00.0")."""
    subject = (names or {}).get(f.subject.lower(), f.subject)
    head = f"{lead}{f.code} {f.severity.value:<7} {subject}".rstrip() + (f"  [{where}]" if where else "")
    return [head, *_wrapped(f.message), *(_wrapped(f"fix: {f.fix}") if f.fix else [])]


def findings_text(findings: list[Finding], names: Mapping[str, str] | None = None) -> str:
    """Every finding as a block, under a "Findings" line ("No findings." when there is none)."""
    if not findings:
        return "No findings."
    return "\n".join(["Findings", *(line for f in findings for line in finding_block(f, names=names))])
