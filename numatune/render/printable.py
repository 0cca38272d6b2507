"""Text that is safe to show: control characters from a root made visible, never sent to a terminal.

What numatune prints comes in part from the root it reads: device and CPU names, interface names,
IRQ action names, file names of a process's mappings, link targets. In a stranger's archive (or a
live process's file names) those can hold terminal control sequences: `ESC ] 0 ; ... BEL` retitles
the window, `ESC [ 2 J` clears it, others rewrite what the user sees or worse. Every human-readable
report and message passes through `printable` once, where it is written (render.console's rich
hook, `echo`, the -o writer, the error lines): C0 controls other than tab and newline, DEL and the
C1 range become `\\xNN`, visible and harmless. JSON needs nothing (its encoder escapes them); XML
(SVG, HTML, JUnit) becomes well-formed by the same pass (those characters are not allowed in XML).

A leaf module: no imports, for the fast report paths.
"""

from __future__ import annotations

_CONTROLS = [c for c in range(0x20) if c not in (0x09, 0x0A)] + [0x7F] + list(range(0x80, 0xA0))
_VISIBLE = {c: f"\\x{c:02x}" for c in _CONTROLS}
_ASCII_CONTROLS = bytes(c for c in _CONTROLS if c < 0x80)


def printable(text: str) -> str:
    """`text` with every control character but tab and newline written as `\\xNN`."""
    raw = text.encode("utf-8", "surrogatepass")
    # The common case at C speed: no C0 control or DEL, and no C1 (UTF-8 C2 80..C2 9F: any C2 byte sends
    # the text to the full check, "®" included).
    if len(raw.translate(None, _ASCII_CONTROLS)) == len(raw) and b"\xc2" not in raw:
        return text
    return text.translate(_VISIBLE)


def echo(text: str, *, err: bool = False) -> None:
    """Write a finished human-readable report (or message) to standard output (error), made printable."""
    import sys

    stream = sys.stderr if err else sys.stdout
    stream.write(printable(text))
    stream.flush()
