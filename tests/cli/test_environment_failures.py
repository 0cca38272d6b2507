"""No exit 70 from the environment (issue 43): an output this user may not write is exit 4, a full one (standard
output on /dev/full, an -o under /dev) exit 3, a closed pipe ends quietly (0), and Ctrl-C is exit 130 with no
archive left that claims to be whole. Every command, each as a process, as a user runs it."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time

import pytest

from numatune.errors import describe_failure
from tests.conftest import PROJECT, fixture_copy, fixture_root, unprivileged

ROOT = "vm-two-socket"
ENV = {**os.environ, "PYTHONPATH": str(PROJECT), "NUMATUNE_PCI_IDS": "", "NO_COLOR": "1"}
ENV.pop("NUMATUNE_ROOT", None)

#: every command that writes a file it is given: name -> the arguments after --root, {out} the file
WRITERS = {
    "inspect -o": ["inspect", "-o", "{out}"],
    "inspect -f json -o": ["inspect", "-f", "json", "-o", "{out}"],
    "fleet -o": ["fleet", "{report}", "-o", "{out}"],
    "check -o": ["check", "-o", "{out}"],
    "emit slurm -o": ["emit", "slurm", "-o", "{out}"],
    "emit kubelet -o": ["emit", "kubelet", "-o", "{out}"],
    "emit nfd -o": ["emit", "nfd", "-o", "{out}"],
    "emit dra -o": ["emit", "dra", "-o", "{out}"],
    "irq plan --emit": ["irq", "plan", "--emit", "{out}"],
    "irq apply --save": ["irq", "apply", "--save", "{out}"],
    "launch --emit": ["launch", "--emit", "{out}", "--node", "0"],
    "snapshot -o archive": ["snapshot", "-o", "{out}.tar.gz"],
    "snapshot -o directory": ["snapshot", "-o", "{out}"],
}

#: every command once, writing a report to standard output (live-only ones on the live node, briefly)
PRINTERS = {
    "inspect": ["--root", "{root}", "inspect"],
    "inspect --json": ["--root", "{root}", "inspect", "--json"],
    "inspect -f svg": ["--root", "{root}", "inspect", "-f", "svg"],
    "audit": ["--root", "{root}", "audit", "4242"],
    "audit --json": ["--root", "{root}", "audit", "4242", "--json"],
    "launch --dry-run": ["--root", "{root}", "launch", "--dry-run", "--node", "0", "--", "true"],
    "irq": ["--root", "{root}", "irq"],
    "irq --json": ["--root", "{root}", "irq", "--json"],
    "irq plan": ["--root", "{root}", "irq", "plan"],
    "irq apply --dry-run": ["--root", "{root}", "irq", "apply", "--dry-run"],
    "check": ["--root", "{root}", "check"],
    "check --json": ["--root", "{root}", "check", "--json"],
    "diff": ["diff", "{root}", "{other}"],
    "fleet": ["fleet", "{report}"],
    "snapshot -o -": ["--root", "{root}", "snapshot", "-o", "-"],
    "emit slurm": ["--root", "{root}", "emit", "slurm"],
    "emit nfd": ["--root", "{root}", "emit", "nfd"],
    "plan-memory": ["--root", "{root}", "plan-memory", "--params", "7e9", "--node", "0"],
    "probe": ["probe", "--time-budget", "3", "--size", "16M", "--nodes", "0"],
    "compare": ["compare", "--", "true"],
    "completion": ["completion", "bash"],
}


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    """A root with a process 4242 (for audit), a second root (for diff), a report (for fleet)."""
    from tests.conftest import write_process

    base = tmp_path_factory.mktemp("env")
    root = fixture_copy(ROOT, base / "root")
    write_process(root, 4242, "LOCAL_RANK=0\0")
    report = base / "report.json"
    report.write_text(subprocess.run([sys.executable, "-m", "numatune", "--root", str(root), "inspect", "--json"],
                                     capture_output=True, text=True, check=True, env=ENV).stdout)
    return {"root": str(root), "other": str(fixture_root("vm-cxl")), "report": str(report)}


def _fill(args: list[str], values: dict[str, str]) -> list[str]:
    return [a.format(**values) for a in args]


def _one_line(stderr: str, *words: str) -> None:
    """One error line holding `words` (notes before it, such as compare's, are a command's own), no traceback."""
    errors = [x for x in stderr.splitlines() if x.startswith("numatune: error: ")]
    assert len(errors) == 1 and all(w in errors[0] for w in words), (words, stderr)
    assert "Traceback" not in stderr and "internal error" not in stderr and "Exception" not in stderr, stderr


@pytest.mark.parametrize("mode", [0o000, 0o555], ids=["unsearchable", "read-only"])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_output_this_user_may_not_write_is_exit_4(where, tmp_path, writer, mode):
    """`-o /root/x.txt` as a user ended in "internal error: PermissionError" (a stat of the name in the option).
    A directory this user cannot search (mode 000, as /root is to others) or write (555): one line, exit 4."""
    locked = tmp_path / "locked"
    locked.mkdir()
    out = locked / "out"
    root = fixture_copy(ROOT, tmp_path / "root") if writer == "irq apply --save" else where["root"]
    locked.chmod(mode)
    try:
        done = subprocess.run([*unprivileged(), sys.executable, "-m", "numatune", "--root", str(root),
                               *_fill(WRITERS[writer], {**where, "out": str(out)})],
                              capture_output=True, text=True, env=ENV, timeout=120, cwd=tmp_path)
    finally:
        locked.chmod(0o755)
    assert done.returncode == 4, (done.returncode, done.stderr)
    _one_line(done.stderr, "cannot write", str(out), "Permission denied")
    assert os.listdir(locked) == []


@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_output_on_dev_full_is_exit_3(where, tmp_path, writer):
    """/dev/full (any name under /dev, /proc, /sys) is refused before anything is written: exit 3, one line."""
    out = "/dev/full"
    args = _fill(WRITERS[writer], {**where, "out": out})
    if writer == "irq apply --save":
        args = ["--root", str(fixture_copy(ROOT, tmp_path / "root")), *args]
    else:
        args = ["--root", where["root"], *args]
    done = subprocess.run([sys.executable, "-m", "numatune", *args], capture_output=True, text=True, env=ENV,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 3, (done.returncode, done.stderr)
    # the IRQ state file is never written over anything that exists; a snapshot directory is a directory
    refusal = {"irq apply --save": "already exists", "snapshot -o directory": "is not a directory"}
    _one_line(done.stderr, refusal.get(writer, "cannot write"), "/dev/full")


@pytest.mark.parametrize("command", list(PRINTERS))
def test_standard_output_on_dev_full_is_exit_3(where, tmp_path, command):
    """`inspect > /dev/full` ended in "internal error: OSError: No space left on device": now every command
    says it cannot write standard output, exit 3, and nothing else (no "Exception ignored" at exit)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "numatune", *_fill(PRINTERS[command], where)], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=ENV, timeout=120, cwd=tmp_path)
    assert done.returncode == 3, (done.returncode, done.stderr)
    _one_line(done.stderr, "cannot write standard output: No space left on device")  # not "Exception ignored"


