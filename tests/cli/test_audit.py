"""`numatune audit` end to end: real processes and a real process tree, a saved tree, errors."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import textwrap

import pytest

import numatune.system.host as host_module
from tests.conftest import fixture_copy, fixture_root, write_process

ALLOC = textwrap.dedent("""\
    import mmap, sys
    m = mmap.mmap(-1, 16 << 20)
    for off in range(0, 16 << 20, 4096):
        m[off] = 1
    print("ready", flush=True)
    sys.stdin.readline()
""")

# A launcher (like torchrun) with 3 ranks; rank 1 forks a data-loader helper inheriting LOCAL_RANK=1.
LAUNCHER = textwrap.dedent("""\
    import os, subprocess, sys
    alloc = sys.argv[1]
    helper = "import subprocess,sys; h=subprocess.Popen([sys.executable,'-c',sys.argv[1]],stdin=sys.stdin); " \\
             "h.wait()"
    kids = []
    for rank in range(3):
        env = dict(os.environ, LOCAL_RANK=str(rank), MY_SECRET_TOKEN="hunter2")
        code = alloc if rank != 1 else helper
        args = [sys.executable, "-c", code] + ([alloc] if rank == 1 else [])
        kids.append(subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for k in kids[0:1] + kids[2:]:
        assert k.stdout.readline().strip() == "ready"
    assert kids[1].stdout.readline().strip() == "ready"
    print("ready", flush=True)
    sys.stdin.readline()
    for k in kids:
        k.stdin.write("\\n"); k.stdin.flush(); k.wait()
""")


def start(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    return p


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.stdin.write("\n")
        p.stdin.flush()
    p.wait(timeout=20)


@pytest.fixture
def child():
    p = start(ALLOC)
    yield p
    stop(p)


def test_json_contract_on_a_real_process(cli, child):
    r = cli("audit", str(child.pid), "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "numatune.audit/2"
    (p,) = doc["processes"]
    assert p["pid"] == child.pid and p["command"][0] == sys.executable
    assert p["threads"] and {"tid", "cpu", "allowed_cpus"} <= set(p["threads"][0])
    assert sum(p["memory_by_node"].values()) >= 16 << 20
    assert all(isinstance(k, str) for k in p["memory_by_node"])
    assert 0.0 <= p["remote_ratio"] <= 1.0 and 0.0 <= p["slow_tier_ratio"] <= 1.0
    assert p["home_nodes"] and p["verdict"] in ("ok", "warning", "misplaced")
    assert p["access_counters"]["source"] in ("pmu", "numa_balancing", "placement")
    assert "values" in p["access_counters"] and p["gpu"] is None
    assert set(p["fix"]) == {"launch", "numactl", "migratepages", "taskset"}


def test_prometheus_format(cli, child):
    r = cli("audit", str(child.pid), "--format", "prometheus")
    assert r.exit_code == 0, r.stderr
    assert str(child.pid) in r.stdout and "# TYPE" in r.stdout


def test_table_on_a_real_process(cli, child):
    r = cli("audit", str(child.pid))
    assert r.exit_code == 0
    assert f"PID {child.pid}" in r.stdout and "resident memory by node" in r.stdout
    assert "access counters: placement" in r.stdout or "access counters: numa_balancing" in r.stdout


def test_job_view_on_a_real_process_tree(cli):
    launcher = start(LAUNCHER, ALLOC)
    try:
        r = cli("audit", "--children", str(launcher.pid), "--json")
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        ranks = doc["job"]["ranks"]
        assert [x["rank"] for x in ranks] == [0, 1, 2]
        assert [x["helper_processes"] for x in ranks] == [0, 1, 0]  # rank 1's data-loader is counted
        helper = ranks[1]["workers"]
        assert len(helper) == 1
        # listed under its rank as a helper (a program it runs: another command line), not as another rank
        assert [(p["rank"], p["role"], p["kind"]) for p in doc["processes"]] == [
            (0, "rank", None), (1, "rank", None), (1, "helper", "subprocess"), (2, "rank", None)]
        assert {p["job"] for p in doc["processes"]} == {launcher.pid}  # one job: its ranks differ
        assert doc["processes"][2]["pid"] == helper[0] and doc["processes"][2]["rank_pid"] == ranks[1]["pid"]
        assert "hunter2" not in r.stdout and "MY_SECRET_TOKEN" not in r.stdout
        t = cli("audit", "--children", str(launcher.pid))
        assert t.exit_code == 0
        assert f"helper of {ranks[1]['pid']} (subprocess)" in t.stdout
        assert "3 rank(s), 0 worker(s), 1 helper(s)" in t.stdout
    finally:
        stop(launcher)


def test_name_pattern(cli, child):
    r = cli("audit", "--name", "python*", "--json")
    assert r.exit_code == 0
    assert child.pid in {p["pid"] for p in json.loads(r.stdout)["processes"]}
    r = cli("audit", "--name", "no-such-command-xyz")
    assert r.exit_code == 6 and "no process matches" in r.stderr


def test_missing_pid_exit_6(cli):
    r = cli("audit", str(2**22 - 4321))  # below PID_MAX_LIMIT: a PID that may exist, and does not
    assert r.exit_code == 6 and r.stderr.startswith("numatune: error: no process with PID")
    assert "Traceback" not in r.stderr


def test_permission_denied_exit_4(cli, child, monkeypatch):
    real_open = open

    def denying_open(path, *args, **kwargs):
        if str(path).endswith(f"/{child.pid}/numa_maps"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(host_module, "open", denying_open, raising=False)
    r = cli("audit", str(child.pid))
    assert r.exit_code == 4 and "permission denied" in r.stderr and "Traceback" not in r.stderr


def test_kernel_thread(cli):
    try:
        with open("/proc/2/comm") as fh:
            if fh.read().strip() != "kthreadd":
                pytest.skip("no kthreadd at PID 2")
    except OSError:
        pytest.skip("no PID 2")
    r = cli("audit", "2")
    assert r.exit_code == 0 and "kernel thread" in r.stdout
    doc = json.loads(cli("audit", "2", "--json").stdout)
    assert doc["processes"][0]["kernel_thread"] is True and doc["processes"][0]["verdict"] == "n/a"


def test_usage_errors(cli):
    assert cli("audit").exit_code == 2
    assert cli("audit", "--children", "--name", "x").exit_code == 2
    assert cli("audit", "1", "--watch", "--json").exit_code == 2
    assert cli("audit", "1", "--remote-warn", "30", "--remote-misplaced", "20").exit_code == 2


def test_watch_refreshes_and_stops(cli, child):
    r = cli("audit", str(child.pid), "--watch", "--interval", "0.1", "--count", "2")
    assert r.exit_code == 0 and str(child.pid) in r.stdout


def _watch_into_a_file(pid: int, out, *extra: str) -> subprocess.Popen:
    import os

    env = dict(os.environ, COLUMNS="80")
    env.pop("FORCE_COLOR", None)
    return subprocess.Popen([sys.executable, "-m", "numatune", "audit", str(pid), "--watch", *extra], stdout=out,
                            stderr=subprocess.PIPE, env=env, text=True)


def _frames(text: str) -> list[str]:
    """The complete frames of a --watch file: a title line, then a whole table (its bottom edge drawn)."""
    frames = [f for f in text.split("numatune audit — ")[1:]]
    return [f for f in frames if "\n└" in f]


def test_watch_into_a_file_writes_every_frame(child, tmp_path):
    """`audit PID --watch --interval 1 --count 3 > file` holds 3 whole frames (a live view wrote only the last)."""
    with open(tmp_path / "watch.txt", "w") as out:
        p = _watch_into_a_file(child.pid, out, "--interval", "0.3", "--count", "3")
        assert p.wait(timeout=120) == 0, p.stderr.read()
    text = (tmp_path / "watch.txt").read_text()
    assert len(_frames(text)) == 3 and text.count("numatune audit — ") == 3, text
    assert str(child.pid) in _frames(text)[-1] and sys.executable in text  # the command whole, not cut
    assert "\x1b" not in text and "…" not in text


def test_a_watch_stopped_by_sigterm_leaves_its_frames(child, tmp_path):
    import signal
    import time

    with open(tmp_path / "watch.txt", "w") as out:
        p = _watch_into_a_file(child.pid, out, "--interval", "0.2")
        deadline = time.monotonic() + 90
        while len(_frames((tmp_path / "watch.txt").read_text())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # each frame is flushed as it is written: the file grows while the watch runs
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    text = (tmp_path / "watch.txt").read_text()
    assert len(_frames(text)) >= 2, text


def test_sample_reports_its_source(cli, child):
    r = cli("audit", str(child.pid), "--sample", "0.3", "--json")
    assert r.exit_code == 0
    c = json.loads(r.stdout)["processes"][0]["access_counters"]
    if c["source"] == "pmu":
        assert c["events"] and c["window_s"] == 0.3
    else:  # no PMU here: the note says why
        assert c["notes"] and any("not supported" in n or "paranoid" in n or "counted no" in n for n in c["notes"])


# -- a saved procfs tree (hand-made per-PID files on the real two-socket ghw sys tree) -----------------
def _saved_tree(tmp_path):
    root = fixture_copy("intel-xeon-L5640-2node", tmp_path / "root")
    write_process(root, 4242, "LOCAL_RANK=0\x00API_KEY=secret\x00",  # CPU 0 is on node 0
                  "55d000000000 default heap anon=100 dirty=100 N0=100 kernelpagesize_kB=4\n"
                  "7f0000000000 default anon=600 dirty=600 N0=300 N1=300 kernelpagesize_kB=4\n")
    return root


def test_saved_tree_root(cli, tmp_path):
    root = _saved_tree(tmp_path)
    r = cli("--root", str(root), "audit", "4242", "--json")
    assert r.exit_code == 0, r.stderr
    p = json.loads(r.stdout)["processes"][0]
    assert p["memory_by_node"] == {"0": 400 * 4096, "1": 300 * 4096}
    assert p["home_nodes"] == [0] and p["remote_ratio"] == pytest.approx(300 / 700, abs=1e-6)
    assert p["verdict"] == "misplaced" and p["fix"]["migratepages"] == "migratepages 4242 1 0"
    assert p["rank"] == 0 and "secret" not in r.stdout
    assert any("live node" in n for n in p["access_counters"]["notes"]) is False
    r = cli("--root", str(root), "audit", "4242", "--sample", "0.05", "--json")
    notes = json.loads(r.stdout)["processes"][0]["access_counters"]["notes"]
    assert any("live node" in n for n in notes)
    assert cli("--root", str(root), "audit", "4243").exit_code == 6


def test_ranks_audits_every_process_with_a_local_rank(cli, tmp_path):
    """--ranks: the processes whose environment names a local rank (any launcher's variable), nothing else; with
    none running, an empty report and exit 0 (the textfile unit runs it on every machine)."""
    root = _saved_tree(tmp_path)
    write_process(root, 4243, "SLURM_LOCALID=1\x00SLURM_JOB_ID=7\x00")
    write_process(root, 4244, "PATH=/usr/bin\x00")  # no rank: not a training process
    write_process(root, 4245, "LOCAL_RANK=x\x00")  # malformed: not known to be a rank
    r = cli("--root", str(root), "audit", "--ranks", "--json")
    assert r.exit_code == 0, r.stderr
    assert [(p["pid"], p["rank"]) for p in json.loads(r.stdout)["processes"]] == [(4242, 0), (4243, 1)]
    r = cli("--root", str(root), "audit", "--ranks", "4244", "--json")  # with PIDs: both
    assert sorted(p["pid"] for p in json.loads(r.stdout)["processes"]) == [4242, 4243, 4244]
    bare = fixture_copy("intel-xeon-L5640-2node", tmp_path / "bare")
    r = cli("--root", str(bare), "audit", "--ranks", "-f", "prometheus")
    assert r.exit_code == 0 and "numatune_audit_processes 0\n" in r.stdout and "numatune_process_" not in r.stdout


def test_ranks_with_no_job_says_what_it_looked_for_and_how_to_point_it_at_one(cli, tmp_path):
    """No empty table without a word (issue 47): the text says no job was found, the note what was looked for and
    the commands that answer (the README's capture among them), in every format; still exit 0."""
    bare = fixture_copy("intel-xeon-L5640-2node", tmp_path / "bare")
    r = cli("--root", str(bare), "audit", "--ranks")
    doc = cli("--root", str(bare), "audit", "--ranks", "--json")
    assert r.exit_code == doc.exit_code == 0, r.stderr
    for said in (r.stderr, json.loads(doc.stdout)["notes"][-1]):  # on stderr, or among the JSON's notes
        assert "no training job found on" in said and "LOCAL_RANK" in said and "torchrun" in said
        assert "audit --children LAUNCHER_PID" in said and "h100-job-2026-11-28.tar.gz audit --ranks" in said
    assert json.loads(doc.stdout)["processes"] == []
    text = cli("--root", str(bare), "audit", "--ranks").stdout
    assert text.startswith("no training job found") and "┏" not in text
    answer = cli("--root", str(fixture_root(JOB, archive=True)), "audit", "--ranks")
    assert "no training job" not in answer.stderr and "1 rank(s), 2 worker(s)" in answer.stdout


def test_process_exits_between_listing_and_reading_is_skipped_in_a_tree(cli, tmp_path, monkeypatch):
    import numatune.readers.procs as procs

    root = _saved_tree(tmp_path)
    (root / "proc" / "4000").mkdir()
    (root / "proc" / "4000" / "stat").write_text("4000 (torchrun) S 1 " + " ".join(["0"] * 44) + "\n")
    real = procs.process_table

    def listing_with_a_ghost(host):
        table = real(host)
        table[4242] = table[4242]._replace(ppid=4000)
        table[4244] = table[4242]._replace(pid=4244)  # listed, then gone before it is read
        return table

    monkeypatch.setattr(procs, "process_table", listing_with_a_ghost)
    r = cli("--root", str(root), "audit", "--children", "4000", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [p["pid"] for p in doc["processes"]] == [4242]
    assert any("4244" in n for n in doc["notes"])


# A process that mbinds one 8 MiB private anonymous region to node 0 (a placement arena, seen from outside).
MBIND_ALLOC = textwrap.dedent("""\
    import ctypes, mmap, sys
    from numatune.system import memsys
    size = 8 << 20
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    memsys.mbind(addr, size, memsys.MPOL_BIND, [0])
    for off in range(0, size, 4096):
        m[off] = 1
    print(f"{addr:x}", flush=True)
    print("ready", flush=True)
    sys.stdin.readline()
""")


@pytest.fixture
def bound_child():
    p = subprocess.Popen([sys.executable, "-c", MBIND_ALLOC], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    addr = p.stdout.readline().strip()
    assert p.stdout.readline().strip() == "ready"
    yield p, addr
    stop(p)


def test_mappings_json_shows_the_mbind_region(cli, bound_child):
    p, addr = bound_child
    r = cli("audit", str(p.pid), "--json", "--mappings")
    assert r.exit_code == 0, r.stderr
    (proc,) = json.loads(r.stdout)["processes"]
    placement = proc["mapping_placement"]
    assert placement["min_size"] == 1 << 20
    region = next(m for m in placement["mappings"] if m["start"] == addr)
    assert region["policy"] == "bind:0" and region["kind"] == "anon"
    assert region["pages_by_node"] == {"0": 2048} and region["bytes"] == 8 << 20
    assert region["off_policy_pages"] == 0
    assert placement["mappings"][0]["bytes"] >= placement["mappings"][-1]["bytes"]  # largest first
    assert all(m["bytes"] >= 1 << 20 for m in placement["mappings"])
    shown, smaller = len(placement["mappings"]), placement["smaller"]["mappings"]
    assert smaller > 0 and shown + smaller == proc["mappings"]
    total = sum(m["bytes"] for m in placement["mappings"]) + placement["smaller"]["bytes"]
    assert total == proc["memory_total"]
    every = json.loads(cli("audit", str(p.pid), "--json", "--mappings", "--min-size", "0").stdout)
    assert len(every["processes"][0]["mapping_placement"]["mappings"]) == proc["mappings"]
    plain = json.loads(cli("audit", str(p.pid), "--json").stdout)
    assert "mapping_placement" not in plain["processes"][0]  # additive: only with --mappings


def test_mappings_table_and_errors(cli, bound_child):
    p, addr = bound_child
    r = cli("audit", str(p.pid), "--mappings", "--min-size", "4M")
    assert r.exit_code == 0, r.stderr
    assert "placement per mapping" in r.stdout
    row = next(line for line in r.stdout.splitlines() if addr in line)
    assert "bind:0" in row and row.count("8.0 MiB") == 2  # resident, and node 0's share: bytes, not 2048 pages
    assert "smaller" in r.stdout and "pages" not in r.stdout.split("placement per mapping", 1)[1].split("\n")[2]
    bad = cli("audit", str(p.pid), "--mappings", "--min-size", "lots")
    assert bad.exit_code != 0 and "--min-size" in bad.stderr and "Traceback" not in bad.stderr
    assert cli("audit", str(p.pid), "--mappings", "--watch").exit_code == 2


def test_mappings_never_take_the_json_fast_path():
    from numatune.entry import match_fast_path

    assert match_fast_path(["audit", "1", "--json"], {}) is not None
    assert match_fast_path(["audit", "1", "--json", "--mappings"], {}) is None


def test_mappings_replayed_from_a_snapshot_equal_live(cli, bound_child, tmp_path):
    from tests.parity import comparable, differences

    p, addr = bound_child
    archive = tmp_path / "node.tar.gz"
    assert cli("snapshot", "-o", str(archive), "--pid", str(p.pid)).exit_code == 0
    live = json.loads(cli("audit", str(p.pid), "--json", "--mappings", "--min-size", "0").stdout)
    saved = json.loads(cli("--root", str(archive), "audit", str(p.pid), "--json", "--mappings", "--min-size",
                           "0").stdout)
    assert not (diff := differences(comparable(saved), comparable(live))), diff
    region = next(m for m in saved["processes"][0]["mapping_placement"]["mappings"] if m["start"] == addr)
    assert region["policy"] == "bind:0" and region["pages_by_node"] == {"0": 2048}


def test_mappings_for_several_processes(cli, child, bound_child):
    p, _addr = bound_child
    r = cli("audit", str(child.pid), str(p.pid), "--mappings")
    assert r.exit_code == 0, r.stderr
    assert f"PID {child.pid}: placement per mapping" in r.stdout
    assert f"PID {p.pid}: placement per mapping" in r.stdout
    assert cli("audit", str(p.pid), "--mappings", "--format", "prometheus").exit_code == 2


UVM = "ffffc0000000 default file=/dev/nvidia-uvm dirty=64 N1=64 kernelpagesize_kB=64\n"  # a CUDA context


def test_grace_rank_pinned_buffers_on_the_other_grace_and_pages_in_its_gpus_hbm(cli, tmp_path):
    """A GB200 rank on GPU2 (CPU node 1, HBM node 18) with a CUDA context (it maps /dev/nvidia-uvm) whose
    cudaHostAlloc buffers (shared anonymous mappings) came from node 0: NT407; the driver's /dev/nvidiactl pages
    are its own memory, not buffers; its pages in node 18 are named as GPU2's HBM, not as remote DRAM."""
    root = fixture_copy("handmade-gb200-numa", tmp_path / "root")
    write_process(root, 4300, "LOCAL_RANK=2\x00",
                  "aaaa00000000 default heap anon=8192 dirty=8192 N1=8192 kernelpagesize_kB=64\n"
                  "ffff00000000 default file=/dev/zero\\040(deleted) dirty=1024 N0=1024 kernelpagesize_kB=64\n"
                  "ffff80000000 default file=/dev/zero\\040(deleted) dirty=256 N1=256 kernelpagesize_kB=64\n"
                  "ffffa0000000 default file=/dev/nvidiactl dirty=512 mapped=512 N0=512 kernelpagesize_kB=64\n"
                  + UVM +
                  "bbbb00000000 bind:18 anon=512 dirty=512 N18=512 kernelpagesize_kB=64\n")
    r = cli("--root", str(root), "audit", "4300", "--json")
    assert r.exit_code == 0, r.stderr
    p = json.loads(r.stdout)["processes"][0]
    assert p["gpu"]["bdf"] == "0018:01:00.0" and p["home_nodes"] == [1]
    assert p["memory_nodes"]["18"] == {"kind": "gpu", "gpu": "0018:01:00.0"}
    assert p["memory_nodes"]["1"] == {"kind": "dram", "gpu": None}
    assert p["gpu_context"] == {"runtime": "CUDA", "evidence": "it maps /dev/nvidia-uvm"}
    pinned = p["pinned_host"]
    assert pinned["gpu_cpu_node"] == 1 and pinned["devices"] == ["/dev/zero (deleted)"]
    assert pinned["bytes_by_node"] == {"0": 1024 * 65536, "1": 256 * 65536}
    assert [(b["start"], b["bytes"]) for b in pinned["chunks"]] == [("ffff00000000", 64 << 20),
                                                                      ("ffff80000000", 16 << 20)]
    assert pinned["off_nodes"] == [0] and pinned["off_node_bytes"] == 64 << 20
    assert p["gpu_driver_memory"] == {"nvidia-uvm": {"1": 64 * 65536}, "nvidiactl": {"0": 512 * 65536}}
    assert p["verdict"] == "warning"
    assert pinned["chunk_count"] == 2 and pinned["host_cache_reuse"] is None  # bound to no node: no cause seen
    assert any(x.startswith("likely pinned host chunks") and "64 of 80 MiB" in x for x in p["reasons"])
    text = " ".join(cli("--root", str(root), "audit", "4300").stdout.split())
    assert "of shm: likely pinned" in text and "gpu GPU2" in text and "pinned (nvidiactl)" not in text
    assert "GPU driver memory: 36.0 MiB on node 0, node 1 (nvidia-uvm 4.0 MiB, nvidiactl 32.0 MiB)" in text
    from numatune.analysis.locality import audit_findings
    from numatune.readers.procs import read_process
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host

    host = Host.open(root)
    topo = read_topology(host)
    codes = [f.code for f in audit_findings(topo, read_process(host, 4300, topo))]
    assert "NT407" in codes and "NT401" not in codes  # the HBM pages are the GPU's, not remote DRAM


def _probe_doc(pairs, index=2, bdf="0018:01:00.0", name="NVIDIA GB200"):
    """A hand-made `probe --gpu --json` document (figures as torchtitan#3519 reports for GB200, not measured)."""
    fig = {"samples": [1.0], "median": 0.0, "max": 0.0}
    return {"schema": "numatune.probe/1", "gpu": {
        "measured": True, "gpus": [{"index": index, "name": name, "bdf": bdf, "numa_node": 1}],
        "pairs": [{"node": n, "gpu": index, "status": "ok", "h2d_gbps": {"4194304": dict(fig, median=1.0),
                                                                         "268435456": dict(fig, median=v)}}
                  for n, v in pairs]}}


def test_audit_probe_states_what_misplaced_pinned_buffers_cost(cli, tmp_path):
    root = fixture_copy("handmade-gb200-numa", tmp_path / "root")
    write_process(root, 4300, "LOCAL_RANK=2\x00",
                  "ffff00000000 default file=/dev/zero\\040(deleted) dirty=1024 N0=1024 kernelpagesize_kB=64\n"
                  + UVM)
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(_probe_doc([(0, 115.0), (1, 330.0)])))
    p = json.loads(cli("--root", str(root), "audit", "4300", "--probe", str(probe), "--json").stdout)["processes"][0]
    assert p["pinned_host"]["cost"] == ("probe measured host-to-GPU copies at 330.0 GB/s from node 1 and "
                                        "115.0 GB/s from node 0")
    assert p["pinned_host"]["h2d_gbps_by_node"] == {"0": 115.0}
    assert any("330.0 GB/s from node 1" in r for r in p["reasons"])
    probe.write_text(json.dumps(_probe_doc([(1, 330.0)])))  # node 0 not measured: no figure is made up
    p = json.loads(cli("--root", str(root), "audit", "4300", "--probe", str(probe), "--json").stdout)["processes"][0]
    assert p["pinned_host"]["cost"] is None and p["pinned_host"]["h2d_gbps_by_node"] == {}
    probe.write_text("{not json")
    bad = cli("--root", str(root), "audit", "4300", "--probe", str(probe))
    assert bad.exit_code == 3 and "is not valid JSON" in bad.stderr and "Traceback" not in bad.stderr


def test_pinned_pages_of_a_real_cuda_process_moved_to_the_other_grace(cli, tmp_path):
    """The numa_maps of the real rank of fixture h100-job-2026-11-28 (CUDA 13, driver 580: its pin_memory()
    buffers are /dev/zero (deleted) mappings, all on node 0), those lines edited to say N1, as GPU0's rank on the
    GB200 tree: GPU0 hangs off node 0, so they are misplaced pinned buffers. Its /dev/nvidiactl lines, edited the
    same way, are the driver's memory and judge nothing."""
    import re

    real = (fixture_root(JOB) / "proc/578/numa_maps").read_text()
    moved = "\n".join(re.sub(r"\bN0=", "N1=", line) if "file=/dev/zero" in line else line
                      for line in real.splitlines()) + "\n"
    root = fixture_copy("handmade-gb200-numa", tmp_path / "root")
    write_process(root, 4301, "LOCAL_RANK=0\x00", moved)
    p = json.loads(cli("--root", str(root), "audit", "4301", "--json").stdout)["processes"][0]
    assert p["gpu"]["bdf"] == "0008:01:00.0" and p["home_nodes"] == [0]
    assert p["gpu_context"]["evidence"] == "it maps /dev/nvidia-uvm"  # no NVML record in this tree
    staged = 71233 * 4096  # the 256 MiB staging buffer, one of 2,113 pages and seven of 512
    assert p["pinned_host"]["off_nodes"] == [1] and p["pinned_host"]["off_node_bytes"] == staged
    assert p["pinned_host"]["bytes_by_node"] == {"1": staged}
    # 278 MiB of its own memory on the other Grace: remote memory above 20%, and named as pinned buffers
    assert p["verdict"] == "misplaced" and any(r.startswith("likely pinned host chunks") for r in p["reasons"])
    driver_only = "\n".join(re.sub(r"\bN0=", "N1=", line) if "file=/dev/nvidiactl" in line else line
                            for line in real.splitlines()) + "\n"
    write_process(root, 4302, "LOCAL_RANK=0\x00", driver_only)
    q = json.loads(cli("--root", str(root), "audit", "4302", "--json").stdout)["processes"][0]
    assert q["pinned_host"]["off_nodes"] == [] and q["gpu_driver_memory"]["nvidiactl"] == {"1": 70 << 20}
    assert not any(r.startswith("likely pinned host chunks") for r in q["reasons"])


# -- the real job of fixture h100-job-2026-11-28: a rank (578) and its two DataLoader workers --------------
JOB = "h100-job-2026-11-28"
BATCHES = ["7fe2ba400000", "7fe297800000", "7fe30dc00000", "7fe30de00000", "7fe30e800000", "7fe30ea00000",
           "7fe30f800000", "7fe314a37000"]  # the rank's smaller /dev/zero (deleted) mappings: pinned batches


def test_the_capture_s_rank_names_its_pinned_buffers_and_the_driver_s_memory(cli):
    root = str(fixture_root(JOB, archive=True))
    r = cli("--root", root, "audit", "578")
    assert r.exit_code == 0, r.stderr
    text = " ".join(r.stdout.split())  # sentences are wrapped at 100 columns
    assert ("likely pinned host memory: 278.3 MiB on node 0 (its GPU's node) in 9 chunk(s) — shared anonymous memory "
            "of a CUDA process, the way the CUDA host allocator maps its chunks (cudaHostAlloc, torch's pin_memory()) "
            "(NVML lists it as a compute process on GPU 0)") in text
    assert "256.0 MiB chunk at 7fe2c2000000 on node 0" in text and "8.3 MiB chunk at 7fe2ba400000 on node 0" in text
    assert all(f"chunk at {start} on node 0" in text for start in BATCHES)
    assert "buffer" not in text  # chunks, not buffers: a chunk serves one allocation or several
    assert "not confirmed: a plain mmap(MAP_SHARED|MAP_ANONYMOUS) of the same process looks the same" in text
    assert "lists every pinned range" not in text and "numatune.pinned_host_chunks()" in text
    assert "GPU driver memory: 72.0 MiB on node 0 (nvidia-uvm 2.0 MiB, nvidiactl 70.0 MiB): the driver's own" in text
    assert "cudaHostRegister" in text and "pinned (nvidiactl)" not in text
    doc = json.loads(cli("--root", root, "audit", "578", "--json").stdout)
    (p,) = doc["processes"]
    pinned = p["pinned_host"]
    assert pinned["bytes_by_node"] == {"0": 71233 * 4096} and pinned["off_nodes"] == []
    assert pinned["chunks"][0] == {"start": "7fe2c2000000", "bytes": 256 << 20, "page_size": 4096,
                                   "pages_by_node": {"0": 65536}}
    assert sorted(b["start"] for b in pinned["chunks"][1:]) == sorted(BATCHES) and pinned["chunk_count"] == 9
    assert pinned["how"].startswith("likely pinned: shared anonymous memory of a CUDA process")
    assert p["gpu_driver_memory"] == {"nvidia-uvm": {"0": 2 << 20}, "nvidiactl": {"0": 70 << 20}}
    assert p["role"] == "rank" and p["gpu"]["label"] == "GPU0" and p["verdict"] == "ok"


def test_the_capture_s_job_view_is_one_rank_with_two_workers(cli):
    root = str(fixture_root(JOB, archive=True))
    r = cli("--root", root, "audit", "--ranks")
    assert r.exit_code == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if "python3 train.py 25" in line]
    assert len(rows) == 3
    assert "│ rank " in rows[0] and "GPU0 0000:00:06.0 (node 0)" in rows[0]
    assert all("└ worker of 578 (dataloader)" in row and "GPU0" not in row for row in rows[1:])
    assert "1 rank(s), 2 worker(s), 0 misplaced" in r.stdout
    assert "256.0 MiB chunk at 7fe2c2000000 on node 0" in r.stdout and "nvidiactl 70.0 MiB" in r.stdout
    doc = json.loads(cli("--root", root, "audit", "--ranks", "--json").stdout)
    assert doc["job"] == {"launchers": [], "ranks": [{"rank": 0, "pid": 578, "helper_processes": 2,
                                                      "workers": [613, 614]}],
                          "jobs": [{"job": 578, "launchers": [], "ranks": [578]}]}  # torchrun (541) not captured
    assert [(p["pid"], p["role"], p["rank_pid"], p["kind"], p["job"]) for p in doc["processes"]] == [
        (578, "rank", 578, None, 578), (613, "worker", 578, "dataloader", 578), (614, "worker", 578, "dataloader", 578)]
    rank, *workers = doc["processes"]
    assert rank["gpu"]["label"] == "GPU0" and rank["pinned_host"]["bytes_by_node"] == {"0": 71233 * 4096}
    for w in workers:  # no context: no GPU of their own, no pinned buffers, inside the rank's CPUs 0-5 and node 0
        assert w["gpu"] is None and w["gpu_context"] is None and w["pinned_host"] is None
        assert w["worker"]["rank_cpus"] == [0, 1, 2, 3, 4, 5] and w["worker"]["rank_nodes"] == [0]
        assert w["worker"]["reason"] is None and w["verdict"] == "ok"
        assert any("no GPU context of its own" in n for n in w["notes"])
    prom = cli("--root", root, "audit", "--ranks", "-f", "prometheus").stdout
    assert "numatune_audit_processes 3\n" in prom
    # pinned memory as metrics: the rank's 278.3 MiB in 9 chunks, none off its GPU's node; the driver's 70 MiB of
    # /dev/nvidiactl charged to the rank alone, never to a worker row
    rank = 'pid="578",rank="0",comm="python3",role="rank"'
    assert f'numatune_process_pinned_host_bytes{{{rank},node="0"}} 291770368\n' in prom
    assert f'numatune_process_pinned_host_chunks{{{rank}}} 9\n' in prom
    assert f'numatune_process_pinned_host_off_node_bytes{{{rank}}} 0\n' in prom
    assert f'numatune_process_pinned_host_cache_reuse{{{rank}}} 0\n' in prom
    driver = [line for line in prom.splitlines() if line.startswith("numatune_process_gpu_driver_bytes{")]
    assert driver == [f'numatune_process_gpu_driver_bytes{{{rank},device="nvidia-uvm",node="0"}} 2097152',
                      f'numatune_process_gpu_driver_bytes{{{rank},device="nvidiactl",node="0"}} 73400320']


def test_the_rank_s_driver_memory_is_charged_to_the_rank_only(cli):
    """The capture's workers map the rank's 27 /dev/nvidiactl mappings (70 MiB, numa_maps `mapmax=3`: the same pages
    in three processes): each worker row used to count them again. Now they are the rank's alone: out of the
    worker's memory by node, by kind and by policy, named as inherited and charged to PID 578."""
    root = str(fixture_root(JOB, archive=True))
    doc = json.loads(cli("--root", root, "audit", "--ranks", "--json").stdout)
    rank, *workers = doc["processes"]
    assert rank["gpu_driver_memory"]["nvidiactl"] == {"0": 70 << 20} and rank["gpu_driver_memory_inherited"] is None
    raw = (fixture_root(JOB) / "proc/613/numa_maps").read_text()
    mapped = sum(int(t[3:]) * 4096 for line in raw.splitlines() if "file=/dev/nvidiactl" in line
                 for t in line.split() if t.startswith("N0="))
    assert mapped == 70 << 20
    for w in workers:
        assert w["gpu_driver_memory"] == {}
        assert w["gpu_driver_memory_inherited"] == {"charged_to": 578, "by_device": {"nvidiactl": {"0": 70 << 20}}}
        assert w["memory_total"] == sum(w["memory_by_node"].values()) == 458452992  # 531853312 in numa_maps
        assert sum(u["bytes"] for u in w["policies"]) == w["memory_total"]
    text = cli("--root", root, "audit", "--ranks").stdout
    rows = [line for line in text.splitlines() if "└ worker of 578" in line]
    assert len(rows) == 2 and all("0: 437.2 MiB" in row for row in rows)
    one = " ".join(cli("--root", root, "audit", "613").stdout.split())
    assert "GPU driver memory inherited from rank PID 578 (nvidiactl 70.0 MiB): charged there, not counted here" in one


def test_a_worker_audited_alone_is_judged_against_its_rank(cli):
    root = str(fixture_root(JOB, archive=True))
    (p,) = json.loads(cli("--root", root, "audit", "613", "--json").stdout)["processes"]
    assert p["role"] == "worker" and p["rank_pid"] == 578 and p["gpu"] is None
    assert p["worker"]["rank_cpus"] == [0, 1, 2, 3, 4, 5]
    assert "worker of 578" not in cli("--root", root, "audit", "613").stdout  # one process: the detail


def _widened(tmp_path):
    """The capture with worker 613 as bind_worker() left it in the same job: its CPUs 0-15, the whole node."""
    root = fixture_copy(JOB, tmp_path)
    for status in (root / "proc/613/status", *(root / "proc/613/task").glob("*/status")):
        status.write_text(status.read_text().replace("Cpus_allowed_list:\t0-5", "Cpus_allowed_list:\t0-15"))
    return root


def test_a_worker_widened_past_its_rank_is_nt408_in_audit_and_check(cli, tmp_path):
    root = str(_widened(tmp_path))
    doc = json.loads(cli("--root", root, "audit", "--ranks", "--json").stdout)
    w = next(p for p in doc["processes"] if p["pid"] == 613)
    assert w["worker"]["outside_cpus"] == list(range(6, 16)) and w["verdict"] == "warning"
    assert w["worker"]["reason"].startswith("a worker of rank PID 578 (LOCAL_RANK=0) outside its rank's binding: "
                                            "it may run on CPUs 6-15")
    assert w["fix"]["taskset"] == "taskset -a -p -c 0-5 613"
    assert "bind_worker" not in w["worker"]["fix"] and "bind within the rank's CPUs 0-5" in w["worker"]["fix"]
    assert next(p for p in doc["processes"] if p["pid"] == 614)["verdict"] == "ok"
    text = cli("--root", root, "audit", "--ranks").stdout
    assert "PID 613 warning" in text and "taskset -a -p -c 0-5 613" in text
    check = json.loads(cli("--root", root, "check", "--pid", "613", "--json").stdout)
    described = [c["description"] for c in check["checks"] if c["group"] == "audit"]
    assert any("NT408" in json.dumps(c) for c in check["checks"]), described


def test_inherited_gpu_descriptors_give_a_worker_no_gpu(cli, tmp_path):
    """The links the fixture leaves out, put back: the workers hold /dev/nvidia0 open (inherited across fork)."""
    import os

    root = fixture_copy(JOB, tmp_path)
    for pid in (578, 613, 614):
        os.symlink("/dev/nvidia0", root / f"proc/{pid}/fd/23")
        os.symlink("/dev/nvidiactl", root / f"proc/{pid}/fd/24")
    doc = json.loads(cli("--root", str(root), "audit", "--ranks", "--json").stdout)
    rank, *workers = doc["processes"]
    assert rank["gpu"]["label"] == "GPU0"
    for w in workers:
        assert w["role"] == "worker" and w["gpu"] is None and [g["source"] for g in w["gpus_open"]] == [
            "fd /dev/nvidia0"]
    text = cli("--root", str(root), "audit", "--ranks").stdout
    assert text.count("- (inherited descriptors, no context)") == 2


def test_a_pid_missing_from_a_snapshot_names_the_pids_it_holds(cli):
    """`ps -p PID` cannot help with a saved root: say which processes the snapshot does hold."""
    r = cli("--root", str(fixture_root("vm-cxl")), "audit", "1")
    assert r.exit_code == 6 and "PID 1 is not in" in r.stderr and "ps -p" not in r.stderr, r.stderr
    assert "snapshot --pid" in r.stderr


def test_sample_off_a_terminal_writes_nothing_to_stderr(child):
    """The --sample bar is for a terminal: with stderr a file, rich's stopped bar left a blank line there."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "numatune", "audit", str(child.pid), "--sample", "0.2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1) and r.stdout, r.stderr
    assert "\n\n" not in "\n" + r.stderr and not r.stderr.startswith("\n"), repr(r.stderr)


def test_children_ends_on_a_ppid_cycle_and_a_self_parented_process(cli, tmp_path):
    """A saved root whose parent links run in a circle, and a process that names itself its parent: `--children`
    and `--ranks` walk each process once and answer (it grew without end: 640 MB in 20 s)."""
    root = _saved_tree(tmp_path)
    for pid, ppid, env in ((5000, 5001, "LOCAL_RANK=0\x00"), (5001, 5000, "LOCAL_RANK=0\x00"), (5002, 5002, "")):
        proc = write_process(root, pid, env)
        for f in (proc / "stat", proc / "task" / str(pid) / "stat"):
            f.write_text(f.read_text().replace(" S 1 ", f" S {ppid} ", 1))
    for args in (("--children", "5000"), ("--children", "5002"), ("--ranks",)):
        r = cli("--root", str(root), "audit", *args, "--json")
        assert r.exit_code == 0, (args, r.stderr)
    doc = json.loads(cli("--root", str(root), "audit", "--children", "5000", "--json").stdout)
    assert [p["pid"] for p in doc["processes"]] == [5001]
    ranks = json.loads(cli("--root", str(root), "audit", "--ranks", "--json").stdout)
    assert {p["pid"]: (p["role"], p["rank_pid"]) for p in ranks["processes"]} == {
        4242: ("rank", 4242), 5000: ("rank", 5000), 5001: ("worker", 5000)}
