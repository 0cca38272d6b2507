"""The project's promises about its documentation: every command has a man page, a README line and a
CHANGELOG entry; the man pages render; the README reads in one screen."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

import pytest

from numatune.cli import COMMANDS
from tests.conftest import PROJECT, engine_missing

README = (PROJECT / "README.md").read_text()
CHANGELOG = " ".join((PROJECT / "CHANGELOG.md").read_text().split())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_is_documented(command):
    assert (PROJECT / "man" / f"numatune-{command}.1").is_file()
    # the README names every command in a task or a line of its own; the reference is docs/commands.md and man
    assert re.search(rf"numatune (--root \S+ )?{command}\b", README), f"README never names {command}"
    assert f"`numatune {command}" in CHANGELOG or f"`{command}`" in CHANGELOG


MAN_ENV = {"MANWIDTH": "100", "PATH": "/usr/bin:/bin"}


@functools.cache
def _man_problem() -> str | None:
    """Why `man` cannot render a page here (None: it can): not installed, or a stand-in that prints a notice
    instead (a minimized Ubuntu image's /usr/bin/man: "This system has been minimized ...", exit 0)."""
    man = shutil.which("man", path=MAN_ENV["PATH"])
    if man is None:
        return "man is not installed (Debian: man-db)"
    done = subprocess.run([man, "-l", str(PROJECT / "man" / "numatune.1")], capture_output=True, text=True,
                          env=MAN_ENV, timeout=120)
    if done.returncode != 0 or "NAME" not in done.stdout or "SYNOPSIS" not in done.stdout:
        said = (done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}").splitlines()[0]
        return f"{man} renders no page here (it says: {said})"
    return None


@pytest.mark.parametrize("page", sorted(p.name for p in (PROJECT / "man").glob("*.[17]")))
def test_man_pages_render_without_warnings(page):
    if _man_problem():
        engine_missing(_man_problem())  # under CI=true, where scripts/test.sh installs man-db: a failure
    done = subprocess.run(["man", "--warnings", "-l", str(PROJECT / "man" / page)], capture_output=True, text=True,
                          env=MAN_ENV)
    assert done.returncode == 0
    assert done.stderr == "", done.stderr
    assert "NAME" in done.stdout and "EXIT STATUS" in done.stdout


def test_changelog_has_unreleased_section():
    assert "## [Unreleased]" in (PROJECT / "CHANGELOG.md").read_text()


def test_exit_codes_documented_once_and_match_the_enum():
    from numatune.errors import ExitCode

    page = (PROJECT / "man" / "numatune.1").read_text()
    for code in ExitCode:
        assert f".B {int(code)}\n" in page, code
        assert f"| {int(code)} |" in README, code


def test_every_json_schema_is_documented():
    from numatune.render.envelope import SCHEMAS

    page = (PROJECT / "docs" / "json-schemas.md").read_text()
    headings = set(re.findall(r"^## `?(numatune\.[\w-]+/\d+)`?", page, re.M))
    assert headings == set(SCHEMAS.values())


def test_readme_names_the_whole_suite_and_the_quick_loop():
    """The README's test command runs everything (VM stage too); `pytest -m "not vm"` is the quick loop."""
    assert "bash scripts/test.sh" in README and 'pytest -m "not vm"' in README
    script = (PROJECT / "scripts" / "test.sh").read_text()
    # with no arguments the two halves side by side (the VM stage and the quick loop), each failing the run;
    # with arguments pytest ARGS alone, no marker filter
    assert '-m pytest -p no:cacheprovider -m vm tests/vm' in script and '[ "$vm_status" = 0 ] || fail VM' in script
    assert '.venv/bin/python -m pytest -m "not vm" || fail' in script
    assert '.venv/bin/python -m pytest "$@" || fail pytest $?' in script
    # and in CI the quick loop again under a second CPython (Python 3.13), and the Slurm 24.11 chroot that
    # tests/cluster drives, whose failures fail the run
    assert 'bash scripts/py313.sh -m "not vm"' in script and "py313=${NUMATUNE_PY313:-$ci}" in script
    assert "bash scripts/slurm-chroot.sh" in script and "slurm=${NUMATUNE_SLURM:-$ci}" in script
    assert 'exit "$status"' in script
    assert "bash scripts/test.sh" in (PROJECT / ".ci" / "run").read_text()
    # every VM test module that boots (through the vm_session fixture) is marked, so the quick loop
    # really leaves the VM stage out; the harness's own tests (a stand-in guest) stay in the quick loop
    for path in (PROJECT / "tests" / "vm").glob("test_*.py"):
        text = path.read_text()
        assert ("vm_session" not in text) or "pytestmark = pytest.mark.vm" in text, path
    # and nothing outside tests/vm is marked vm, so `-m vm tests/vm` and `-m "not vm"` together are the suite
    for path in (PROJECT / "tests").rglob("test_*.py"):
        if "vm" not in path.relative_to(PROJECT / "tests").parts[:1] and path.name != "test_docs.py":
            assert "mark.vm" not in path.read_text(), path


def test_the_readme_reads_in_one_screen():
    """Issue 43: at most 400 lines, none over 100 columns, and numatune starts within 15 lines of the title."""
    lines = README.split("\n")
    assert len(lines) <= 400, len(lines)
    assert max(len(line) for line in lines) <= 100
    first = "\n".join(lines[1:16])
    assert "numatune inspect" in first and "pip install" in first


def test_every_docs_page_is_in_the_readmes_map():
    pages = {p.name for p in (PROJECT / "docs").glob("*.md")}
    assert pages and all(f"(docs/{name})" in README for name in pages), pages


def test_the_readme_says_what_it_is_how_to_install_and_where_to_look():
    """Issue 47: a one-line description under the title, an Install heading (git clone, pipx and uv from the
    checkout), the CHANGELOG and the licence, the related tools, and a named inner test loop."""
    lines = README.split("\n")
    assert lines[0] == "# numatune" and lines[1] == "" and lines[2] and not lines[3], lines[:4]
    assert "## Install" in README and "git clone" in README
    assert "pipx install ." in README and "uv tool install ." in README
    assert "[CHANGELOG.md](CHANGELOG.md)" in README and "[LICENSE](LICENSE)" in README
    for tool in ("numactl", "lstopo", "nvidia-smi topo", "numastat"):
        assert f"`{tool}" in README, tool
    assert "The inner loop" in README and "python -m pytest tests/" in README


def test_the_licence_is_the_one_pyproject_names():
    assert 'license = {text = "MIT"}' in (PROJECT / "pyproject.toml").read_text()
    text = (PROJECT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) numatune contributors" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\"" in text
