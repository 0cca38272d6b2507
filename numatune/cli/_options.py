"""Options shared by report commands: --format/-f with a --json shorthand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def format_option(*choices: str, default: str = "table") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add `--format CHOICE` and `--json` (same as `--format json`); the command gets `fmt`."""

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        func = click.option(
            "--json", "as_json", is_flag=True, help="Shorthand for --format json (versioned schema)."
        )(func)
        func = click.option(
            "--format",
            "-f",
            "fmt",
            type=click.Choice(choices),
            default=default,
            show_default=True,
            help="Output format.",
        )(func)
        return func

    return decorator


def resolve_format(fmt: str, as_json: bool) -> str:
    return "json" if as_json else fmt
