"""man/numatune-codes.7, written from the registry (`python -m numatune.render.codes_man > man/numatune-codes.7`);
tests/test_codes.py fails when the page and the registry differ."""

from __future__ import annotations

from numatune.analysis.codes import GROUPS, all_codes


def _roff(text: str) -> str:
    return text.replace("\\", "\\\\").replace("-", "\\-")


def codes_man_page() -> str:
    lines = [
        '.TH NUMATUNE-CODES 7 "2026" "numatune" "Miscellaneous"',
        ".SH NAME",
        "numatune-codes \\- the finding codes numatune reports",
        ".SH DESCRIPTION",
        "Every finding carries a stable code (never reused for another meaning), a severity, a one-line",
        "message, a fix and the subject it is about. The severity shown is the default: a policy's",
        "\\fBcheck.severity\\fR table overrides it and \\fBcheck.ignore\\fR drops a code (see",
        "\\fBnumatune-check\\fR(1)). This page is generated from the registry the rules declare their codes in.",
    ]
    codes = all_codes()
    for group, where in GROUPS.items():
        lines += [f".SH {group.upper()}", f"Reported by {_roff(where)}."]
        for c in codes:
            if c.group != group:
                continue
            lines += [".TP", f".B {c.code}", f"({c.severity.value}) {_roff(c.title)}.", ".br", _roff(c.doc)]
    lines += [".SH EXIT STATUS", "Not a command; see \\fBnumatune\\fR(1).",
              ".SH SEE ALSO",
              "\\fBnumatune\\fR(1), \\fBnumatune-inspect\\fR(1), \\fBnumatune-irq\\fR(1), \\fBnumatune-check\\fR(1),",
              "\\fBnumatune-audit\\fR(1)"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(codes_man_page())
