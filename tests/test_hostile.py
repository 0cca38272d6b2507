"""Archives and trees from strangers: refused with exit 3 and nothing written outside, or read as missing.

Every archive here is hand-made in the test (none is a capture of a machine): each is the smallest
member list that shows one attack.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import pytest

import numatune.system.host as host_module
from numatune.errors import ArchiveRefused, ExitCode, PermissionDenied
from numatune.system.host import DENIED, ESCAPES, Host
from tests.conftest import fixture_copy


def _sym(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _archive(path, members) -> str:
    """A tar with a sys/ directory (so it is a root) and then `members` in order."""
    with tarfile.open(path, "w") as tar:
        top = tarfile.TarInfo("sys")
        top.type = tarfile.DIRTYPE
        tar.addfile(top)
        for m in members:
            info, data = m if isinstance(m, tuple) else (m, None)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return str(path)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """numatune's temporary directory is tmp/ inside an otherwise empty directory we can watch."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp_path


def _device():
    dev = tarfile.TarInfo("sys/null")
    dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 3
    return dev


HOSTILE = {
    # The chain from issue #10: a/b -> .., a/b/c -> .. (a/b/c is then the parent of the directory).
    "symlink chain": [_sym("a/b", ".."), _sym("a/b/c", ".."), _file("a/b/c/FILE", b"escaped")],
    "absolute link": [_sym("sys/passwd", "/etc/passwd")],
    "link out by ..": [_sym("sys/up", "../../..")],
    "file through a link": [_sym("sys/out", "../.."), _file("sys/out/FILE")],
    "device node": [_device()],
    "fifo": [tarfile.TarInfo("sys/fifo")],
    "dot-dot name": [_file("sys/../../FILE")],
    "hard link out": [],  # filled below: needs the type set
}
_hard = tarfile.TarInfo("sys/hard")
_hard.type, _hard.linkname = tarfile.LNKTYPE, "../../etc/passwd"
HOSTILE["hard link out"] = [_hard]
HOSTILE["fifo"][0].type = tarfile.FIFOTYPE


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_archive_is_refused_and_writes_nothing_outside(sandbox, name):
    archive = _archive(sandbox / "evil.tar", HOSTILE[name])
    before = sorted(os.listdir(sandbox))
    with pytest.raises(ArchiveRefused, match="refusing snapshot"):
        Host.open(archive)
    assert sorted(os.listdir(sandbox)) == before
    assert os.listdir(sandbox / "tmp") == []  # the half-unpacked directory is gone too


