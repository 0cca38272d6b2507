"""The one writer of output files (`-o`, `--emit`, `--save`, `snapshot -o`), tried as a careless user and
an attacker would: a missing directory or a kernel filesystem is exit 3 with one line, a link at the
name is replaced and never written through, nothing half-written or temporary is left behind."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import click
import pytest

from numatune.cli._options import SUFFIXES, format_choices
from numatune.commands.snapshot import Capture
from numatune.system.host import Host
from tests.conftest import fixture_copy, fixture_root

ROOT = "dev-1node-x86"
WRITERS = {  # name -> the arguments after --root ROOT, with {out} the output file
    "inspect -o": ["inspect", "--json", "-o", "{out}"],
    "check -o": ["check", "-f", "text", "-o", "{out}"],  # a format given: x.out names none (exit 2 without)
    "emit -o": ["emit", "slurm", "-f", "text", "-o", "{out}"],
    "irq plan --emit": ["irq", "plan", "--emit", "{out}"],
    "launch --emit": ["launch", "--emit", "{out}", "--node", "0"],
    "snapshot -o": ["snapshot", "-o", "{out}"],
}


def _run(cli, root, args, out):
    return cli("--root", str(root), *[a.replace("{out}", str(out)) for a in args])


def _one_line_exit_3(r, what: str) -> None:
    assert r.exit_code == 3, (r.exit_code, r.stderr)
    lines = r.stderr.splitlines()
    assert lines[0].startswith("numatune: error: ") and what in lines[0], r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert len([ln for ln in lines if not ln.startswith("hint: ")]) == 1, r.stderr


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_missing_directory_is_exit_3(cli, tmp_path, writer):
    out = tmp_path / "nonexistent" / ("x.tar.gz" if writer == "snapshot -o" else "x.out")
    _one_line_exit_3(_run(cli, fixture_root(ROOT), WRITERS[writer], out), str(out))
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_kernel_filesystem_is_exit_3_and_never_opened(cli, writer):
    """/proc/sys/vm/drop_caches exists, is write-only and would act if written: refused by where it is,
    not by click's `readable` check (exit 2) or by the kernel."""
    out = "/proc/sys/vm/drop_caches.tar.gz" if writer == "snapshot -o" else "/proc/sys/vm/drop_caches"
    _one_line_exit_3(_run(cli, fixture_root(ROOT), WRITERS[writer], out), "kernel filesystem")


@pytest.mark.parametrize("writer", [w for w in WRITERS if w != "snapshot -o"] + ["irq apply --save"])
def test_a_link_at_the_name_is_replaced_not_written_through(cli, tmp_path, writer):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    os.symlink(victim, out)
    if writer == "irq apply --save":  # the state file is never written over anything, a link included
        root = fixture_copy(ROOT, tmp_path / "copy")
        r = cli("--root", str(root), "irq", "apply", "--save", str(out))
        assert r.exit_code == 3 and "already exists" in r.stderr and out.is_symlink()
    else:
        r = _run(cli, fixture_root(ROOT), WRITERS[writer], out)
        assert r.exit_code in (0, 1), r.stderr
        assert not out.is_symlink() and out.stat().st_size > 0
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_snapshot_into_a_linked_directory_is_refused(cli, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "dest")
    _one_line_exit_3(cli("--root", str(fixture_root(ROOT)), "snapshot", "-o", str(tmp_path / "dest")), "is a link")
    assert os.listdir(outside) == []


def test_snapshot_directory_writes_follow_no_link_placed_inside(tmp_path):
    """A link swapped in under the destination while it is written (here: placed before) stops the
    write with an error; nothing reaches the link's target."""
    cap = Capture(Host.open(fixture_root(ROOT)))
    cap.dirs.add("/sys/devices")
    cap.files["/sys/devices/x"] = b"data"
    dest, outside = tmp_path / "dest", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    os.symlink(outside, dest / "sys")
    with pytest.raises(OSError):
        cap.write_dir(dest)
    assert os.listdir(outside) == []


