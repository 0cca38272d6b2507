"""`numatune snapshot`: archive and directory output, `--pid` replayed by audit, nothing secret kept."""

from __future__ import annotations

import json
import os
import tarfile

import pytest

from numatune.commands.snapshot import DRY_RUN
from tests.cli.test_audit import ALLOC, start, stop
from tests.conftest import fixture_root


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
    result = cli("snapshot", "-o", str(tmp_path / "x.tar.gz"), "--pid", str(2**22 - 4321))
    assert result.exit_code == 6 and f"no process {2**22 - 4321}" in result.stderr
    assert not (tmp_path / "x.tar.gz").exists()


# -- a snapshot of a saved root replays it exactly (the readers' whole surface, on real kernels' trees) --
REPLAYED = {
    "topo-mi210-xgmi-pcie": "AMD GPUs: /sys/class/drm/renderD* and the KFD topology",
    "256ppc-8n8s4t": "POWER: /proc/device-tree/cpus",
    "vm-two-socket": "a 6.12 kernel's /proc/irq, /proc/interrupts and node files",
    "vm-cxl": "CXL, DAX and memory tiers",
    "nvidiagpunumanodes": "NVIDIA GPU memory nodes (numa_status)",
    "handmade-launch-2s4gpu-cxl": "launch's GPU and CXL paths",
}
SAVED_COMMANDS = DRY_RUN  # every line a snapshot is made from replays the same


@pytest.mark.parametrize("name", list(REPLAYED))
def test_snapshot_of_a_saved_root_replays_it(cli, tmp_path, name):
    from tests.conftest import fixture_root
    from tests.parity import comparable

    root = str(fixture_root(name))
    out = tmp_path / "copy.tar.gz"
    assert cli("--root", root, "snapshot", "-o", str(out)).exit_code == 0
    for line in SAVED_COMMANDS:
        a, b = cli("--root", root, *line), cli("--root", str(out), *line)
        assert a.exit_code == b.exit_code, (line, a.stderr, b.stderr)
        if a.stdout:
            assert comparable(json.loads(b.stdout)) == comparable(json.loads(a.stdout)), line


def test_unreadable_files_are_listed_and_replayed_as_unreadable(cli, tmp_path, monkeypatch):
    """Taken without root, a file the commands read is listed in SNAPSHOT.txt and noted on replay as live."""
    import numatune.commands.snapshot as capture
    from numatune.system.host import DENIED

    real = capture._read_bounded

    def denying(src, path):  # noqa: ANN001, ANN202 - root reads everything: EACCES is simulated
        if path.endswith("/proc/sys/kernel/numa_balancing"):
            raise PermissionError(13, "Permission denied")
        return real(src, path)

    monkeypatch.setattr(capture, "_read_bounded", denying)
    out = tmp_path / "snap"
    result = cli("snapshot", "-o", str(out))
    assert result.exit_code == 0 and "could not be read (run as root)" in result.stderr
    assert "unreadable: /proc/sys/kernel/numa_balancing\n" in (out / "SNAPSHOT.txt").read_text()
    doc = json.loads(cli("--root", str(out), "inspect", "--json").stdout)
    assert {"subject": "/proc/sys/kernel/numa_balancing", "reason": DENIED} in doc["skipped"]