def test_the_chain_through_the_fast_path_exits_3(sandbox):
    """`numatune --root evil.tar inspect --json` (the click-free entry point) as the issue ran it."""
    archive = _archive(sandbox / "evil.tar", HOSTILE["symlink chain"])
    env = dict(os.environ, TMPDIR=str(sandbox / "tmp"), NUMATUNE_PCI_IDS="")
    done = subprocess.run([sys.executable, "-m", "numatune", "--root", archive, "inspect", "--json"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == ExitCode.INPUT == 3
    assert done.stdout == "" and done.stderr.count("\n") == 1 and "outside the destination" in done.stderr
    assert sorted(os.listdir(sandbox)) == ["evil.tar", "tmp"] and os.listdir(sandbox / "tmp") == []


def test_declared_size_of_100_gb_is_refused_before_reading(sandbox):
    """One header declaring 100 GB and no data: refused on the header, nothing is read or written."""
    big = tarfile.TarInfo("sys/big")
    big.size = 100 << 30
    path = sandbox / "bomb.tar"
    path.write_bytes(big.tobuf() + b"\0" * 1024)
    with pytest.raises(ArchiveRefused, match="declares 107374182400 bytes"):
        Host.open(path)
    assert os.listdir(sandbox / "tmp") == []


def test_too_many_members_or_bytes_or_levels_are_refused(sandbox, monkeypatch):
    """The bounds themselves, made small so the test builds small archives (a 10**6-member bomb is
    refused by the same count, at MAX_MEMBERS + 1 headers, before anything is written)."""
    assert host_module.MAX_MEMBERS < 10**6 and host_module.MAX_TOTAL_BYTES < 100 << 30
    monkeypatch.setattr(host_module, "MAX_MEMBERS", 50)
    many = _archive(sandbox / "many.tar", [_file(f"sys/f{i}") for i in range(60)])
    with pytest.raises(ArchiveRefused, match="more than 50 members"):
        Host.open(many)
    monkeypatch.setattr(host_module, "MAX_TOTAL_BYTES", 1000)
    heavy = _archive(sandbox / "heavy.tar", [_file(f"sys/f{i}", b"y" * 400) for i in range(3)])
    with pytest.raises(ArchiveRefused, match="more than 1000 bytes"):
        Host.open(heavy)
    deep = _archive(sandbox / "deep.tar", [_file("sys/" + "d/" * 70 + "f")])
    with pytest.raises(ArchiveRefused, match="deeper than"):
        Host.open(deep)
    assert os.listdir(sandbox / "tmp") == []


def test_exit_code_and_one_line_through_the_cli(sandbox, cli):
    archive = _archive(sandbox / "evil.tar", HOSTILE["absolute link"])
    result = cli("--root", archive, "inspect")
    assert result.exit_code == 3
    assert result.stderr.splitlines()[0].startswith("numatune: error: refusing snapshot")


def test_a_process_device_link_is_the_one_absolute_link_kept(sandbox):
    """proc/PID/fd/N -> /dev/nvidia0 is link text audit reads (never opened); anything else absolute is refused."""
    archive = _archive(sandbox / "fd.tar", [_sym("proc/12/fd/3", "/dev/nvidia0")])
    host = Host.open(archive)
    assert host.read_link("/proc/12/fd/3") == "/dev/nvidia0"
    assert host.read_optional("/proc/12/fd/3") is None  # reading through it leaves the root: missing
    for evil in ("/etc/passwd", "/dev/../etc/passwd"):
        bad = _archive(sandbox / "fd-bad.tar", [_sym("proc/12/fd/3", evil)])
        with pytest.raises(ArchiveRefused):
            Host.open(bad)
    other = _archive(sandbox / "fd-other.tar", [_sym("proc/12/cwd", "/dev/nvidia0")])
    with pytest.raises(ArchiveRefused):
        Host.open(other)


# -- directory roots ---------------------------------------------------------------------------------
def _copy_of(name: str, dest) -> str:
    """A writable copy of a fixture root."""
    return str(fixture_copy(name, dest))


MEMINFO = "/sys/devices/system/node/node0/meminfo"


def test_a_tree_link_out_of_the_root_reads_as_missing_with_a_note(tmp_path, cli):
    root = _copy_of("dev-1node-x86", tmp_path / "tree")
    secret = tmp_path / "secret"  # stands for /etc/shadow: outside the root, readable
    secret.write_text("Node 0 MemTotal:       12345 kB\n")
    os.unlink(root + MEMINFO)
    os.symlink(str(secret), root + MEMINFO)
    doc = json.loads(cli("--root", root, "inspect", "--json").stdout)
    assert doc["nodes"][0]["memory_total_kib"] != 12345
    assert {"subject": MEMINFO, "reason": ESCAPES} in doc["skipped"]
    text = cli("--root", root, "inspect")
    assert f"skipped {MEMINFO}: {ESCAPES}" in text.stderr


def test_a_tree_directory_link_out_of_the_root_reads_as_missing(tmp_path):
    root = _copy_of("dev-1node-x86", tmp_path / "tree")
    outside = tmp_path / "outside"
    shutil.copytree(root + "/sys/devices/system/node/node0", outside, symlinks=True)
    shutil.rmtree(root + "/sys/devices/system/node/node0")
    os.symlink(str(outside), root + "/sys/devices/system/node/node0")  # absolute: leaves the root
    host = Host.open(root)
    assert host.read_optional(MEMINFO) is None and host.listdir("/sys/devices/system/node/node0") == []
    assert ("/sys/devices/system/node/node0", ESCAPES) in host.notes
    os.unlink(root + "/sys/devices/system/node/node0")
    os.symlink("../../../../outside-copy", root + "/sys/devices/system/node/node0")  # relative, still out
    shutil.copytree(outside, tmp_path / "outside-copy", symlinks=True)
    assert Host.open(root).read_optional(MEMINFO) is None


def test_links_inside_the_root_still_work(tmp_path):
    root = _copy_of("dev-1node-x86", tmp_path / "tree")
    os.rename(root + MEMINFO, root + "/sys/meminfo-moved")
    os.symlink("../../../../meminfo-moved", root + MEMINFO)
    host = Host.open(root)
    assert "MemTotal" in host.read_optional(MEMINFO) and host.notes == []


# -- unreadable files -----------------------------------------------------------------------------
def test_unreadable_file_is_noted_and_each_caller_chooses(tmp_path, monkeypatch):
    """root reads everything, so EACCES is simulated at the one open the Host makes."""
    host = Host.open(_copy_of("dev-1node-x86", tmp_path / "tree"))
    real_open = Host._saved_fd  # the one open the Host makes in a saved root

    def denying(self, logical):  # noqa: ANN001, ANN202
        if logical == MEMINFO:
            raise PermissionError(13, "Permission denied")
        return real_open(self, logical)

    monkeypatch.setattr(Host, "_saved_fd", denying)
    assert host.read_optional("/sys/devices/system/node/node0/nothing") is None and host.notes == []  # missing: quiet
    assert host.read_optional(MEMINFO, denied="quiet") is None and host.notes == []
    assert host.read_optional(MEMINFO) is None and host.notes == [(MEMINFO, DENIED)]
    with pytest.raises(PermissionDenied, match="permission denied reading .*meminfo") as err:
        host.read_optional(MEMINFO, denied="raise")
    assert err.value.hint == "run as root"


def test_unreadable_file_reaches_the_reports(tmp_path, monkeypatch, cli):
    root = _copy_of("dev-1node-x86", tmp_path / "tree")
    real_open = Host._saved_fd  # the one open the Host makes in a saved root

    def denying(self, logical):  # noqa: ANN001, ANN202
        if logical == MEMINFO:
            raise PermissionError(13, "Permission denied")
        return real_open(self, logical)

    monkeypatch.setattr(Host, "_saved_fd", denying)
    item = {"subject": MEMINFO, "reason": DENIED}
    assert item in json.loads(cli("--root", root, "inspect", "--json").stdout)["skipped"]
    assert item in json.loads(cli("--root", root, "irq", "--json").stdout)["skipped"]
    assert item in json.loads(cli("--root", root, "check", "--json").stdout)["skipped"]
    assert f"skipped {MEMINFO}: {DENIED}" in cli("--root", root, "inspect").stderr


def test_unlistable_directory_is_noted(tmp_path, monkeypatch):
    host = Host("/", "/")
    real_listdir = os.listdir

    def denying(path):  # noqa: ANN001, ANN202
        if path == "/sys/kernel/debug/irq/irqs":
            raise PermissionError(13, "Permission denied")
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", denying)
    assert host.listdir("/sys/kernel/debug/irq/irqs") == []
    assert host.notes == [("/sys/kernel/debug/irq/irqs", DENIED)]
    assert host.listdir("/sys/no/such/dir") == [] and len(host.notes) == 1