def test_snapshot_o_to_a_missing_directory_was_an_internal_error(cli, tmp_path):
    """The case issue 22 found: `snapshot -o /nonexistent/x.tar.gz` ended in exit 70."""
    r = cli("--root", str(fixture_root(ROOT)), "snapshot", "-o", str(tmp_path / "no" / "x.tar.gz"))
    _one_line_exit_3(r, "no/x.tar.gz")


@pytest.mark.parametrize("writer", list(WRITERS))
def test_dev_null_is_written_not_refused(cli, writer):
    """`-o /dev/null` (timing a command, checking it runs) is a stream, not a file on a kernel filesystem."""
    r = _run(cli, fixture_root(ROOT), WRITERS[writer], "/dev/null")
    assert r.exit_code in (0, 1), r.stderr
    assert "error" not in r.stderr


@pytest.mark.parametrize("writer", ["inspect -o", "emit -o", "snapshot -o"])
def test_dash_and_dev_stdout_write_standard_output(cli, tmp_path, writer):
    import io
    import tarfile

    for out in ("-", "/dev/stdout"):
        r = _run(cli, fixture_root(ROOT), WRITERS[writer], out)
        assert r.exit_code in (0, 1), r.stderr
        if writer == "snapshot -o":  # a gzipped archive on standard output: `snapshot -o - | ssh ...`
            with tarfile.open(fileobj=io.BytesIO(r.stdout_bytes), mode="r:gz") as tar:
                assert "snapshot/SNAPSHOT.txt" in tar.getnames()
            assert "numatune: wrote standard output: " in r.stderr and f"wrote {out}" not in r.stderr
            assert (tmp_path / "replay.tar.gz").write_bytes(r.stdout_bytes)
            assert cli("--root", str(tmp_path / "replay.tar.gz"), "inspect", "--json").exit_code == 0
        else:
            expected = _run(cli, fixture_root(ROOT), [a for a in WRITERS[writer] if a not in ("-o", "{out}")], "")
            assert r.stdout == expected.stdout and r.stdout


def test_snapshot_o_an_existing_file_without_an_archive_name_is_exit_3(cli, tmp_path):
    """It was an internal error (NotADirectoryError, exit 70)."""
    existing = tmp_path / "node1.snap"
    existing.write_text("keep\n")
    _one_line_exit_3(cli("--root", str(fixture_root(ROOT)), "snapshot", "-o", str(existing)), "not a directory")
    assert existing.read_text() == "keep\n"


def test_an_archive_is_never_written_to_a_terminal(tmp_path):
    """`snapshot -o -` typed at a terminal: refused before any capture (as tar refuses), nothing written there."""
    import pty
    import subprocess
    import sys

    from tests.conftest import PROJECT

    leader, follower = pty.openpty()
    try:
        argv = [sys.executable, "-m", "numatune", "--root", str(fixture_root(ROOT)), "snapshot", "-o", "-"]
        proc = subprocess.run(argv, stdout=follower, stderr=subprocess.PIPE, cwd=PROJECT, timeout=120, check=False)
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert proc.returncode == 3 and b"refusing to write an archive to a terminal" in proc.stderr
    assert seen == b""


@pytest.mark.parametrize(("args", "named", "given"), [
    (["inspect", "-o", "{out}.svg", "-f", "json"], "svg", "--format json"),
    (["inspect", "-o", "{out}.svg", "--json"], "svg", "--json"),
    (["inspect", "-o", "{out}.json", "-f", "text"], "json", "--format text"),
    (["fleet", "{fleet}", "-o", "{out}.html", "-f", "json"], "html", "--format json"),
])
def test_a_suffix_that_names_another_format_than_format_is_exit_2(cli, tmp_path, args, named, given):
    """`-o out.svg -f json` wrote JSON into the .svg with exit 0: the two say different things, so neither
    wins; nothing is written."""
    report = tmp_path / "a.json"
    report.write_text(cli("--root", str(fixture_root(ROOT)), "inspect", "--json").stdout)
    argv = [a.replace("{out}", str(tmp_path / "out")).replace("{fleet}", str(report)) for a in args]
    r = cli("--root", str(fixture_root(ROOT)), *argv)
    assert r.exit_code == 2 and f"names the {named} format but {given} was given" in r.stderr, r.stderr
    assert not list(tmp_path.glob("out*"))
    fine = cli("--root", str(fixture_root(ROOT)), "inspect", "-o", str(tmp_path / "out.svg"), "-f", "svg")
    assert fine.exit_code == 0 and (tmp_path / "out.svg").read_text().startswith("<svg ")


