"""The one console: --no-color and NO_COLOR write no escape byte, on a terminal too; off a terminal no line
keeps the blanks rich pads titles and cells with."""

from __future__ import annotations

import io
import os
import pty
import sys

import pytest

from numatune.render.console import TrimmedLines, make_console
from tests.conftest import PROJECT, fixture_root


def _on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """numatune's output on a real pseudo-terminal (stdout and stderr both)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: numatune on the terminal
        os.chdir(PROJECT)
        os.execve(sys.executable, [sys.executable, "-m", "numatune", *args], env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    os.close(fd)
    return out


@pytest.mark.parametrize("command", [["inspect"], ["irq"], ["irq", "plan"], ["check", "--verbose"]])
def test_no_color_means_no_escape_byte_on_a_terminal(command):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(TERM="xterm-256color", COLUMNS="200", NUMATUNE_PCI_IDS="")
    root = ["--root", str(fixture_root("vm-cxl"))]
    coloured = _on_a_terminal([*root, *command], env)
    if command == ["inspect"]:
        assert b"\x1b[" in coloured  # the check below can fail: a terminal does get colour
    assert b"\x1b" not in _on_a_terminal(["--no-color", *root, *command], env), command
    assert b"\x1b" not in _on_a_terminal([*root, *command], {**env, "NO_COLOR": "1"}), command


def test_make_console_plain_has_no_style_at_all(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats the output as a terminal
    from rich.text import Text

    for color, present in ((True, True), (False, False)):
        console = make_console(color)
        out = io.StringIO()
        console.file = out
        console.print(Text("bold", style="bold"), Text("dim", style="dim italic"))
        assert ("\x1b" in out.getvalue()) is present, color


def test_trimmed_lines_drop_padding_and_keep_partial_lines():
    out = io.StringIO()
    trimmed = TrimmedLines(out)
    trimmed.write("title     \nrow │ x  ")
    assert out.getvalue() == "title\n"
    trimmed.write(" \n")
    trimmed.write("tail  ")
    trimmed.flush()
    assert out.getvalue() == "title\nrow │ x\ntail  "
    assert not trimmed.isatty() and trimmed.encoding == out.encoding


def test_a_plain_watch_on_a_terminal_redraws_nothing():
    """`audit PID --watch --no-color` on a terminal: frames one after the other, no cursor movement."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(TERM="xterm-256color", COLUMNS="200")
    args = ["audit", str(os.getpid()), "--watch", "--interval", "0.1", "--count", "2"]
    assert b"\x1b" in _on_a_terminal(args, env)  # the live view moves the cursor
    plain = _on_a_terminal(["--no-color", *args], env)
    assert b"\x1b" not in plain and plain.count(b"numatune audit \xe2\x80\x94 ") == 2, plain
