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

from numatune.numbers import PID_MAX
from numatune.system.outfile import output_name  # noqa: F401 - re-exported: how notes name the -o target

FORMATS = ("text", "json", "prometheus", "junit", "svg", "html")
ALIASES = {"table": "text"}
SUFFIXES = {".svg": "svg", ".html": "html", ".htm": "html", ".json": "json", ".prom": "prometheus",
            ".xml": "junit", ".txt": "text"}


class FormatChoice(click.Choice):
    """click.Choice that also takes the old names (not shown in --help)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(ALIASES.get(value, value), param, ctx)


def format_option(*choices: str, default: str | None = "text", output: bool = False,
                  text_suffixes: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add `--format CHOICE` and `--json` (same as `--format json`); the command gets `fmt` only.

    default=None: `fmt` is None unless asked for (launch, where asking for a format means "print the plan").
    output=True: also `--output/-o FILE` (the command gets `output`, a Path or None); without --format or
    --json the format is guessed from FILE's suffix (`-o node.svg` writes SVG); a suffix that names another
    format than --format/--json is exit 2, one that names no format is exit 2 too, but for `text_suffixes`:
    those name the command's text format (emit's `slurm.conf`, `kubelet.yaml`). Write the report with
    `deliver`, which says what it wrote.
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
                suffix = kwargs["output"].suffix.lower()
                named = "text" if suffix in text_suffixes else SUFFIXES.get(suffix)
                if asked and named is not None and named != fmt:
                    from numatune.errors import UsageError

                    given = "--json" if as_json else f"--format {fmt}"
                    raise UsageError(f"--output {kwargs['output']} names the {named} format but {given} was "
                                     "given: change the suffix or leave the format out")
                if not asked:
                    guessed = "text" if suffix in text_suffixes else guess_format(kwargs["output"], choices, None)
                    if guessed is not None or not kwargs["output"].suffix:
                        fmt = guessed or fmt  # no suffix at all ("report"): the default format
                    else:
                        from numatune.errors import UsageError

                        names = ", ".join([*(s for s, f in SUFFIXES.items() if f in choices), *text_suffixes])
                        raise UsageError(f"--output {kwargs['output']}: the suffix {kwargs['output'].suffix!r} "
                                         f"names no format; use {names} or give --format")
            return func(*args, fmt=fmt, **kwargs)

        if output:
            from pathlib import Path

            names = ", ".join([*(s for s, f in SUFFIXES.items() if f in choices), *text_suffixes])
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


def deliver(app: Any, text: str, output: Any, fmt: str | None) -> None:
    """The report to standard output, or to the -o file and a note saying what was written where
    (`numatune: wrote report.xml (junit)`): every command with -o ends here."""
    if output is None:
        from numatune.render.printable import echo

        echo(text)
        return
    write_output(output, text)
    app.note(f"wrote {output_name(output)}" + (f" ({fmt})" if fmt else ""))


def format_choices(command: click.Command) -> tuple[str, ...]:
    """The formats a command offers (for tests and docs)."""
    for p in command.params:
        if p.name == "fmt" and isinstance(p.type, click.Choice):
            return tuple(p.type.choices)
    return ()


# ---- numbers: every numeric option is finite and bounded (one type each, shared by every command) ----

#: The largest count any count option takes: past it a figure is a slip of the keyboard (1e30, 10**20), and
#: every count is checked against what the node holds later; a bound here keeps that check cheap.
MAX_COUNT = 1 << 20
#: NUMA node ids: the kernel's MAX_NUMNODES is at most 1 << 10 (NODES_SHIFT 10).
MAX_NODES = 1 << 10
#: A memory figure in MiB: an exbibyte.
MAX_MIB = 1 << 40
#: `audit --sample`: an hour of counting at most (documented in numatune-audit(1)).
MAX_SAMPLE = 3600.0
#: The longest any seconds option may ask for: a day (a longer run is a mistyped figure, not a plan).
MAX_SECONDS = 86400.0


class Number(click.FloatRange):
    """A finite float in [min, max] (FloatRange alone lets NaN through: every comparison with it is false;
    and inf and 1e308 pass a bound on one side only). Every float option of every command uses it."""

    name = "number"

    def __init__(self, min: float, max: float, *, min_open: bool = False) -> None:  # noqa: A002 - click's names
        super().__init__(min=min, max=max, min_open=min_open)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        number = super().convert(value, param, ctx)
        if number != number or number in (float("inf"), float("-inf")):  # noqa: PLR0124 - the NaN test
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def seconds(min: float = 0.0, max: float = MAX_SECONDS, *, min_open: bool = False) -> Number:  # noqa: A002
    """A duration in seconds: finite, at least `min`, at most `max` (a day unless said)."""
    return Number(min, max, min_open=min_open)


class Count(click.IntRange):
    """An integer in [min, max]; max is always given (MAX_COUNT unless the option knows a smaller bound)."""

    name = "count"

    def __init__(self, min: int = 0, max: int = MAX_COUNT) -> None:  # noqa: A002 - click's names
        super().__init__(min=min, max=max)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and len(value.strip()) > 40:  # int() of a long digit string costs its square
            self.fail(f"{value[:20]}...: not a count (at most {self.max:,})", param, ctx)
        return super().convert(value, param, ctx)


#: Every PID option and argument: 1 to PID_MAX (a negative or 0 PID is a usage error, exit 2, not "no such
#: process").
PID = Count(1, PID_MAX - 1)
PID.name = "pid"


# ---- a group's options: honoured by every subcommand, or refused (exit 2); never dropped ----

def _format_of(ctx: click.Context) -> str | None:
    """The format asked for on `ctx`'s command line (--json or --format), None when none was."""
    default = (None, click.core.ParameterSource.DEFAULT)
    if ctx.params.get("as_json") and ctx.get_parameter_source("as_json") not in default:
        return "json"
    if "fmt" in ctx.params and ctx.get_parameter_source("fmt") not in default:
        return ctx.params["fmt"]
    return None