# -- one output rule for every command with -o: the suffix picks the format, a contradiction is exit 2 --------
def _report_writers() -> dict[str, click.Command]:
    """Every command path with a report format and -o (snapshot's -o is an archive: tested apart)."""
    from tests.cli.test_options import COMMANDS

    return {path: cmd for path, cmd in COMMANDS.items()
            if format_choices(cmd) and any(p.name == "output" for p in cmd.params)}


REPORT_ARGS = {"inspect": [], "check": [], "fleet": ["{report}"], "emit slurm": [], "emit kubelet": [],
               "emit nfd": [], "emit dra": []}
PARSES = {
    "json": lambda t: json.loads(t) and True,
    "junit": lambda t: ET.fromstring(t).tag == "testsuites",
    "svg": lambda t: t.startswith("<svg "),
    "html": lambda t: t.lower().startswith("<!doctype html"),
    "prometheus": lambda t: t.startswith("# "),
    "text": lambda t: bool(t.strip()) and not t.lstrip().startswith(("{", "<")),
}


def test_every_report_writer_is_called():
    assert set(_report_writers()) == set(REPORT_ARGS)


def _writer_cases():
    for path in REPORT_ARGS:
        yield pytest.param(path, id=path)


@pytest.fixture(scope="module")
def inspect_report(tmp_path_factory):
    from click.testing import CliRunner

    from numatune.cli import main

    report = tmp_path_factory.mktemp("report") / "node.json"
    report.write_text(CliRunner().invoke(main, ["--root", str(fixture_root(ROOT)), "inspect", "--json"]).stdout)
    return report


@pytest.mark.parametrize("path", list(_writer_cases()))
def test_the_suffix_picks_the_format_and_a_contradiction_is_exit_2(cli, tmp_path, inspect_report, path):
    """`check -o report.xml` is JUnit (it was text); `check -f junit -o r.json` is exit 2 (it was 0); a suffix
    naming no format is exit 2; each file written is said (`numatune: wrote FILE (FORMAT)`)."""
    cmd = _report_writers()[path]
    choices = format_choices(cmd)
    args = [a.format(report=inspect_report) for a in REPORT_ARGS[path]]
    for suffix, fmt in SUFFIXES.items():
        if fmt not in choices:
            continue
        out = tmp_path / f"r{suffix}"
        r = cli("--root", str(fixture_root(ROOT)), *path.split(), *args, "-o", str(out))
        assert r.exit_code in (0, 1), (suffix, r.stderr)
        assert PARSES[fmt](out.read_text()), (suffix, out.read_text()[:200])
        assert f"numatune: wrote {out} ({fmt})" in r.stderr, r.stderr
        other = next(c for c in choices if c != fmt)
        clash = tmp_path / f"clash{suffix}"
        r = cli("--root", str(fixture_root(ROOT)), *path.split(), *args, "-f", other, "-o", str(clash))
        assert r.exit_code == 2 and f"names the {fmt} format but --format {other} was given" in r.stderr, r.stderr
        assert not clash.exists()
    r = cli("--root", str(fixture_root(ROOT)), *path.split(), *args, "-o", str(tmp_path / "r.zip"))
    assert r.exit_code == 2 and "names no format" in r.stderr and not (tmp_path / "r.zip").exists(), r.stderr


def test_emit_takes_config_suffixes_as_text(cli, tmp_path):
    out = tmp_path / "slurm.conf"
    r = cli("--root", str(fixture_root(ROOT)), "emit", "slurm", "-o", str(out))
    assert r.exit_code == 0 and out.read_text().startswith(("NodeName=", "#")) and "(text)" in r.stderr, r.stderr
    r = cli("--root", str(fixture_root(ROOT)), "emit", "kubelet", "--json", "-o", str(tmp_path / "k.yaml"))
    assert r.exit_code == 2 and "names the text format but --json was given" in r.stderr
