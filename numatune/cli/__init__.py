"""The command line: a thin layer that parses options, calls the library and picks a renderer.

Subcommands are imported lazily (only the one being run), so `numatune --help`, `--version` and
`launch` stay fast. The error boundary lives in `NumatuneGroup.invoke`: a NumatuneError becomes one
line on stderr and its exit code; anything else is a bug, shown as one line unless --debug.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from numatune import __version__
from numatune.cli._app import App
from numatune.errors import ExitCode, describe_failure

# name -> (module:attribute, one-line help). Keep the help here so --help imports nothing else.
COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("numatune.cli.inspect:inspect_cmd", "Show sockets, NUMA nodes, tiers, GPUs, NICs, CXL and findings."),
    "audit": ("numatune.cli.audit:audit_cmd", "Show where running processes (and job ranks) really are, and the fix."),
    "launch": ("numatune.cli.launch:launch_cmd", "Run a command bound to its GPU's NUMA node (CPUs and memory)."),
    "irq": ("numatune.cli.irq:irq_group", "Show, plan, apply and restore device interrupt affinity."),
    "check": ("numatune.cli.check:check_cmd", "Run every finding rule and a policy file; exit 1 on findings."),
    "diff": ("numatune.cli.diff:diff_cmd", "Compare two roots, snapshots or JSON reports."),
    "fleet": ("numatune.cli.fleet:fleet_cmd", "Group many nodes' reports by topology and list the outliers."),
    "snapshot": ("numatune.cli.snapshot:snapshot_cmd", "Save what numatune reads into an archive that --root reads."),
    "emit": ("numatune.cli.emit:emit_group", "Write Slurm, kubelet and node-feature-discovery configuration."),
    "plan-memory": ("numatune.cli.plan_memory:plan_memory_cmd",
                    "Plan which training buffers go to local DRAM and which to CXL (latency-first)."),
    "probe": ("numatune.cli.probe:probe_cmd", "Measure latency and bandwidth, every CPU node × memory node."),
    "compare": ("numatune.cli.compare:compare_cmd", "Run a command under each memory placement; compare."),
    "completion": ("numatune.cli.completion:completion_cmd", "Print the bash, zsh or fish completion script."),
}


_HERE = os.path.dirname(os.path.abspath(__file__))


def _available(name: str) -> bool:
    """A command exists once its module does (checked on disk: importlib.util costs more than this)."""
    module = COMMANDS[name][0].split(":")[0].rsplit(".", 1)[-1]
    return os.path.exists(os.path.join(_HERE, f"{module}.py"))


def _files(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """--root completes file and directory names (the shell's own completion)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def _late_global(ctx: click.Context, param: click.Parameter, value: object) -> None:
    """A global option given after the command (`numatune check --root F`): the same as given before it
    (the later one wins where both are given, as for any repeated option)."""
    app = ctx.find_object(App)
    if app is None or value is None or value is False:
        return
    if param.name == "late_root":
        app.root, app.root_named, app.root_origin = str(value), True, None
    elif param.name == "late_no_color":
        app.color = False
    else:
        app.debug = True


def _global_options() -> list[click.Option]:
    """--root, --no-color and --debug for a command: main's own, read off its parameters (one definition)."""
    return [click.Option([*p.opts, f"late_{p.name}"], is_flag=p.is_flag or None, metavar=p.metavar, expose_value=False,
                         callback=_late_global, shell_complete=_files if p.name == "root" else None,
                         help=f"{p.help} (A global option: before or after the command.)")
            for p in main.params if isinstance(p, click.Option) and p.name in GLOBAL]


GLOBAL = ("root", "no_color", "debug")


def accept_global_options(command: click.Command) -> click.Command:
    """Let `command` (and a group's subcommands) take the global options after its name too."""
    if not any(p.name == "late_root" for p in command.params):
        command.params.extend(_global_options())
    for sub in getattr(command, "commands", {}).values():
        accept_global_options(sub)
    return command


class NumatuneGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _available(name)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not _available(cmd_name):
            return None
        module_name, attr = COMMANDS[cmd_name][0].split(":")
        return accept_global_options(getattr(importlib.import_module(module_name), attr))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def make_context(self, info_name, args, parent=None, **extra):  # noqa: ANN001, ANN003, ANN201 - click's
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # a global option: one line, as a command's
            usage_line(exc)
        except KeyboardInterrupt as exc:  # click would say "Aborted!" and exit 1
            from numatune.render.printable import say_failure

            raise click.exceptions.Exit(say_failure(exc)) from None

    def invoke(self, ctx: click.Context):  # noqa: ANN201 - click's signature
        """The error boundary: a NumatuneError, an interrupt (130), an output that cannot be written (a full
        disk: 3; a broken pipe ends quietly, 0) are one line and their exit code; anything else is a bug (70).
        What was printed is flushed here, inside it: a failed last flush at exit would be exit 120."""
        try:
            try:
                result = super().invoke(ctx)
            except click.exceptions.Exit:
                sys.stdout.flush()
                raise
            sys.stdout.flush()
            return result
        except click.UsageError as exc:
            usage_line(exc)
        except (click.exceptions.Exit, click.Abort, click.ClickException):
            raise
        except BrokenPipeError as exc:
            from numatune.system.outfile import drop_stdout

            drop_stdout(exc)
            sys.stderr.close()
            raise click.exceptions.Exit(0) from None
        except (Exception, KeyboardInterrupt) as exc:
            app = ctx.obj
            if describe_failure(exc)[2] == ExitCode.INTERNAL and isinstance(app, App) and app.debug:
                raise
            from numatune.render.printable import say_failure
            from numatune.system.outfile import drop_stdout

            drop_stdout(exc)
            raise click.exceptions.Exit(say_failure(exc)) from None


_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())


def usage_line(exc: click.UsageError) -> None:
    """click's usage error (a bad option, value or argument) as every numatune error: one line, a hint line,
    exit 2 (click prints a usage block, a blank line and the error)."""
    if isinstance(exc, _NO_ARGS):  # `numatune` alone: click's help, as before
        raise exc
    from numatune.render.printable import echo

    where = exc.ctx.command_path if exc.ctx is not None else "numatune"
    echo(f"numatune: error: {' '.join(exc.format_message().split())}\nhint: see {where} --help\n", err=True)
    raise click.exceptions.Exit(exc.exit_code) from None


@click.group(cls=NumatuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="numatune", message="%(prog)s %(version)s")
@click.option(
    "--root",
    envvar="NUMATUNE_ROOT",
    shell_complete=_files,
    metavar="DIR|ARCHIVE",
    default="/",
    show_default=True,
    help="Read this saved tree or snapshot archive instead of the live node (env NUMATUNE_ROOT).",
)
@click.option("--no-color", is_flag=True, help="Plain text output (also honoured: NO_COLOR).")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.pass_context
def main(ctx: click.Context, root: str, no_color: bool, debug: bool) -> None:
    """numatune: NUMA, GPU, NIC, CXL and IRQ placement for AI training servers.

    Exit codes: 0 ok; 1 findings (check) or differences (diff); 2 usage; 3 bad input;
    4 permission denied; 5 partially applied; 6 no such process; 7 unsupported; 70 internal error;
    126/127 launch: the command cannot be executed / is not found.
    """
    source = ctx.get_parameter_source("root")
    named = source is not click.core.ParameterSource.DEFAULT
    origin = "NUMATUNE_ROOT" if source is click.core.ParameterSource.ENVIRONMENT else None
    ctx.obj = App(root=root, color=not no_color, debug=debug, root_named=named, root_origin=origin)
