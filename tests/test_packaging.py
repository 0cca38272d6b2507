"""`pip install .` installs the man pages where man-db finds them: the wheel's data directory holds
share/man/man1 and man7 (flit's external data: the venv's prefix, .venv/share/man, beside .venv/bin on
PATH), every page of man/ (the one source: data/share/man/ holds links to it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import PROJECT

PAGES = sorted(p.name for p in (PROJECT / "man").glob("numatune*.[17]"))


def test_every_page_is_linked_into_the_installed_tree():
    linked = {}
    for section in ("man1", "man7"):
        for p in (PROJECT / "data" / "share" / "man" / section).iterdir():
            assert p.is_symlink() and p.resolve() == (PROJECT / "man" / p.name).resolve(), p
            assert p.name.endswith("." + section[-1]), p
            linked[p.name] = p
    assert sorted(linked) == PAGES
    assert {"numatune.1", "numatune-codes.7", "numatune-completion.1"} <= set(PAGES)


def test_every_command_has_its_page():
    from numatune.cli import COMMANDS

    assert {f"numatune-{c}.1" for c in COMMANDS} | {"numatune.1", "numatune-codes.7"} == set(PAGES)


@pytest.mark.skipif(os.environ.get("NUMATUNE_SKIP_WHEEL") == "1", reason="NUMATUNE_SKIP_WHEEL=1")
def test_the_wheel_carries_the_man_pages(tmp_path):
    """Built as pip builds it for `pip install .` (flit_core from pip's cache or index; skipped when neither
    is reachable)."""
    work = tmp_path / "src"
    shutil.copytree(PROJECT, work, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "fixtures", "tests", "benchmarks", "__pycache__", ".pytest_cache", ".ruff_cache"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "w"),
                           str(work)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and ("flit_core" in done.stderr or "Could not find" in done.stderr
                                 or "connection" in done.stderr.lower()):
        pytest.skip(f"cannot build a wheel here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "w").glob("numatune-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    data = sorted(n.split("/data/share/man/", 1)[1] for n in names if ".data/data/share/man/" in n)
    assert data == sorted(f"man{p[-1]}/{p}" for p in PAGES)
    with zipfile.ZipFile(wheel) as z:
        page = z.read(next(n for n in names if n.endswith("/man1/numatune.1"))).decode()
    assert page == (PROJECT / "man" / "numatune.1").read_text()  # the page itself, not a link


def test_the_dependency_names_errors_knows_are_pyprojects():
    """numatune.errors.DEPENDENCIES names, for a dependency a Python lacks, what pip installs: it is pyproject's
    list (the distributions, markers aside), each with the module it is imported as."""
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    from numatune.errors import DEPENDENCIES

    declared = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower() for d in declared}
    assert set(DEPENDENCIES.values()) == names


def test_a_python_without_numatunes_dependencies_says_so_in_one_line(tmp_path):
    """numatune run by a python it was not installed into (the checkout on PYTHONPATH, rich missing) said
    "internal error: ModuleNotFoundError ... a bug in numatune": it names the package and the python, exit 7."""
    blocker = tmp_path / "rich.py"
    blocker.write_text("raise ModuleNotFoundError(\"No module named 'rich'\", name='rich')\n")
    root = PROJECT / "fixtures" / "handmade-dgx-h100-ids.tar.gz"
    done = subprocess.run([sys.executable, "-m", "numatune", "--root", str(root), "irq"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{PROJECT}"},
                          cwd=PROJECT, timeout=60)
    assert done.returncode == 7, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == (f"numatune: error: the Python package rich (module rich), one of numatune's dependencies, "
                        f"is not installed for {sys.executable}"), done.stderr
    assert lines[1].startswith("hint: install numatune into this Python") and "Traceback" not in done.stderr
