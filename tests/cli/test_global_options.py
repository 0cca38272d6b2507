"""Global options (--root, --no-color, --debug) before or after the command: `numatune check --root F` is
`numatune --root F check`; what follows launch's command is the command's own."""

from __future__ import annotations

import json
import os

import click
import pytest

from numatune.cli import COMMANDS, accept_global_options, main
from numatune.cli._app import App
from tests.conftest import fixture_root


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(main)
    out = []
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        out.append((name, command))
        out += [(f"{name} {sub}", c) for sub, c in getattr(command, "commands", {}).items()]
    return out


@pytest.mark.parametrize("name, command", _commands(), ids=[n for n, _ in _commands()])
def test_every_command_takes_the_global_options_after_its_name(name, command):
    late = {opt for p in command.params if p.name.startswith("late_") for opt in p.opts}
    assert late == {"--root", "--no-color", "--debug"}, name
    helped = command.get_help(click.Context(command, info_name=name))
    assert "--root DIR|ARCHIVE" in helped and "before or after the command" in helped


def test_after_the_command_sets_what_before_it_sets():
    @click.command()
    @click.pass_obj
    def show(app: App) -> None:
        click.echo(f"{app.root} {app.color} {app.debug} {app.root_named}")

    accept_global_options(show)
    accept_global_options(show)  # once is enough: loading a command twice adds nothing
    assert [p.name for p in show.params].count("late_root") == 1
    runner = click.testing.CliRunner()
    assert runner.invoke(show, [], obj=App()).stdout == "/ True False False\n"
    done = runner.invoke(show, ["--root", "R", "--no-color", "--debug"], obj=App(root="A"))
    assert done.stdout == "R False True True\n"
    assert runner.invoke(show, ["--root"], obj=App()).exit_code == 2  # a value is needed, as before the command


def test_check_with_root_after_the_command_reads_that_root(cli):
    root = str(fixture_root("vm-cxl", archive=True))
    late, early = cli("check", "--json", "--root", root), cli("--root", root, "check", "--json")
    assert late.exit_code == early.exit_code and json.loads(late.stdout) == json.loads(early.stdout)
    assert json.loads(late.stdout)["source"] == root
    # the later --root wins, as any option given twice
    assert json.loads(cli("--root", "/nonexistent", "inspect", "--json", "--root", root).stdout)["source"] == root


def test_launch_keeps_what_follows_the_command_for_the_command(cli):
    root = str(fixture_root("vm-cxl"))
    r = cli("--root", root, "launch", "--dry-run", "--json", "--node", "0", "--", "prog", "--debug", "--root", "x")
    argv = json.loads(r.stdout)["argv"]
    assert argv[argv.index("prog"):] == ["prog", "--debug", "--root", "x"]
    # before `--`, launch's own --root: a live-only command refuses a saved root wherever it is given
    assert cli("launch", "--root", root, "--", "true").exit_code == 2


def test_a_fixture_name_without_its_suffix_gets_a_hint(cli):
    """`--root fixtures/NAME` (the README's names without .tar.gz) said only "does not exist"."""
    from tests.conftest import PROJECT

    r = cli("--root", str(PROJECT / "fixtures" / "vm-cxl"), "inspect")
    assert r.exit_code == 3 and f"hint: the saved machine is an archive: --root {PROJECT}/fixtures/vm-cxl.tar.gz" \
        in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["inspect"], ["inspect", "--json"], ["emit", "slurm"]], ids=lambda a: " ".join(a))
def test_a_root_from_numatune_root_says_so(cli, tmp_path, args):
    """An error about the root says the value came from NUMATUNE_ROOT when it did (the user typed no --root);
    through click and the click-free fast path alike."""
    import subprocess
    import sys

    from tests.conftest import PROJECT

    missing = str(tmp_path / "gone")
    r = cli(*args, env={"NUMATUNE_ROOT": missing})
    assert r.exit_code == 3 and f"(the root is NUMATUNE_ROOT='{missing}')" in r.stderr, r.stderr
    fast = subprocess.run([sys.executable, "-m", "numatune", *args], capture_output=True, text=True, cwd=PROJECT,
                          env={**os.environ, "NUMATUNE_ROOT": missing}, timeout=60, check=False)
    assert fast.returncode == 3 and f"(the root is NUMATUNE_ROOT='{missing}')" in fast.stderr, fast.stderr
    typed = cli("--root", missing, *args, env={"NUMATUNE_ROOT": missing})
    assert typed.exit_code == 3 and "NUMATUNE_ROOT" not in typed.stderr
