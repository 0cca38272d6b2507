"""The one format switch every report command shares: `--format/-f NAME` and `--json`.

The names mean the same everywhere: `text` (for people: tables, lists), `json` (the versioned
document, numatune.render.envelope), `prometheus` (node_exporter textfile), `junit` (CI test
report), `svg` (a picture of the node, numatune.render.picture) and `html` (one self-contained page).
Each command offers the subset it can write. `table`, the old name of `text` for inspect, audit and
irq, is still accepted. Commands that write to `--output/-o FILE` take the format from the file's
suffix (SUFFIXES) unless --format says otherwise.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import click

FORMATS = ("text", "json", "prometheus", "junit", "svg", "html")
ALIASES = {"table": "text"}
SUFFIXES = {".svg": "svg", ".html": "html", ".htm": "html", ".json": "json", ".prom": "prometheus",
            ".xml": "junit", ".txt": "text"}


class FormatChoice(click.Choice):
    """click.Choice that also takes the old names (not shown in --help)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(ALIASES.get(value, value), param, ctx)


def format_option(*choices: str, default: str | None = "text",
                  output: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add `--format CHOICE` and `--json` (same as `--format json`); the command gets `fmt` only.

    default=None: `fmt` is None unless asked for (launch, where asking for a format means "print the plan").
    output=True: also `--output/-o FILE` (the command gets `output`, a Path or None); without --format or
    --json the format is guessed from FILE's suffix (`-o node.svg` writes SVG).
    """
    unknown = set(choices) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown output format(s) {sorted(unknown)}; add them to FORMATS")

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def command(*args: Any, fmt: str | None, as_json: bool, **kwargs: Any) -> Any:
            if as_json:
                fmt = "json"
            # os.path.isdir, not Path.is_dir: a name under a directory this user cannot search (`-o /root/x` as
            # a user) is no directory here, and write_file says why it cannot be written (exit 4)
            if output and kwargs.get("output") is not None and os.path.isdir(kwargs["output"]):
                from numatune.errors import UsageError

                raise UsageError(f"--output {kwargs['output']} is a directory: give a file name")
            if output and kwargs.get("output") is not None:
                ctx = click.get_current_context()
                asked = as_json or ctx.get_parameter_source("fmt") not in (None, click.core.ParameterSource.DEFAULT)
                named = SUFFIXES.get(kwargs["output"].suffix.lower())
                if asked and named is not None and named != fmt:
                    from numatune.errors import UsageError

                    given = "--json" if as_json else f"--format {fmt}"
                    raise UsageError(f"--output {kwargs['output']} names the {named} format but {given} was "
                                     "given: change the suffix or leave the format out")
                if not asked:
                    guessed = guess_format(kwargs["output"], choices, None)
                    if guessed is not None or not kwargs["output"].suffix:
                        fmt = guessed or fmt  # no suffix at all ("report"): the default format
                    else:
                        from numatune.errors import UsageError

                        names = ", ".join(s for s, f in SUFFIXES.items() if f in choices)
                        raise UsageError(f"--output {kwargs['output']}: the suffix {kwargs['output'].suffix!r} "
                                         f"names no format; use {names} or give --format")
            return func(*args, fmt=fmt, **kwargs)

        if output:
            from pathlib import Path

            names = ", ".join(f"{s}" for s, f in SUFFIXES.items() if f in choices)
            command = click.option("--output", "-o", type=click.Path(readable=False, path_type=Path),
                                   default=None,
                                   help=f"Write the report to FILE; the format follows its suffix ({names}) "
                                        "unless --format is given.")(command)
        command = click.option("--json", "as_json", is_flag=True,
                               help="Shorthand for --format json (versioned schema).")(command)
        return click.option("--format", "-f", "fmt", type=FormatChoice(choices), default=default,
                            show_default=default is not None, help="Output format.")(command)

    return decorator


def guess_format(path: Any, choices: tuple[str, ...], fallback: str | None) -> str | None:
    """The format a file name asks for (".svg" -> "svg"), if the command offers it, else `fallback`."""
    fmt = SUFFIXES.get(path.suffix.lower())
    return fmt if fmt in choices else fallback


def write_output(path: Any, text: str, mode: int = 0o644) -> None:
    """Write a report to the -o file (system.outfile: atomic, no-follow), made printable (render.printable)
    as on standard output; an unwritable path is one line, exit 3."""
    from numatune.render.printable import printable
    from numatune.system.outfile import write_file

    write_file(path, printable(text), mode=mode)


def output_name(path: Any) -> str:
    """How a note names the -o target: "standard output" for - and /dev/stdout (a file named "-" is never made)."""
    return "standard output" if str(path) in ("-", "/dev/stdout") else str(path)


def format_choices(command: click.Command) -> tuple[str, ...]:
    """The formats a command offers (for tests and docs)."""
    for p in command.params:
        if p.name == "fmt" and isinstance(p.type, click.Choice):
            return tuple(p.type.choices)
    return ()
