"""App: what every command shares (the root, output consoles, flags), built once per invocation."""

from __future__ import annotations

from typing import Any

import click

from numatune.system.host import Host


class App:
    __slots__ = ("root", "color", "debug", "root_named", "root_origin", "_host", "_shown")

    def __init__(self, root: str = "/", color: bool = True, debug: bool = False, host: Host | None = None,
                 root_named: bool = False, root_origin: str | None = None) -> None:
        self.root = root
        self.color = color
        self.debug = debug
        self.root_named = root_named  # --root or NUMATUNE_ROOT given (else the live node by default)
        self.root_origin = root_origin  # "NUMATUNE_ROOT" when the root came from there (its errors say so)
        self._host = host
        self._shown = 0  # width of the progress line on stderr

    @property
    def plain(self) -> bool:
        """--no-color or NO_COLOR: no escape byte at all (no colour, no cursor movement, no redrawn line)."""
        import os

        return not self.color or "NO_COLOR" in os.environ

    def progress(self, text: str | None) -> None:
        """A progress line on a terminal's stderr, rewritten in place; None clears it. Plain (--no-color):
        the line is rewritten after a carriage return and blanked with spaces, never with an escape code."""
        if text is None and not self._shown:
            return
        line = "" if text is None else text
        if self.plain:
            click.echo("\r" + line.ljust(self._shown) + ("\r" if text is None else ""), err=True, nl=False)
        else:
            click.echo("\r" + line + "\033[K", err=True, nl=False)
        self._shown = len(line)

    @property
    def host(self) -> Host:
        """Opened on first use, so commands that never read the system never pay for it."""
        if self._host is None:
            self._host = Host.open(self.root, origin=self.root_origin)
        return self._host

    def console(self, *, stderr: bool = False):  # noqa: ANN201 - rich is imported lazily
        from numatune.render.console import make_console

        return make_console(self.color, stderr=stderr)

    def echo_json(self, document: Any) -> None:
        from numatune.render.envelope import dumps

        click.echo(dumps(document))

    def note(self, message: str) -> None:
        from numatune.render.printable import echo

        echo(f"numatune: {message}\n", err=True)

    def warn(self, message: str) -> None:
        self.note(f"warning: {message}")
