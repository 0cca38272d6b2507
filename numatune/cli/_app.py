"""App: what every command shares (the root, output consoles, flags), built once per invocation."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import click

from numatune.host import Host


@dataclass
class App:
    root: str = "/"
    color: bool = True
    debug: bool = False
    _host: Host | None = field(default=None, repr=False)

    @property
    def host(self) -> Host:
        """Opened on first use, so commands that never read the system never pay for it."""
        if self._host is None:
            self._host = Host.open(self.root)
        return self._host

    def console(self, *, stderr: bool = False):  # noqa: ANN201 - rich is imported lazily
        from rich.console import Console

        no_color = not self.color or "NO_COLOR" in os.environ
        return Console(
            file=sys.stderr if stderr else sys.stdout,
            no_color=no_color,
            highlight=False,
            emoji=False,
            soft_wrap=False,
        )

    def echo_json(self, document: Any) -> None:
        click.echo(json.dumps(document, indent=2, sort_keys=False))

    def note(self, message: str) -> None:
        click.echo(f"numatune: {message}", err=True)

    def warn(self, message: str) -> None:
        click.echo(f"numatune: warning: {message}", err=True)
