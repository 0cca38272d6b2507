"""`numatune snapshot`: archive and directory output, `--pid` replayed by audit, nothing secret kept."""

from __future__ import annotations

import json
import os
import tarfile

from tests.cli.test_audit import ALLOC, start, stop


def test_directory_output_and_refusal_to_overwrite(cli, tmp_path):
    out = tmp_path / "tree"
    assert cli("snapshot", "-o", str(out)).exit_code == 0
    assert (out / "sys/devices/system/node").is_dir() and (out / "SNAPSHOT.txt").is_file()
    assert os.path.islink(out / "sys/bus/pci/devices" / os.listdir(out / "sys/bus/pci/devices")[0])
    again = cli("snapshot", "-o", str(out))
    assert again.exit_code == 3 and "not empty" in again.stderr


def test_no_binary_or_oversized_files_and_relative_links_only(cli, tmp_path):
    archive = tmp_path / "n.tar.gz"
    assert cli("snapshot", "-o", str(archive)).exit_code == 0
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            assert not m.name.endswith(("/config", "/resource", "/rom")), m.name
            assert m.size <= 1 << 20
            if m.issym():
                assert not m.linkname.startswith("/"), (m.name, m.linkname)


def test_pid_is_replayed_by_audit_and_keeps_no_secrets(cli, tmp_path):
    env = dict(os.environ, LOCAL_RANK="3", MY_SECRET_TOKEN="hunter2-do-not-keep")
    child = start("held = open('/dev/null')\n" + ALLOC, env=env)  # the captured process holds a device file
    try:
        archive = tmp_path / "job.tar.gz"
        assert cli("snapshot", "-o", str(archive), "--pid", str(child.pid)).exit_code == 0
        live = json.loads(cli("audit", str(child.pid), "--json").stdout)["processes"][0]
    finally:
        stop(child)
    saved = json.loads(cli("--root", str(archive), "audit", str(child.pid), "--json").stdout)["processes"][0]
    assert saved["pid"] == live["pid"] and saved["command"] == live["command"]
    assert saved["memory_by_node"].keys() == live["memory_by_node"].keys()
    for node, size in live["memory_by_node"].items():
        assert abs(saved["memory_by_node"][node] - size) <= 1 << 20  # pages touched between the two reads
    assert saved["memory_by_node"]["0"] >= 16 << 20
    with tarfile.open(archive) as tar:
        blob = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
        environ = [m for m in tar.getmembers() if m.name.endswith(f"/proc/{child.pid}/environ")]
        assert environ and tar.extractfile(environ[0]).read() == b"LOCAL_RANK=3\0"
        fds = [m for m in tar.getmembers() if f"/proc/{child.pid}/fd/" in m.name]
        # device files are kept as links (they tell which GPU a process holds); its pipes are not
        assert fds and all(m.issym() and m.linkname.startswith("/dev/") for m in fds)
        assert "/dev/null" in {m.linkname for m in fds}
    assert b"hunter2-do-not-keep" not in blob


def test_unknown_pid(cli, tmp_path):
    result = cli("snapshot", "-o", str(tmp_path / "x.tar.gz"), "--pid", "999999999")
    assert result.exit_code == 6 and "no process 999999999" in result.stderr
    assert not (tmp_path / "x.tar.gz").exists()
