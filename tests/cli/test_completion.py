"""`numatune completion bash|zsh|fish`: click's completion script, which a shell sources and then completes with."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import PROJECT, tool_path


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o nosort -F _numatune_completion numatune"),
                                           ("zsh", "#compdef numatune"),
                                           ("fish", "complete --no-files --command numatune")])
def test_prints_the_script(cli, shell, marker):
    r = cli("completion", shell)
    assert r.exit_code == 0 and marker in r.stdout and "_NUMATUNE_COMPLETE" in r.stdout


def test_an_unknown_shell_is_a_usage_error(cli):
    assert cli("completion", "csh").exit_code == 2


def _bash(script: str, tmp_path) -> list[str]:  # noqa: ANN001
    """What `script` prints, run by bash after sourcing the completion script, with `numatune` on PATH running this
    checkout."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    env = {"PATH": f"{tool_path()}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PYTHONPATH": str(PROJECT)}
    done = subprocess.run(["bash", "-c", 'eval "$(numatune completion bash)"\n' + script], env=env,
                          capture_output=True, text=True, timeout=120, cwd=PROJECT)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_bash_sources_it_and_completes_a_command(tmp_path):
    """The script sourced in bash completes `numatune ins` to `inspect` and `numatune irq p` to `plan`."""
    out = _bash("""
        COMP_WORDS=(numatune ins); COMP_CWORD=1; _numatune_completion numatune ins numatune
        echo "1:${COMPREPLY[*]}"
        COMPREPLY=(); COMP_WORDS=(numatune irq p); COMP_CWORD=2; _numatune_completion numatune p irq
        echo "2:${COMPREPLY[*]}"
    """, tmp_path)
    assert "1:inspect" in out and "2:plan" in out, out


def test_bash_completes_the_global_options_after_the_command(tmp_path):
    """`numatune check --ro` completes `--root` (global options go after the command too), before the command
    commands still complete, and --root's value is a file name, which bash completes itself."""
    out = _bash("""
        COMP_WORDS=(numatune check --ro); COMP_CWORD=2; _numatune_completion numatune --ro check
        echo "1:${COMPREPLY[*]}"
        COMPREPLY=(); COMP_WORDS=(numatune --root x ins); COMP_CWORD=3; _numatune_completion numatune ins x
        echo "2:${COMPREPLY[*]}"
        _NUMATUNE_COMPLETE=bash_complete COMP_WORDS="numatune inspect --root fix" COMP_CWORD=3 numatune
        _NUMATUNE_COMPLETE=bash_complete COMP_WORDS="numatune --root fix" COMP_CWORD=2 numatune
    """, tmp_path)
    assert out == ["1:--root", "2:inspect", "file,fix", "file,fix"], out
