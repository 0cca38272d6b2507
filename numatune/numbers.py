"""The one reader of integers written as text by a root, a process or a user's file (decimal or hex).

Python's int() on such text has three traps: past 4,300 decimal digits it raises a ValueError that no
caller expects (exit 70, "internal error"); it takes digits no kernel writes (" ١٢ ", "1_000", "１２");
and a hex value of 4,000 digits parses and then fails, or fills a report, far from where it was read.
Every number taken from untrusted text goes through `parse_int` (or `maybe_int`, for text that may
legitimately be something else): ASCII digits only, an optional sign, `0x` for hex, and at most
MAX_DIGITS digits, else ParseError (exit 3) naming the file and, where known, the line.

A leaf module of the bottom layer (stdlib only, as errors and cpulist), so that every layer may use it:
cpulist's syntax, the model's environment values, the readers, the plans and the commands alike.
"""

from __future__ import annotations

from numatune.errors import ParseError

#: No value a kernel, driver or numatune's own records write has more digits: a 64-bit counter is 20
#: decimal or 16 hex digits, a 128-bit one 39 or 32. Leading zeros count (a kernel pads to a width, never
#: beyond it), so the work on any one number is bounded too.
MAX_DIGITS = 40
_DEC = "0123456789"
_HEX = "0123456789abcdefABCDEF"


def parse_int(text: str, where: str, *, base: int = 10, line: int | None = None) -> int:
    """The integer TEXT holds (surrounding blanks and NULs ignored; base 10, 16, or 0: "0x" then hex,
    else decimal); ParseError naming WHERE (and LINE) for anything else."""
    value = _parse(text, base)
    if isinstance(value, int):
        return value
    raise ParseError(_place(where, line), value)


def maybe_int(text: str, where: str, *, base: int = 10, line: int | None = None) -> int | None:
    """The integer TEXT holds, or None when it is not one ("N/A", "-", a name); a number of more than
    MAX_DIGITS digits is still ParseError (never quietly taken for "not a number")."""
    value = _parse(text, base)
    if isinstance(value, int):
        return value
    if value.startswith("a number of"):
        raise ParseError(_place(where, line), value)
    return None


def maybe_ints(text: str, where: str) -> list[int | None]:
    """maybe_int of each blank-separated token of TEXT (a row of numbers: a node's distances), a row of plain
    decimal digits in one pass (a 1,000-node tree's million distances took 9 s read one call a number)."""
    tokens = text.split()
    joined = "".join(tokens)
    if joined.isascii() and joined.isdigit() and max(map(len, tokens), default=0) <= MAX_DIGITS:
        return list(map(int, tokens))
    return [maybe_int(t, where) for t in tokens]


def too_long(text: str) -> bool:
    """True when TEXT (a run of digits, as a fixed-width slice or a checked token) is longer than any
    number numatune reads: for hot loops that check a line once instead of each number."""
    return len(text) > MAX_DIGITS + 3  # sign and "0x"


def _place(where: str, line: int | None) -> str:
    return where if line is None else f"{where} line {line}"


def _parse(text: str, base: int) -> int | str:
    """The value, or why not (a str)."""
    s = text.strip(" \t\n\r\x00")
    body = s[1:] if s[:1] in ("-", "+") else s
    if base == 0:
        base = 16 if body[:2] in ("0x", "0X") else 10
    if base == 16 and body[:2] in ("0x", "0X"):
        body = body[2:]
    digits = _HEX if base == 16 else _DEC
    if not body or not body.isascii() or body.strip(digits):
        kind = "a hexadecimal integer" if base == 16 else "an integer"
        return f"expected {kind}, got {text[:40]!r}{'...' if len(text) > 40 else ''}"
    if len(body) > MAX_DIGITS:
        return f"a number of {len(body)} digits ({body[:12]}...), more than the {MAX_DIGITS} any real value has"
    value = int(body, base)
    return -value if s[0] == "-" else value