def _spelled(param: click.Parameter) -> str:
    return max(param.opts, key=len)


def _inherit(group: click.Group, sub: click.Command) -> None:
    """Wrap `sub`'s callback: the options given to the group before the subcommand's name become the
    subcommand's own; the same option given in both places with two values, or one the subcommand does
    not have, is a usage error (exit 2)."""
    callback = sub.callback
    if callback is None or getattr(callback, "_numatune_inherits", False):
        return

    @functools.wraps(callback)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        parent = ctx.parent
        if parent is None or parent.command is not group:
            return callback(*args, **kwargs)
        where = f"`{ctx.command_path}`"
        default = (None, click.core.ParameterSource.DEFAULT)
        fmt = _format_of(parent)
        if fmt is not None:
            choices = format_choices(sub)
            if not choices:
                raise click.UsageError(f"{where} writes no report: --format/--json do not apply to it", ctx)
            if fmt not in choices:
                raise click.UsageError(f"{where} has no {fmt} format (it writes {', '.join(choices)})", ctx)
            own = _format_of(ctx)
            if own is not None and own != fmt:
                raise click.UsageError(f"two formats: {fmt} before `{ctx.info_name}` and {own} after it", ctx)
            kwargs["fmt"], kwargs["as_json"] = fmt, False
            ctx.set_parameter_source("fmt", click.core.ParameterSource.COMMANDLINE)
        mine = {p.name: p for p in sub.params if isinstance(p, click.Option) and p.expose_value}
        for param in group.params:
            if (not isinstance(param, click.Option) or not param.expose_value or param.name in ("fmt", "as_json")
                    or parent.get_parameter_source(param.name) in default):
                continue
            value = parent.params[param.name]
            if param.name not in mine:
                raise click.UsageError(f"{_spelled(param)} does not apply to {where}", ctx)
            if ctx.get_parameter_source(param.name) in default:
                kwargs[param.name] = value
                ctx.set_parameter_source(param.name, click.core.ParameterSource.COMMANDLINE)
            elif kwargs[param.name] != value:
                raise click.UsageError(f"{_spelled(param)} given twice with two values: before `{ctx.info_name}` "
                                       "and after it", ctx)
        return callback(*args, **kwargs)

    wrapped._numatune_inherits = True  # type: ignore[attr-defined]
    sub.callback = wrapped


class OptionGroup(click.Group):
    """A command group whose own options (`numatune irq --exclude-cpus 0 apply`) reach its subcommands: the
    README says options go before or after a command's name, so a subcommand honours the ones given before
    it, or refuses them (exit 2) when they mean nothing to it; a group option is never dropped."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        _inherit(self, cmd)


def group_options(group: click.Group) -> list[click.Option]:
    """A group's own options (what its subcommands inherit): for tests and docs."""
    return [p for p in group.params if isinstance(p, click.Option) and p.expose_value]


class Size(click.ParamType):
    """A size in bytes, as people write it (64G, 512MiB, 1.5T, 4096): numatune.numbers.size_bytes, the one
    size syntax of every option; at least `min` bytes."""

    name = "size"

    def __init__(self, min: int = 0) -> None:  # noqa: A002 - click's name
        self.min = min

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        from numatune.numbers import size_bytes

        size = size_bytes(str(value))
        if isinstance(size, str):
            self.fail(size, param, ctx)
        if size < self.min:
            self.fail(f"{value!r}: at least {self.min:,} bytes", param, ctx)
        return size


class LargeCount(click.ParamType):
    """A count too large to type in full (a model's parameters: 7e9, 7B, 70B, 1.5T): positive and below
    `max`; numatune.numbers.count_of."""

    name = "count"

    def __init__(self, max: float) -> None:  # noqa: A002 - click's name
        self.max = max

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        from numatune.numbers import count_of

        count = count_of(str(value))
        if isinstance(count, str):
            self.fail(count, param, ctx)
        if not 0 < count < self.max:
            self.fail(f"{value!r}: expected a positive count below {self.max:.0e}", param, ctx)
        return count
