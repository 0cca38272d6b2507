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
#: Linux's PID_MAX_LIMIT (4,194,304): no process id is as large; a PID option is 1 to PID_MAX - 1.
PID_MAX = 1 << 22
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


# ---- figures a person types: sizes (64G, 1.5T) and counts (7e9, 7B) ----

_BINARY = "bkmgtp"  # powers of 1024 for sizes: 1.5G is 1.5 GiB
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}  # counts: 7B is 7e9
#: Above every memory a node has (an exbibyte is 2**60): a larger size is a slip, not a budget.
MAX_SIZE = 1 << 80


def _figure(text: str) -> tuple[float, str] | None:
    """(number, suffix letters, lower case) of "1.5G", "7e9", "70B", "512 MiB"; None when it is none."""
    s = text.strip().lower()
    if not s or len(s) > MAX_DIGITS or not s.isascii():
        return None
    head = s.rstrip("abcdfghijklmnopqrstuvwxyz ")  # every letter but e (an exponent)
    tail = s[len(head):].strip()
    if head.endswith("e"):  # "7e" then letters: no exponent
        return None
    if not head or head.strip("0123456789.e+") or head.count(".") > 1 or head[0] in "e+":
        return None
    try:
        number = float(head)
    except ValueError:
        return None
    if number != number or number in (float("inf"), float("-inf")):  # noqa: PLR0124 - the NaN test
        return None
    return number, tail


def size_bytes(text: str) -> int | str:
    """A size a person typed ("64G", "64GiB", "1.5T", "512M", "4096" bytes; powers of 1024) in bytes, or why
    not (a str). The one size syntax of every option (audit --min-size, probe --size, plan-memory budgets)."""
    figure = _figure(text)
    unit = figure[1].removesuffix("b").removesuffix("i") if figure else ""
    if figure is None or len(unit) > 1 or unit and unit not in _BINARY:
        return f"{text[:40]!r}: expected a size like 64G, 512MiB or 1.5T"
    size = figure[0] * 1024 ** _BINARY.index(unit or "b")
    if not size < MAX_SIZE:
        return f"{text[:40]!r}: larger than any memory"
    return int(size)


def count_of(text: str) -> float | str:
    """A large count a person typed ("7e9", "12.2e9", "7B", "70B", "1.5T", "350M"; K, M, B/G, T are powers of
    1000, as model sizes are written), or why not (a str)."""
    figure = _figure(text)
    if figure is None or figure[1] not in _DECIMAL:
        return f"{text[:40]!r}: expected a count like 7e9, 7B, 70B or 1.5T"
    return figure[0] * _DECIMAL[figure[1]]
