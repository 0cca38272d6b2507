import os
import tarfile

import pytest

from numatune.errors import InputError, NotASysfsTree, ParseError, describe_failure
from numatune.system.host import Host, natural_key
from tests.conftest import unprivileged


def make_tree(tmp_path):
    """A small hand-made tree (not a real machine) for Host behaviour only."""
    node = tmp_path / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text("0-1\n\x00")
    (node / "bad").write_text("zz\n")
    (tmp_path / "sys/devices/system/node/node10").mkdir()
    (tmp_path / "sys/devices/system/node/node9").mkdir()
    os.symlink("../../../escape", tmp_path / "sys/devices/system/dangling")
    return tmp_path


def test_natural_sort_and_listdir(tmp_path):
    host = Host.open(make_tree(tmp_path))
    assert host.listdir("/sys/devices/system/node") == ["node0", "node9", "node10"]
    assert host.listdir("/sys/nothing/here") == []
    assert sorted(["node10", "node9"], key=natural_key) == ["node9", "node10"]


def test_reads_strip_nul_and_parse(tmp_path):
    host = Host.open(make_tree(tmp_path))
    assert host.read_cpulist("/sys/devices/system/node/node0/cpulist") == {0, 1}
    assert host.read_optional("/sys/devices/system/node/node0/missing") is None
    with pytest.raises(ParseError, match="node0/bad"):
        host.read_int("/sys/devices/system/node/node0/bad")


def test_path_cannot_escape_root(tmp_path):
    host = Host.open(make_tree(tmp_path))
    with pytest.raises(InputError, match="escapes the root") as exc:
        host.path("/sys/../../etc/passwd")
    assert describe_failure(exc.value)[2] == 3
    assert host.resolve("/sys/devices/system/dangling") is None


def test_missing_and_non_tree_roots(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        Host.open(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotASysfsTree):
        Host.open(tmp_path / "empty")
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    with pytest.raises(NotASysfsTree):
        Host.open(junk)


def test_tar_snapshot_is_unpacked(tmp_path):
    tree = make_tree(tmp_path / "t")
    archive = tmp_path / "snap.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree / "sys", arcname="top/sys")
    host = Host.open(archive)
    assert host.label == str(archive)
    assert host.read_cpulist("/sys/devices/system/node/node0/cpulist") == {0, 1}


def test_live_host():
    host = Host.open("/")
    assert host.is_live and host.path("/proc/cpuinfo") == "/proc/cpuinfo"


def test_a_root_this_user_cannot_read_is_exit_4_not_missing():
    """A root under a directory the user may not search exists as far as anyone can tell: permission denied
    (exit 4), never "does not exist"."""
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    prefix = unprivileged()
    base = Path(tempfile.mkdtemp(prefix="numatune-perm-"))  # pytest's tmp_path sits under a 0700 directory
    base.chmod(0o755)
    locked = base / "locked"
    (locked / "tree" / "sys").mkdir(parents=True)
    locked.chmod(0o000)
    try:
        for root, said in ((locked / "tree", "permission denied on a directory above it"),
                           (locked, "cannot list --root")):
            res = subprocess.run([*prefix, sys.executable, "-m", "numatune", "--root", str(root), "inspect"],
                                 capture_output=True, text=True, timeout=60)
            assert res.returncode == 4 and said in res.stderr and "does not exist" not in res.stderr, res.stderr
    finally:
        locked.chmod(0o755)
        shutil.rmtree(base)
