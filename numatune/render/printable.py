"""Text that is safe to show: control characters from a root made visible, never sent to a terminal.

What numatune prints comes in part from the root it reads: device and CPU names, interface names,
IRQ action names, file names of a process's mappings, link targets. In a stranger's archive (or a
live process's file names) those can hold terminal control sequences: `ESC ] 0 ; ... BEL` retitles
the window, `ESC [ 2 J` clears it, others rewrite what the user sees or worse. Every human-readable
report and message passes through `printable` once, where it is written (render.console's rich
hook, `echo`, the -o writer, the error lines): C0 controls other than tab and newline, DEL and the
C1 range become `\\xNN`, visible and harmless. So do the bytes of a name that is not UTF-8 (an interface
or driver named by raw bytes: Python keeps each such byte as a lone surrogate, U+DC80-U+DCFF, which no
encoder writes): the byte 0x9b, an 8-bit CSI, is shown as `\\x9b` and never reaches a terminal raw, and
what is written is always valid UTF-8 (any other lone surrogate becomes `\\udXXX`). JSON needs nothing
(its encoder escapes them); XML (SVG, HTML, JUnit) becomes well-formed by the same pass (those
characters are not allowed in XML).

A leaf module: no imports, for the fast report paths.
"""

from __future__ import annotations

_CONTROLS = [c for c in range(0x20) if c not in (0x09, 0x0A)] + [0x7F] + list(range(0x80, 0xA0))
_VISIBLE = {c: f"\\x{c:02x}" for c in _CONTROLS}
_ASCII_CONTROLS = bytes(c for c in _CONTROLS if c < 0x80)
_SHOWN: dict[int, str] = {}  # _VISIBLE and every lone surrogate, built on the first text that needs it


def _shown() -> dict[int, str]:
    if not _SHOWN:
        _SHOWN.update(_VISIBLE)
        _SHOWN.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})
        _SHOWN.update({0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)})  # surrogateescape's bytes
    return _SHOWN


def printable(text: str) -> str:
    """`text` with every control character but tab and newline written as `\\xNN`, and every byte that
    was not UTF-8 (a lone surrogate) as `\\xNN` too."""
    raw = text.encode("utf-8", "surrogatepass")
    # The common case at C speed: no C0 control or DEL, no C1 (UTF-8 C2 80..C2 9F) and no surrogate (ED A0..
    # ED BF): any C2 or ED byte sends the text to the full check, "®" and some Hangul included.
    if len(raw.translate(None, _ASCII_CONTROLS)) == len(raw) and b"\xc2" not in raw and b"\xed" not in raw:
        return text
    return text.translate(_shown())


def echo(text: str, *, err: bool = False) -> None:
    """Write a finished human-readable report (or message) to standard output (error), made printable."""
    import sys

    stream = sys.stderr if err else sys.stdout
    stream.write(printable(text))
    stream.flush()


def never_fail_to_encode() -> None:
    """Standard output and error write a character their encoding cannot hold (an "®" under
    PYTHONIOENCODING=ascii or a Latin-1 locale) as `\\xNN`/`\\uXXXX` instead of failing the command:
    called once when the process starts. What is made printable holds no surrogate, so under UTF-8 nothing
    changes."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", "") == "strict":
            try:  # noqa: SIM105 - contextlib imports collections and functools, which the report paths do without
                stream.reconfigure(errors="backslashreplace")
            except (AttributeError, ValueError, OSError):  # a stand-in stream
                pass


def say_failure(exc: BaseException) -> int:
    """Say on standard error what ended the command (errors.describe_failure: one line, maybe a hint) and return
    its exit code; the one failure report of both entry points (which drop a failed standard output first:
    system.outfile.drop_stdout). A standard error that fails too leaves the exit code to say it."""
    from numatune.errors import describe_failure

    message, hint, code = describe_failure(exc)
    try:  # noqa: SIM105 - this module imports nothing at its top
        echo(f"numatune: error: {message}\n" + (f"hint: {hint}\n" if hint else ""), err=True)
    except (OSError, ValueError, AttributeError):
        pass
    return code