def test_only_device_fds_and_named_environment_keys_are_kept(cli, tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="1", API_TOKEN="s3cret-value")
    child = start(ALLOC, env=env)
    try:
        out = tmp_path / "snap"
        assert cli("snapshot", "-o", str(out), "--pid", str(child.pid)).exit_code == 0
    finally:
        stop(child)
    proc = out / "proc" / str(child.pid)
    assert (proc / "environ").read_bytes() == b"CUDA_VISIBLE_DEVICES=1\0"
    fds = [os.readlink(proc / "fd" / n) for n in os.listdir(proc / "fd")] if (proc / "fd").is_dir() else []
    assert all(t.startswith("/dev/") for t in fds)
    other = [p for p in os.listdir(out / "proc") if p.isdigit() and int(p) not in (child.pid,)]
    assert len(other) <= 1  # only the snapshotting process itself (/proc/self), never the process table
    assert not any(b"s3cret-value" in p.read_bytes() for p in out.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_dry_run_command_that_hits_a_bug_is_named(cli, tmp_path, monkeypatch):
    import numatune.commands.inspect

    def broken(*_args):  # noqa: ANN002, ANN202
        raise RuntimeError("boom")

    monkeypatch.setattr(numatune.commands.inspect, "inspect_json", broken)
    out = tmp_path / "snap"
    result = cli("snapshot", "-o", str(out))
    assert result.exit_code == 0 and "may be incomplete: inspect --json: RuntimeError: boom" in result.stderr
    assert "dry-run error: inspect --json: RuntimeError: boom\n" in (out / "SNAPSHOT.txt").read_text()
    assert (out / "proc/interrupts").is_file()  # the other commands still read what they read


def test_whether_irqbalance_ran_is_recorded_and_an_older_snapshot_says_unknown(cli, tmp_path):
    """A snapshot keeps only a few /proc/PID entries, so the daemon's absence there proves nothing:
    the snapshot's own `irqbalance:` line does. A tree without it (an older snapshot) reads as unknown."""
    out = tmp_path / "snap"
    assert cli("snapshot", "-o", str(out)).exit_code == 0
    live = json.loads(cli("inspect", "--json").stdout)["settings"]["irqbalance_running"]
    assert live in (True, False)
    recorded = [ln for ln in (out / "SNAPSHOT.txt").read_text().splitlines() if ln.startswith("irqbalance: ")]
    assert recorded == [f"irqbalance: {'running' if live else 'not running'}"]
    assert json.loads(cli("--root", str(out), "inspect", "--json").stdout)["settings"]["irqbalance_running"] is live
    note = out / "SNAPSHOT.txt"
    note.write_text("".join(ln + "\n" for ln in note.read_text().splitlines() if not ln.startswith("irqbalance: ")))
    replayed = json.loads(cli("--root", str(out), "inspect", "--json").stdout)["settings"]["irqbalance_running"]
    assert replayed is (True if live else None)


def test_a_snapshot_of_a_saved_root_keeps_its_absolute_links_dangling(cli, tmp_path):
    """In a saved root an absolute link leaves the root (read as missing); the snapshot used to rewrite it
    as a relative link and copy its target, so the copy showed a NIC name the root did not."""
    from tests.conftest import fixture_copy

    root = fixture_copy("dev-1node-x86", tmp_path / "copy")
    link = root / "sys/class/net/eth0"
    target = os.readlink(link)
    os.unlink(link)
    os.symlink("/sys/" + target.removeprefix("../../"), link)
    before = json.loads(cli("--root", str(root), "inspect", "--json").stdout)
    for out in (tmp_path / "snap", tmp_path / "snap.tar.gz"):
        assert cli("--root", str(root), "snapshot", "-o", str(out)).exit_code == 0
        after = json.loads(cli("--root", str(out), "inspect", "--json").stdout)
        assert [d["netdevs"] for d in after["devices"]] == [d["netdevs"] for d in before["devices"]]


@pytest.mark.parametrize("text", ["../../../../sys/devices/system/nodes", "../../../../../../sys/devices/system/nodes",
                                  "nodes/../nodes"])
def test_a_snapshot_keeps_link_texts_so_the_copy_reports_what_the_root_does(cli, tmp_path, text):
    """A link that climbs above the root's top dangles there; the snapshot rewrote it so that in the copy it
    resolved, and the copy reported the 2 NUMA nodes the root did not. Every link's text is kept as it is."""
    from tests.conftest import fixture_copy

    root = fixture_copy("vm-two-socket", tmp_path / "copy")
    system = root / "sys/devices/system"
    (system / "node").rename(system / "nodes")
    (system / "node").symlink_to(text)
    before = json.loads(cli("--root", str(root), "inspect", "--json").stdout)
    for out in (tmp_path / "snap", tmp_path / "snap.tar.gz"):
        assert cli("--root", str(root), "snapshot", "-o", str(out)).exit_code == 0
        after = json.loads(cli("--root", str(out), "inspect", "--json").stdout)
        assert [n["id"] for n in after["nodes"]] == [n["id"] for n in before["nodes"]]
        assert after["nodes"] == before["nodes"]
    if text.startswith("../../../../../"):
        assert len(before["nodes"]) == 1  # the link dangles: one node, as a kernel without NUMA shows
    elif text.startswith("nodes"):
        assert len(before["nodes"]) == 2
    assert os.readlink(tmp_path / "snap/sys/devices/system/node") == text


# A rank (LOCAL_RANK=0) that forks a DataLoader-like worker inheriting its environment.
RANK_WITH_WORKER = """\
import os, sys
r, w = os.pipe()
pid = os.fork()  # a forked worker (a DataLoader's, a Pool's): the rank's command line, no exec
if pid == 0:
    os.close(r); os.dup2(w, 1)
    hold = os.pipe(); sys.stdin = os.fdopen(hold[0])  # its own stdin, never written: it waits to be killed
    exec(sys.argv[1]); os._exit(0)
os.close(w)
assert os.fdopen(r).readline().strip() == "ready"
print("ready", pid, flush=True)
sys.stdin.readline()
os.kill(pid, 9); os.waitpid(pid, 0)
"""


def test_a_worker_s_snapshot_keeps_its_rank_so_replay_tells_worker_from_rank(cli, tmp_path):
    import subprocess
    import sys

    env = dict(os.environ, LOCAL_RANK="0")
    rank = subprocess.Popen([sys.executable, "-c", RANK_WITH_WORKER, ALLOC], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        word, worker = rank.stdout.readline().split()
        assert word == "ready"
        archive = tmp_path / "worker.tar.gz"
        assert cli("snapshot", "-o", str(archive), "--pid", worker).exit_code == 0
        live = json.loads(cli("audit", worker, "--json").stdout)["processes"][0]
    finally:
        rank.stdin.write("\n")
        rank.stdin.flush()
        rank.wait(timeout=30)
    saved = json.loads(cli("--root", str(archive), "audit", worker, "--json").stdout)["processes"][0]
    assert live["role"] == saved["role"] == "worker" and live["kind"] == saved["kind"] == "fork"
    assert live["rank_pid"] == saved["rank_pid"] == rank.pid
    assert saved["worker"]["rank_cpus"] == live["worker"]["rank_cpus"]
    with tarfile.open(archive) as tar:
        names = {m.name.split("/", 1)[-1] for m in tar.getmembers()}
    assert f"proc/{rank.pid}/environ" in names and f"proc/{rank.pid}/status" in names


def test_a_process_it_may_not_read_is_exit_4_and_nothing_is_written(tmp_path):
    """Unprivileged `snapshot --pid N` of a process it may not read exited 0, and the archive replayed as
    "PID N ok" where a live audit exits 4: now exit 4 as the live audit, and no archive to mislead."""
    import subprocess
    import sys

    from tests.conftest import PROJECT, unprivileged

    drop = unprivileged()
    pid = "1"
    probe = subprocess.run([*drop, sys.executable, "-c", f"open('/proc/{pid}/numa_maps').read()"],
                           capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip(f"this user may read process {pid}'s numa_maps: no process here it may not read")
    out = tmp_path / "s.tar.gz"
    done = subprocess.run([*drop, sys.executable, "-m", "numatune", "snapshot", "--pid", pid, "-o", str(out)],
                          capture_output=True, text=True, cwd=PROJECT, timeout=300, check=False)
    assert done.returncode == 4, done.stderr
    assert done.stderr.startswith(f"numatune: error: cannot read /proc/{pid}/") and "nothing was written" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("name", ["x.zip", "x.tar.xz", "x.gz"])
def test_an_archive_it_does_not_write_is_exit_2(cli, tmp_path, name):
    """`snapshot -o x.zip` made a directory named x.zip: now exit 2 saying what it writes."""
    r = cli("--root", str(fixture_root("dev-1node-x86")), "snapshot", "-o", str(tmp_path / name))
    assert r.exit_code == 2 and "snapshot writes a .tar.gz, .tgz or .tar archive, or a directory" in r.stderr
    assert not (tmp_path / name).exists()
