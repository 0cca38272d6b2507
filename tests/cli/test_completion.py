"""`numatune completion bash|zsh|fish`: click's completion script, which a shell sources and then completes with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import PROJECT


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o nosort -F _numatune_completion numatune"),
                                           ("zsh", "#compdef numatune"),
                                           ("fish", "complete --no-files --command numatune")])
def test_prints_the_script(cli, shell, marker):
    r = cli("completion", shell)
    assert r.exit_code == 0 and marker in r.stdout and "_NUMATUNE_COMPLETE" in r.stdout


def test_an_unknown_shell_is_a_usage_error(cli):
    assert cli("completion", "csh").exit_code == 2


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_sources_it_and_completes_a_command(tmp_path):
    """The script sourced in bash completes `numatune ins` to `inspect` and `numatune irq p` to `plan`."""
    exe = tmp_path / "numatune"  # `numatune` on PATH, running this checkout
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} -m numatune \"$@\"\n")
    exe.chmod(0o755)
    script = """
        eval "$(numatune completion bash)"
        COMP_WORDS=(numatune ins); COMP_CWORD=1; _numatune_completion numatune ins numatune
        echo "1:${COMPREPLY[*]}"
        COMPREPLY=(); COMP_WORDS=(numatune irq p); COMP_CWORD=2; _numatune_completion numatune p irq
        echo "2:${COMPREPLY[*]}"
    """
    env = {"PATH": f"{tmp_path}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PYTHONPATH": str(PROJECT)}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, cwd=PROJECT)
    assert done.returncode == 0, done.stderr
    assert "1:inspect" in done.stdout.splitlines() and "2:plan" in done.stdout.splitlines(), done.stdout
