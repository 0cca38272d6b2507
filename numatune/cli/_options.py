"""The one format switch every report command shares: `--format/-f NAME` and `--json`.

The names mean the same everywhere: `text` (for people: tables, lists), `json` (the versioned
document, numatune.render.envelope), `prometheus` (node_exporter textfile), `junit` (CI test
report). Each command offers the subset it can write. `table`, the old name of `text` for inspect,
audit and irq, is still accepted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

FORMATS = ("text", "json", "prometheus", "junit")
ALIASES = {"table": "text"}


class FormatChoice(click.Choice):
    """click.Choice that also takes the old names (not shown in --help)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(ALIASES.get(value, value), param, ctx)


def format_option(*choices: str, default: str | None = "text") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add `--format CHOICE` and `--json` (same as `--format json`); the command gets `fmt` only.

    default=None: `fmt` is None unless asked for (launch, where asking for a format means "print the plan").
    """
    unknown = set(choices) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown output format(s) {sorted(unknown)}; add them to FORMATS")

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def command(*args: Any, fmt: str | None, as_json: bool, **kwargs: Any) -> Any:
            return func(*args, fmt="json" if as_json else fmt, **kwargs)

        command = click.option("--json", "as_json", is_flag=True,
                               help="Shorthand for --format json (versioned schema).")(command)
        return click.option("--format", "-f", "fmt", type=FormatChoice(choices), default=default,
                            show_default=default is not None, help="Output format.")(command)

    return decorator


def format_choices(command: click.Command) -> tuple[str, ...]:
    """The formats a command offers (for tests and docs)."""
    for p in command.params:
        if p.name == "fmt" and isinstance(p.type, click.Choice):
            return tuple(p.type.choices)
    return ()
