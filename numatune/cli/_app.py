"""App: what every command shares (the root, output consoles, flags), built once per invocation."""

from __future__ import annotations

from typing import Any

import click

from numatune.system.host import Host


class App:
    __slots__ = ("root", "color", "debug", "_host")

    def __init__(self, root: str = "/", color: bool = True, debug: bool = False, host: Host | None = None) -> None:
        self.root = root
        self.color = color
        self.debug = debug
        self._host = host

    @property
    def host(self) -> Host:
        """Opened on first use, so commands that never read the system never pay for it."""
        if self._host is None:
            self._host = Host.open(self.root)
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
