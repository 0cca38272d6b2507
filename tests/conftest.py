"""Shared test helpers: fixture roots and a CLI runner that never swallows exceptions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest
from click.testing import CliRunner

from numatune.cli import main
from numatune.system.host import Host
from tests.fixture_archives import FIXTURES, extracted, fixture_archive, fixture_names, unpack  # noqa: F401

PROJECT = Path(__file__).resolve().parent.parent


def in_ci() -> bool:
    """CI=true (what CI services set): the real engines must have run."""
    return os.environ.get("CI", "").strip().lower() == "true"


def engine_missing(reason: str) -> NoReturn:
    """A real engine a test drives (slurmctld, slurmd, munge, prometheus, promtool, node_exporter) is not installed
    or could not start: under CI=true the test fails, so a green CI proves the engines ran; elsewhere it skips,
    saying why."""
    if in_ci():
        pytest.fail(f"CI=true and the engine did not run: {reason}", pytrace=False)
    pytest.skip(reason)


def tree_fixtures() -> list[str]:
    """Every fixture machine: each `fixtures/NAME.tar.gz` (adding one needs no code)."""
    return fixture_names()


def fixture_root(name: str, *, archive: bool = False) -> Path:
    """The fixture as a root directory (extracted once per archive content, cached), or its snapshot archive.

    Tests must not write under the directory: take a `fixture_copy` for that.
    """
    return fixture_archive(name) if archive else extracted(name)


def fixture_copy(name: str, dest: Path) -> Path:
    """A private writable copy of the fixture under `dest` (a test's tmp_path), for `irq apply` and edits."""
    return unpack(fixture_archive(name), Path(dest))


def write_process(root: Path, pid: int, environ: str, numa_maps: str = "") -> Path:
    """A hand-made process in a tree's /proc (one thread on CPU 0, `python train.py`, the given
    NUL-separated environment): what `audit PID` reads of a saved process."""
    proc = root / "proc" / str(pid)
    (proc / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
    stat = f"{pid} (python) S 1 " + " ".join(["0"] * 33) + " 0 " + " ".join(["0"] * 10)
    status = "Name:\tpython\nPPid:\t1\nCpus_allowed_list:\t0-23\nMems_allowed_list:\t0-1\n"
    for where in (proc, proc / "task" / str(pid)):
        (where / "stat").write_text(stat + "\n")  # field 39 = CPU 0
        (where / "status").write_text(status)
    (proc / "cmdline").write_text("python\x00train.py\x00")
    (proc / "environ").write_text(environ)
    (proc / "numa_maps").write_text(numa_maps)
    return proc


@pytest.fixture
def host_of():
    return lambda name: Host.open(fixture_root(name))


@pytest.fixture
def cli(monkeypatch):
    """Run numatune in-process; stdout and stderr stay apart (click >= 8.2)."""
    monkeypatch.setenv("NUMATUNE_PCI_IDS", "")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("NUMATUNE_ROOT", raising=False)
    runner = CliRunner()

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None):
        return runner.invoke(main, list(args), input=input, env=env, catch_exceptions=False)

    return run


def pytest_configure(config):
    os.environ.setdefault("NUMATUNE_PCI_IDS", "")  # device names must not depend on the machine's pci.ids


GOLDEN = PROJECT / "tests" / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/ from the current output")


@pytest.fixture
def golden(request):
    """Compare text with tests/golden/<name>; `pytest --update-golden` rewrites it (review the diff)."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if request.config.getoption("--update-golden"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.exists(), f"no golden file {path}; run pytest --update-golden"
        assert text == path.read_text(), f"output differs from {path}"

    return check
