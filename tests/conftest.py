"""Shared test helpers: fixture roots and a CLI runner that never swallows exceptions."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import click
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


@functools.cache
def tool_path() -> str:
    """A PATH prefix on which `numatune` runs this checkout and `torchrun` this Python's torch (for a shell line,
    or `torchrun --no-python numatune`): the environment's own scripts, beside its python where pip installs
    them; for one missing there (pytest run by a python whose environment has no such script, or the checkout
    not installed into it) a wrapper of `python -m numatune` or `python -m torch.distributed.run` in a
    directory of this user's, kept between runs as the fixture cache is."""
    beside = os.path.dirname(sys.executable)
    missing = [(name, module) for name, module in (("numatune", "numatune"), ("torchrun", "torch.distributed.run"))
               if not os.access(os.path.join(beside, name), os.X_OK)
               and importlib.util.find_spec(module.split(".")[0]) is not None]
    if not missing:
        return beside
    key = hashlib.sha256(f"{sys.executable}\0{PROJECT}".encode()).hexdigest()[:12]
    where = Path(tempfile.gettempdir()) / f"numatune-tools-{os.getuid()}-{key}"
    where.mkdir(mode=0o700, exist_ok=True)
    if where.lstat().st_uid != os.getuid() or where.is_symlink():
        where = Path(tempfile.mkdtemp(prefix="numatune-tools-"))
    for name, module in missing:
        path = f"PYTHONPATH={shlex.quote(str(PROJECT))}${{PYTHONPATH:+:$PYTHONPATH}} " if name == "numatune" else ""
        script = where / f".{name}.{os.getpid()}"
        script.write_text(f'#!/bin/sh\n{path}exec {shlex.quote(sys.executable)} -m {module} "$@"\n')
        script.chmod(0o755)
        script.replace(where / name)  # whole, for a parallel worker running it
    return f"{where}{os.pathsep}{beside}"


def unprivileged() -> list[str]:
    """The prefix that runs a command without the power to read or write where its user may not: nothing for a
    user; for root (CI runs as root, and root passes any mode bits), setpriv dropping every capability, so the
    kernel checks the mode bits for uid 0 as for anyone. (Not another uid: that user may not read a checkout
    in a 0700 directory, as a clone in a mktemp directory is, and then cannot import numatune at all.)"""
    import shutil
    import subprocess

    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): no unprivileged run is possible here")
    drop = [setpriv, "--inh-caps=-all", "--bounding-set=-all"]
    probe = subprocess.run([*drop, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"running as root and setpriv cannot drop capabilities here: {probe.stderr.strip()}")
    return drop


def imports_of(code: str, names: tuple[str, ...], *, to: str = "stdout") -> str:
    """Python source that runs `code`, then writes (to stdout or stderr) the sorted list of the modules of
    `names` (a name, or a package and its submodules) that `code` imported: those the interpreter had
    imported before it ran (site, and the `.pth` files of a virtual environment, which import typing or re
    in many) are its start-up's, not the code's. A laziness test asserts the list is `[]`."""
    return ("import sys as _sys\n_started = set(_sys.modules)\n" + code.rstrip("\n") + "\n"
            f"_sys.{to}.write(repr(sorted(m for m in _sys.modules if m not in _started and "
            f"(m in {names!r} or m.split('.')[0] in {names!r}))) + '\\n')\n")


def pytest_make_parametrize_id(config, val, argname):  # noqa: ANN001, ANN201 - pytest's hook
    """A long string parameter (a generated document) is named by its argument and length, never by its text:
    pytest before 9.2 made the whole text the test's id, which goes into PYTEST_CURRENT_TEST and so into every
    child's environment (a 4 MiB YAML document there: exec fails with E2BIG, "Argument list too long")."""
    if isinstance(val, (str, bytes)) and len(val) > 100:
        return f"{argname}-{len(val)}-chars"
    return None


#: Fixture archives that hold nothing numatune reads of a machine (kept for a reader's own test): every
#: command refuses them (exit 3, "not a machine"; tests/readers/test_topology.py), so they are no machine.
NOT_MACHINES = {"pcp-1152cpu-x86_64": "only proc/interrupts.bz2 (tests/readers/test_irqs.py decompresses it)"}


def tree_fixtures() -> list[str]:
    """Every fixture machine: each `fixtures/NAME.tar.gz` (adding one needs no code) but NOT_MACHINES."""
    return [name for name in fixture_names() if name not in NOT_MACHINES]


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


def child_cpuset(cpus: str):  # noqa: ANN201 - a context manager
    """A child cgroup whose cpuset holds `cpus` (cgroup v1's cpuset hierarchy, or v2 where the root already
    delegates the cpuset controller); yields a preexec_fn that moves the child process into it, and removes the
    cgroup after. pytest.skip, saying why, where no cpuset can be made here (not root, read-only, no controller)."""
    import contextlib

    @contextlib.contextmanager
    def made():
        v1, v2 = Path("/sys/fs/cgroup/cpuset"), Path("/sys/fs/cgroup")
        if (v1 / "cpuset.cpus").exists():
            base, procs, mems = v1, "tasks", "cpuset.mems"
        elif "cpuset" in ((v2 / "cgroup.subtree_control").read_text() if (v2 / "cgroup.subtree_control").exists()
                          else ""):
            base, procs, mems = v2, "cgroup.procs", "cpuset.mems"
        else:
            pytest.skip("no cpuset controller to make a child cgroup in (neither cgroup v1's cpuset hierarchy nor a "
                        "v2 root that delegates cpuset)")
        where = base / f"numatune-test-{os.getpid()}"
        try:
            where.mkdir()
            (where / "cpuset.cpus").write_text(cpus)
            (where / mems).write_text((base / ("cpuset.mems.effective" if procs == "cgroup.procs" else mems))
                                      .read_text().strip() or "0")
        except OSError as exc:
            with contextlib.suppress(OSError):
                where.rmdir()
            pytest.skip(f"cannot make a child cpuset cgroup under {base}: {exc.strerror} (needs root and a writable "
                        "cgroup hierarchy)")
        tasks = str(where / procs)

        def enter() -> None:
            with open(tasks, "w") as f:
                f.write(str(os.getpid()))

        try:
            yield enter
        finally:
            for _ in range(50):
                try:
                    where.rmdir()
                    break
                except OSError:
                    import time

                    time.sleep(0.1)

    return made()


def click_commands() -> dict[str, click.Command]:
    """Every command path of the CLI ("irq plan") -> its click command: the groups and their subcommands, so a
    test over every command or option cannot miss a new one."""
    import click

    out = {}
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        out[name] = cmd
        for sub, subcmd in getattr(cmd, "commands", {}).items():
            out[f"{name} {sub}"] = subcmd
    return out
