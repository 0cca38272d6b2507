"""The rich console every human-readable report prints through (one place for its settings)."""

from __future__ import annotations

import os
import sys


def make_console(color: bool = True, *, stderr: bool = False):  # noqa: ANN201 - rich is imported lazily
    from rich.console import Console

    return Console(
        file=sys.stderr if stderr else sys.stdout,
        no_color=not color or "NO_COLOR" in os.environ,
        highlight=False,
        emoji=False,
        markup=False,  # device names and sysfs values contain brackets ("[ConnectX-3]", "[root]")
        soft_wrap=False,
    )