@pytest.mark.parametrize("command", ["inspect", "inspect --json", "inspect -f svg", "irq plan", "snapshot -o -",
                                     "diff", "completion"])
def test_a_reader_that_stops_early_ends_it_quietly(where, command):
    """`numatune inspect | head -c 1`: the pipe closes under numatune, which ends with exit 0 and says nothing."""
    args = _fill(PRINTERS[command], where)
    proc = subprocess.Popen([sys.executable, "-m", "numatune", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    proc.stdout.read(1)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 1), err  # diff: 1, the roots differ
    assert "error" not in err and "Exception" not in err and "Traceback" not in err, err


INTERRUPT = """
import os, signal, sys
from numatune.commands import snapshot as s
phase = sys.argv.pop(1)
def ctrl_c(real):
    def at(*args, **kw):
        if phase != "dry run" or len(calls) == 100:
            os.kill(os.getpid(), signal.SIGINT)  # the real signal, as a terminal sends it
        calls.append(1)
        return real(*args, **kw)
    return at
calls = []
if phase == "dry run":
    s.RecordingHost._rel = ctrl_c(s.RecordingHost._rel)
else:
    name = "write_tar" if phase == "archive" else "write_dir"
    setattr(s.Capture, name, ctrl_c(getattr(s.Capture, name)))
from numatune.entry import run
run()
"""


@pytest.mark.parametrize("phase, name", [("dry run", "node.tar.gz"), ("archive", "node.tar.gz"),
                                         ("directory", "node"), ("directory", "made-empty")])
def test_ctrl_c_during_snapshot_is_exit_130_and_leaves_no_snapshot(tmp_path, phase, name):
    """Interrupted early, `snapshot` exited 0 and wrote an archive whose check said "Abort: (a bug: please report
    it)": click's Abort of the dry run was taken for a bug of one command. Now Ctrl-C stops it, exit 130, and
    nothing is left under the name (nor a temporary file); an empty directory given stays empty."""
    out = tmp_path / name
    if name == "made-empty":
        out.mkdir()
    done = subprocess.run([sys.executable, "-c", INTERRUPT, phase, "--root", str(fixture_root(ROOT)), "snapshot",
                           "-o", str(out)], capture_output=True, text=True, env=ENV, timeout=120, cwd=PROJECT)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.splitlines() == ["numatune: error: interrupted"], done.stderr
    assert sorted(os.listdir(tmp_path)) == (["made-empty"] if name == "made-empty" else [])
    if name == "made-empty":
        assert os.listdir(out) == []


def test_ctrl_c_in_the_bandwidth_probe_ends_its_threads(monkeypatch):
    """probe's copy threads wait at barriers; a Ctrl-C while they waited at one the main thread never reached left
    them there, and the interpreter waited for them for ever at exit (probe ignored Ctrl-C). Here the main thread
    is interrupted between a sample's start and its end: the call raises and every thread has ended."""
    from numatune.measure import bench

    real = threading.Barrier
    made = []

    class Interrupted(real):
        def wait(self, timeout=None):  # noqa: ANN001, ANN202
            if made.index(self) == 2 and threading.current_thread() is threading.main_thread():
                raise KeyboardInterrupt  # the main thread at `done`, the workers copying or there
            return super().wait(timeout)

    def barrier(n):  # noqa: ANN001, ANN202
        made.append(Interrupted(n))
        return made[-1]

    monkeypatch.setattr(bench.threading, "Barrier", barrier)
    before = threading.active_count()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        bench.measure_bandwidth("copy", None, [min(os.sched_getaffinity(0))], 0, 1 << 20, 0.05)
    assert threading.active_count() == before and time.monotonic() - start < 20


@pytest.mark.parametrize("exc, code, words", [
    (OSError(errno.ENOSPC, "No space left on device"), 3, "cannot write standard output: No space left"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), 3, "cannot write standard output: Disk quota exceeded"),
    (PermissionError(errno.EACCES, "Permission denied", "/root/x"), 4, "permission denied (/root/x)"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (OSError(errno.ENOSPC, "No space left on device", "/some/file"), 3, "/some/file: No space left on device"),
    (ValueError("x"), 70, "internal error"),
])
def test_what_the_environment_did_is_never_called_a_bug(exc, code, words):
    message, _hint, got = describe_failure(exc)
    assert got == code and words in message, (message, got)


def test_the_documented_codes_name_these_cases():
    page = (PROJECT / "man" / "numatune.1").read_text()
    exit_status = page.split(".SH EXIT STATUS", 1)[1].split(".SH ", 1)[0]
    assert "standard output" in exit_status and "may not write" in exit_status and "130" in exit_status
