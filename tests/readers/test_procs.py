"""Per-process readers: numa_maps/stat/sched/environ parsing, real processes against numastat, perf plumbing."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import numatune.system.host as host_module
from numatune.errors import ParseError, PermissionDenied, PmuUnavailable, ProcessGone, describe_failure
from numatune.readers import perf
from numatune.readers.procs import (
    ENVIRON_KEYS,
    descendants,
    local_rank,
    parse_cgroup,
    parse_environ,
    parse_numa_maps,
    parse_sched_numa_faults,
    parse_stat,
    parse_vmstat,
    read_process,
    unescape_octal,
)
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_copy, fixture_root, write_process

MIB = 1024 * 1024

# -- hand-made numa_maps text (not captured from a kernel; shaped after fs/proc/task_mmu.c) ----------
HAND_MADE_MAPS = textwrap.dedent("""\
    5653f1f07000 default heap anon=412 dirty=412 active=0 N0=412 kernelpagesize_kB=4
    7ffd8ca34000 default stack anon=10 dirty=10 active=1 N0=10 kernelpagesize_kB=4
    7f24b7c18000 default file=/usr/lib/locale/C.utf8/LC_CTYPE mapped=32 mapmax=14 N0=32 kernelpagesize_kB=4
    7f24b7c40000 prefer (many):0-1 anon=100 dirty=100 N0=60 N1=40 kernelpagesize_kB=4
    7f24b7c80000 weighted interleave:0,2 anon=300 dirty=300 N0=200 N2=100 kernelpagesize_kB=4
    7f24b7d00000 bind=static:1 anon=50 dirty=50 N1=50 kernelpagesize_kB=4
    7f24b7e00000 default file=/tmp/a\\040b\\075c.txt\\040(deleted) mapped=2 N1=2 kernelpagesize_kB=4
    7f24b7f00000 default file=/dev/zero\\040(deleted) dirty=8 N0=8 kernelpagesize_kB=4
    7f24b8000000 default file=/SYSV00000000\\040(deleted) dirty=4 N1=4 kernelpagesize_kB=4
    7f24c0000000 default file=/anon_hugepage\\040(deleted) huge anon=3 dirty=3 N0=2 N1=1 kernelpagesize_kB=2048
    7f24d0000000 default
    7f24d1000000 default file=/usr/lib/libc.so.6
    7f24d2000000 interleave=relative:0-1 anon=7 dirty=7 N0=4 N1=3 kernelpagesize_kB=4
""")


def test_parse_numa_maps_hand_made_traps():
    mem = parse_numa_maps(HAND_MADE_MAPS)
    k4, k2m = 4096, 2 * MIB
    assert mem.mappings == 13 and mem.malformed_lines == 0
    assert mem.by_node == {
        0: (412 + 10 + 32 + 60 + 200 + 8 + 4) * k4 + 2 * k2m,
        1: (40 + 50 + 2 + 4 + 3) * k4 + 1 * k2m,
        2: 100 * k4,  # a CPU-less node named only by N2=
    }
    assert mem.by_kind["heap"] == {0: 412 * k4}
    assert mem.by_kind["stack"] == {0: 10 * k4}
    assert mem.by_kind["hugetlb"] == {0: 2 * k2m, 1: k2m}  # counted in huge pages
    assert mem.by_kind["shm"] == {0: 8 * k4, 1: 4 * k4}  # /dev/zero and SysV
    assert mem.by_kind["file"] == {0: 32 * k4, 1: 2 * k4}
    policies = {p.policy: (p.mappings, p.bytes) for p in mem.policies}
    assert policies["prefer (many):0-1"] == (1, 100 * k4)
    assert policies["weighted interleave:0,2"] == (1, 300 * k4)
    assert policies["bind=static:1"] == (1, 50 * k4)
    assert policies["interleave=relative:0-1"] == (1, 7 * k4)
    assert policies["default"][0] == 9  # no-page lines still count as mappings


def test_parse_numa_maps_malformed_and_short_addresses():
    text = (
        "400000 default file=/usr/bin/old anon=1 dirty=1 N0=1 kernelpagesize_kB=4\n"  # non-PIE: short address
        "7f0000000000 default anon=2 dirty=2 N0=two kernelpagesize_kB=4\n"
        "7f0000001000 default anon=3 dirty=3 N1=3 kernelpagesize_kB=x\n"
        "1000 weighted interleave:0-1 anon=5 N0=5 kernelpagesize_kB=4\n"
        "\n"
    )
    mem = parse_numa_maps(text)
    assert mem.malformed_lines == 2
    assert mem.by_node == {0: 6 * 4096}
    assert {p.policy for p in mem.policies} == {"default", "weighted interleave:0-1"}


def test_parse_numa_maps_old_kernel_without_pagesize():
    mem = parse_numa_maps("7f0000000000 default anon=2 dirty=2 N0=2\n", page_kib=64)
    assert mem.by_node == {0: 2 * 64 * 1024}


def test_parse_numa_maps_many_identical_lines_aggregate():
    text = "".join(f"7f{i:010x} default anon=1 dirty=1 N0=1 kernelpagesize_kB=4\n" for i in range(5000))
    mem = parse_numa_maps(text)
    assert mem.mappings == 5000 and mem.by_node == {0: 5000 * 4096}


def test_unescape_octal():
    assert unescape_octal(r"/tmp/a\040b\075c.txt\040(deleted)") == "/tmp/a b=c.txt (deleted)"
    assert unescape_octal("plain") == "plain"
    assert unescape_octal("trail\\04") == "trail\\04"


def test_parse_stat_comm_with_parens_and_field_39():
    fields = ["S", "1", "2", "3"] + ["0"] * 32 + ["7"] + ["0"] * 10  # fields 3..; index 36 = field 39
    text = "1234 (evil) (name x) " + " ".join(fields)
    st = parse_stat(text)
    assert st["comm"] == "evil) (name x"
    assert st["state"] == "S" and st["ppid"] == 1 and st["cpu"] == 7


def test_parse_sched_numa_faults_sums_private_and_shared():
    text = textwrap.dedent("""\
        total_numa_faults                            :                  120
        current_node=0, numa_group_id=0
        numa_faults node=0 task_private=10 task_shared=5 group_private=0 group_shared=0
        numa_faults node=1 task_private=90 task_shared=15 group_private=0 group_shared=0
    """)
    assert parse_sched_numa_faults(text) == {0: 15, 1: 105}


def test_parse_vmstat_and_cgroup():
    assert parse_vmstat("numa_hint_faults 10\nnuma_hint_faults_local 7\n") == {
        "numa_hint_faults": 10, "numa_hint_faults_local": 7}
    assert parse_cgroup("0::/slurm/job_1/step_0\n") == "/slurm/job_1/step_0"
    assert parse_cgroup("12:cpu,cpuacct:/a\n5:cpuset:/job9\n") == "/job9"


def test_parse_environ_keeps_only_named_keys():
    data = "\x00".join(["HOME=/root", "AWS_SECRET_ACCESS_KEY=hunter2", "LOCAL_RANK=3", "CUDA_VISIBLE_DEVICES=4,5", ""])
    env = parse_environ(data)
    assert env == {"LOCAL_RANK": "3", "CUDA_VISIBLE_DEVICES": "4,5"}
    assert local_rank(env) == (3, "LOCAL_RANK")
    assert local_rank({"SLURM_LOCALID": "2"}) == (2, "SLURM_LOCALID")
    assert "AWS_SECRET_ACCESS_KEY" not in ENVIRON_KEYS


# -- real processes on this machine ----------------------------------------------------------------
CHILD = textwrap.dedent("""\
    import mmap, os, sys
    size = int(sys.argv[1]) * 1024 * 1024
    mode = sys.argv[2]
    if mode == "hugetlb":
        fd = os.memfd_create("numatune-test", os.MFD_HUGETLB)
        os.ftruncate(fd, size)
        m = mmap.mmap(fd, size)
    else:
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if mode == "thp":
            m.madvise(mmap.MADV_HUGEPAGE)
    step = 2 * 1024 * 1024 if mode == "hugetlb" else 4096
    for off in range(0, size, step):
        m[off] = 1
    print("ready", flush=True)
    sys.stdin.readline()
""")


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def spawn(mib: int = 64, mode: str = "anon", env: dict[str, str] | None = None) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(mib), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        proc.wait()
        pytest.skip(f"child could not allocate {mib} MiB ({mode})")
    return proc


def finish(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.stdin.write("\n")
        proc.stdin.flush()
    proc.wait(timeout=10)


def numastat_nodes(pid: int) -> dict[int, float]:
    """Per-node Total (MB) from `numastat -p PID`."""
    if shutil.which("numastat") is None:
        pytest.skip("numastat not installed (apt-get install -y numactl)")
    out = subprocess.run(["numastat", "-p", str(pid)], capture_output=True, text=True, check=True).stdout
    header = next(line for line in out.splitlines() if "Node" in line and "Total" in line)
    nodes = [int(n) for n in re.findall(r"Node (\d+)", header)]
    total = next(line for line in out.splitlines() if line.startswith("Total"))
    values = [float(v) for v in total.split()[1:]]
    return dict(zip(nodes, values[: len(nodes)], strict=True))


def _check_against_numastat(pid: int, kind: str, at_least: int) -> None:
    host = Host.open("/")
    info = read_process(host, pid, read_topology(host, pci_ids=None))
    ref = numastat_nodes(pid)
    ours = {n: b / MIB for n, b in info.memory.by_node.items()}
    for node in set(ref) | set(ours):
        assert abs(ours.get(node, 0.0) - ref.get(node, 0.0)) <= 0.02, (node, ours, ref)
    assert sum(info.memory.by_kind.get(kind, {}).values()) >= at_least


def test_real_anon_64mib_matches_numastat():
    child = spawn(64, "anon")
    try:
        _check_against_numastat(child.pid, "anon", 64 * MIB)
    finally:
        finish(child)


def test_real_thp_64mib_matches_numastat():
    thp = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    if "[never]" in thp or not thp:
        pytest.skip("transparent huge pages are disabled on this machine")
    child = spawn(64, "thp")
    try:
        rollup = _read(f"/proc/{child.pid}/smaps_rollup")
        huge_kib = int(re.search(r"AnonHugePages:\s+(\d+)", rollup).group(1))
        if huge_kib == 0:
            pytest.skip("THP allowed but the kernel gave no huge pages to the child")
        _check_against_numastat(child.pid, "anon", 64 * MIB)
    finally:
        finish(child)


@pytest.fixture
def hugepages():
    path = "/proc/sys/vm/nr_hugepages"
    try:
        before = int(_read(path))
        if before < 40:
            with open(path, "w") as fh:
                fh.write(str(before + 40))
        if int(_read("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") or 0) < 32:
            raise OSError("not enough free 2 MiB huge pages")
    except OSError as exc:
        pytest.skip(f"cannot reserve 2 MiB huge pages: {exc}")
    yield
    with open(path, "w") as fh:
        fh.write(str(before))


def test_real_hugetlb_counts_huge_pages(hugepages):
    child = spawn(64, "hugetlb")
    try:
        _check_against_numastat(child.pid, "hugetlb", 64 * MIB)
    finally:
        finish(child)


def test_real_threads_status_and_environ_filtered():
    env = dict(os.environ, LOCAL_RANK="5", MY_SECRET_TOKEN="hunter2")
    child = spawn(8, "anon", env=env)
    try:
        host = Host.open("/")
        info = read_process(host, child.pid, read_topology(host, pci_ids=None))
        assert info.pid == child.pid and info.threads
        assert all(t.cpu is not None and t.allowed_cpus for t in info.threads)
        assert info.cpus_allowed == tuple(sorted(os.sched_getaffinity(child.pid)))
        assert info.rank == 5 and info.rank_source == "LOCAL_RANK"
        assert "hunter2" not in repr(info) and "MY_SECRET_TOKEN" not in info.environ
        assert info.cmdline[0] == sys.executable
    finally:
        finish(child)


def test_missing_pid_is_process_gone():
    with pytest.raises(ProcessGone, match="no process with PID"):
        read_process(Host.open("/"), 2**22 + 12345)


def test_process_exiting_mid_read_is_process_gone():
    child = spawn(4, "anon")

    class KillingHost(Host):
        """Kills and reaps the child when its numa_maps is about to be read."""

        def read_text(self, logical: str) -> str:
            if logical == f"/proc/{child.pid}/numa_maps":
                child.kill()
                child.wait()
            return super().read_text(logical)

    with pytest.raises(ProcessGone, match="exited while being read"):
        read_process(KillingHost(), child.pid)


def test_malformed_stat_is_bad_input_not_a_vanished_process(tmp_path):
    """A saved tree whose /proc/PID/stat is truncated (hand-made, labelled): exit 3, naming the file."""
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (tmp_path / "sys" / "devices" / "system" / "cpu").mkdir(parents=True)
    (proc / "stat").write_text("4242 (python) S 1\n")
    (proc / "status").write_text("Name:\tpython\n")
    with pytest.raises(ParseError, match="/proc/4242/stat: too few fields") as exc:
        read_process(Host.open(str(tmp_path)), 4242)
    assert describe_failure(exc.value)[2] == 3


def test_permission_denied_is_reported(monkeypatch):
    child = spawn(4, "anon")
    real_open = open

    def denying_open(path, *args, **kwargs):
        if str(path).endswith("/numa_maps"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(host_module, "open", denying_open, raising=False)
    try:
        with pytest.raises(PermissionDenied, match=f"/proc/{child.pid}/numa_maps"):
            read_process(Host.open("/"), child.pid)
    finally:
        monkeypatch.undo()
        finish(child)


def test_kernel_thread_is_reported_as_such():
    if not os.path.exists("/proc/2/stat") or "kthreadd" not in _read("/proc/2/stat"):
        pytest.skip("no kthreadd at PID 2 (not the host's PID namespace)")
    info = read_process(Host.open("/"), 2)
    assert info.kernel_thread and info.memory.total == 0


# -- perf_event_open plumbing ------------------------------------------------------------------------
def test_pack_attr_layout():
    local, remote = perf.generic_events()
    raw = perf.pack_attr(remote)
    assert len(raw) == perf.PERF_ATTR_SIZE_VER5
    assert int.from_bytes(raw[0:4], "little") == perf.PERF_TYPE_HW_CACHE
    assert int.from_bytes(raw[4:8], "little") == perf.PERF_ATTR_SIZE_VER5
    assert int.from_bytes(raw[8:16], "little") == 0x10006  # NODE | READ << 8 | MISS << 16
    assert int.from_bytes(raw[40:48], "little") & 1  # disabled until the window starts
    assert local.config == 6


def test_events_for_amd_zen_are_raw():
    (local, remote), label = perf.events_for_cpu("AuthenticAMD", 0x19)
    assert (local.type, local.config, remote.config) == (perf.PERF_TYPE_RAW, 0x0844, 0x4044)
    (local, remote), _ = perf.events_for_cpu("AuthenticAMD", 0x17)
    assert (local.config, remote.config) == (0x0843, 0x4043)
    (_, remote), label = perf.events_for_cpu("GenuineIntel", 6)
    assert remote.name == "node-load-misses" and "generic" in label


@pytest.mark.parametrize(
    ("err", "root", "hyper", "expect"),
    [
        (errno.EACCES, False, False, "perf_event_paranoid is 2 and you are not root"),
        (errno.ENOENT, True, True, "not supported in this VM"),
        (errno.EOPNOTSUPP, True, False, "not supported by this CPU"),
    ],
)
def test_open_pmu_explains_failures(err, root, hyper, expect, tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/perf_event_paranoid").write_text("2\n")
    flags = "fpu hypervisor" if hyper else "fpu"
    (tmp_path / "proc/cpuinfo").write_text(f"vendor_id\t: GenuineIntel\ncpu family\t: 6\nflags\t\t: {flags}\n")
    class LiveTree(Host):  # a tree, but live enough to reach the (fake) syscall
        @property
        def is_live(self) -> bool:
            return True

    live = LiveTree(tmp_path, "test")
    with pytest.raises(PmuUnavailable, match=expect):
        perf.open_pmu(live, {1: [1]}, syscall=lambda attr, tid: -err, euid=0 if root else 1000)


def test_open_pmu_refuses_saved_trees(tmp_path):
    (tmp_path / "proc").mkdir()
    with pytest.raises(PmuUnavailable, match="live node"):
        perf.open_pmu(Host.open(tmp_path), {1: [1]})


def test_open_pmu_live_gives_counts_or_a_note():
    """On a machine with a PMU this counts the test's own loads; in a VM without one it says so."""
    try:
        session = perf.open_pmu(Host.open("/"), {os.getpid(): [os.getpid()]})
    except PmuUnavailable as exc:
        assert str(exc)
        return
    session.start()
    data = bytearray(64 * MIB)
    for i in range(0, len(data), 4096):
        data[i] = 1
    counts = session.stop()
    assert os.getpid() in counts and all(v >= 0 for v in counts[os.getpid()])



# Hand-made (not captured from a kernel): a bind and an interleave with pages off the nodes they name.
OFF_POLICY_MAPS = textwrap.dedent("""\
    7f0000000000 bind:3 anon=300 dirty=300 N1=100 N3=200 kernelpagesize_kB=4
    7f0000400000 interleave:0-1 anon=10 dirty=10 N0=5 N1=4 N2=1 kernelpagesize_kB=4
    7f0000800000 weighted interleave:0,2 anon=6 dirty=6 N0=4 N2=2 kernelpagesize_kB=4
""")


def test_parse_numa_maps_per_mapping_from_the_same_parse():
    mem = parse_numa_maps(HAND_MADE_MAPS + OFF_POLICY_MAPS, per_mapping=True)
    assert parse_numa_maps(HAND_MADE_MAPS).by_mapping is None  # only when asked for
    maps = {m.start: m for m in mem.by_mapping}
    assert len(maps) == mem.mappings == 16
    heap = maps[0x5653F1F07000]
    assert (heap.kind, heap.name, heap.policy, heap.pages, heap.off_policy_pages) == ("heap", "", "default",
                                                                                       {0: 412}, None)
    assert heap.bytes == 412 * 4096
    f = maps[0x7F24B7E00000]
    assert (f.kind, f.name) == ("file", "a b=c.txt (deleted)")  # unescaped basename
    assert maps[0x7F24B7F00000].kind == "shm" and maps[0x7F24B8000000].name == "SYSV00000000 (deleted)"
    huge = maps[0x7F24C0000000]
    assert (huge.kind, huge.page_size, huge.bytes) == ("hugetlb", 2 * MIB, 3 * 2 * MIB)
    assert maps[0x7F24B7D00000].off_policy_pages == 0  # bind=static:1, all on node 1
    assert maps[0x7F24D2000000].off_policy_pages is None  # =relative: node ids relative to the cpuset
    assert maps[0x7F24B7C40000].off_policy_pages == 0  # prefer (many):0-1
    assert maps[0x7F24B7C80000].off_policy_pages == 0  # weighted interleave:0,2 on 0 and 2
    assert maps[0x7F0000000000].policy == "bind:3" and maps[0x7F0000000000].off_policy_pages == 100
    assert maps[0x7F0000400000].off_policy_pages == 1
    assert maps[0x7F0000800000].off_policy_pages == 0
    assert maps[0x7F24D0000000].pages == {} and maps[0x7F24D0000000].bytes == 0


def test_per_mapping_skips_malformed_lines_and_keeps_short_addresses():
    text = (
        "400000 default file=/usr/bin/old anon=1 dirty=1 N0=1 kernelpagesize_kB=4\n"
        "7f0000000000 default anon=2 dirty=2 N0=two kernelpagesize_kB=4\n"
        "\n"
    )
    mem = parse_numa_maps(text, per_mapping=True)
    assert [(m.start, m.name) for m in mem.by_mapping] == [(0x400000, "old")]


def test_fold_mappings_largest_first_and_smaller_folded():
    from numatune.model.process import fold_mappings

    mem = parse_numa_maps(OFF_POLICY_MAPS, per_mapping=True)
    shown, (count, total, by_node, off) = fold_mappings(mem.by_mapping, 10 * 4096)
    assert [m.start for m in shown] == [0x7F0000000000, 0x7F0000400000]
    assert (count, total, by_node, off) == (1, 6 * 4096, {0: 4 * 4096, 2: 2 * 4096}, 0)
    shown, folded = fold_mappings(mem.by_mapping, 0)
    assert len(shown) == 3 and folded[0] == 0


def test_per_mapping_on_this_process_real_numa_maps_adds_up():
    """Real kernel lines (this test process's own numa_maps): the mappings add up to the totals."""
    with open("/proc/self/numa_maps") as fh:
        text = fh.read()
    mem = parse_numa_maps(text, per_mapping=True)
    assert mem.malformed_lines == 0 and len(mem.by_mapping) == mem.mappings == text.count("\n")
    by_node: dict[int, int] = {}
    for m in mem.by_mapping:
        for node, pages in m.pages.items():
            by_node[node] = by_node.get(node, 0) + pages * m.page_size
    assert by_node == mem.by_node and sum(m.bytes for m in mem.by_mapping) == mem.total
    starts = [int(line.split(" ", 1)[0], 16) for line in text.splitlines()]
    assert [m.start for m in mem.by_mapping] == starts  # file order, one per line
    assert {"heap", "stack", "file"} <= {m.kind for m in mem.by_mapping}
    assert any(m.name.startswith(("python", "libpython")) for m in mem.by_mapping)


def test_the_process_table_keeps_the_rank_variables_and_a_bounded_command_line(tmp_path, monkeypatch):
    """Any launcher's variable is kept (torchrun, Slurm, Open MPI), nothing else of the environment; an environment
    that cannot be read is empty; the command line is cut to MAX_ARGS arguments of MAX_ARG characters."""
    from numatune.readers.procs import MAX_ARG, MAX_ARGS, process_table

    root = fixture_copy("intel-xeon-L5640-2node", tmp_path)
    for pid, env in ((10, "LOCAL_RANK=0\x00"), (11, "SLURM_LOCALID=3\x00"), (12, "OMPI_COMM_WORLD_LOCAL_RANK=1\x00"),
                     (13, "HOME=/root\x00SECRET=x\x00"), (15, "LOCAL_RANK=2\x00")):
        write_process(root, pid, env)
    (root / "proc/15/cmdline").write_text("\x00".join(["python", "x" * 5000, *map(str, range(100))]) + "\x00")
    host = Host(str(root))
    table = process_table(host)
    assert {pid: dict(table[pid].environ) for pid in (10, 11, 12, 13)} == {
        10: {"LOCAL_RANK": "0"}, 11: {"SLURM_LOCALID": "3"}, 12: {"OMPI_COMM_WORLD_LOCAL_RANK": "1"}, 13: {}}
    assert len(table[15].cmdline) == MAX_ARGS and table[15].cmdline[1] == "x" * MAX_ARG
    assert table[10].cmdline == ("python", "train.py") and table[10].comm == "python" and table[10].ppid == 1
    real = Host.read_text

    def denied(self, path):
        if path == "/proc/11/environ":
            raise PermissionDenied(f"{path}: permission denied")
        return real(self, path)

    monkeypatch.setattr(Host, "read_text", denied)
    assert process_table(host)[11].environ == {}


def test_descendants_visit_each_process_once_through_a_ppid_cycle_or_a_self_parent():
    """A PPid cycle (a saved root can say anything) or a process that is its own parent: each PID once, and the walk
    ends (it grew without end: 640 MB in 20 s)."""
    table = {1: (0, "init", "init"), 5: (1, "a", "a"), 6: (7, "b", "b"), 7: (6, "c", "c"), 8: (8, "d", "d"),
             9: (5, "e", "e")}
    assert descendants(table, 1) == [5, 9]
    assert descendants(table, 6) == [7]  # 6's child 7 names 6 as its parent: the walk stops at 6
    assert descendants(table, 8) == []  # its own parent only


def test_gpu_device_files_are_driver_memory_and_shared_anonymous_mappings_are_summed():
    from numatune.readers.procs import gpu_device, parse_numa_maps

    assert [gpu_device(f) for f in ("/dev/nvidiactl", "/dev/nvidia3", "/dev/nvidia-uvm", "/dev/kfd",
                                    "/dev/dri/renderD129", "/dev/shm/x", "/dev/nvidia-caps/nvidia-cap1",
                                    "/dev/zero\\040(deleted)")] == [
        "nvidiactl", "nvidia3", "nvidia-uvm", "kfd", "renderD129", None, None, None]
    mem = parse_numa_maps("7f0000000000 default file=/dev/kfd dirty=10 N1=10 kernelpagesize_kB=4\n"
                          "7f1000000000 default file=/dev/dri/renderD128 N0=5 N1=5 kernelpagesize_kB=4\n"
                          "7f1800000000 default file=/dev/nvidia-uvm\n"
                          "7f2000000000 default anon=7 N0=7 kernelpagesize_kB=4\n"
                          "7f3000000000 bind:1 file=/dev/zero\\040(deleted) dirty=3 N1=3 kernelpagesize_kB=4\n"
                          "7f4000000000 bind:1 file=/dev/zero\\040(deleted) dirty=3 N1=3 kernelpagesize_kB=4\n"
                          "7f5000000000 default file=/dev/zero\\040(deleted)\n")
    assert mem.driver == {"kfd": {1: 40960}, "renderD128": {0: 20480, 1: 20480}}
    assert mem.gpu_maps == ("kfd", "nvidia-uvm", "renderD128")  # mapped, resident or not
    shared = mem.shared_anon  # three mappings, two of them resident (the chunks), kept with their address
    assert (shared.mappings, shared.resident, dict(shared.by_node), shared.bytes) == (3, 2, {1: 24576}, 24576)
    assert [(m.start, m.policy, dict(m.pages), m.bytes) for m in shared.largest] == [
        (0x7f3000000000, "bind:1", {1: 3}, 12288), (0x7f4000000000, "bind:1", {1: 3}, 12288)]
    assert mem.by_kind["shm"] == {1: 24576}  # still shm in the split by kind
    assert mem.by_node == {0: 20480 + 28672, 1: 61440 + 24576}
    assert mem.driver_policies == {"default": 40960 + 40960}
    none = parse_numa_maps("7f2000000000 default anon=7 N0=7 kernelpagesize_kB=4\n").shared_anon
    assert (none.mappings, none.resident, none.largest) == (0, 0, ())


def test_past_the_largest_chunks_shared_anonymous_mappings_are_counted_not_kept():
    """MAX_CHUNKS mappings are kept (the largest; address order among equals), the rest only summed."""
    from numatune.model.process import MAX_CHUNKS
    from numatune.readers.procs import parse_numa_maps

    n = MAX_CHUNKS + 100
    text = "".join(f"7f{i:06x}00000 bind:{i % 2} file=/dev/zero\\040(deleted) N{i % 2}={1 + (i == 7)} "
                   "kernelpagesize_kB=4\n" for i in range(n))
    shared = parse_numa_maps(text).shared_anon
    assert (shared.mappings, shared.resident, len(shared.largest)) == (n, n, MAX_CHUNKS)
    assert shared.bytes == (n + 1) * 4096 and shared.by_node == {0: (n // 2) * 4096, 1: (n // 2 + 1) * 4096}
    assert shared.largest[0].start == 0x7f00000700000 and shared.largest[0].bytes == 8192  # the one of 2 pages
    assert [m.start for m in shared.largest[1:4]] == [0x7f00000000000, 0x7f00000100000, 0x7f00000200000]


JOB = "h100-job-2026-11-28"  # a real job: rank 578 (CUDA context), DataLoader workers 613 and 614


def test_the_capture_s_rank_holds_a_cuda_context_and_its_workers_only_inherited_mappings():
    """The real numa_maps of a rank and its DataLoader worker (fixture h100-job-2026-11-28): the rank's 256 MiB
    staging buffer and pinned batches are its shared anonymous mappings; the worker inherited them without pages,
    and inherited the /dev/nvidiactl mappings but maps no /dev/nvidia-uvm."""
    from numatune.readers.procs import read_process
    from numatune.readers.topology import read_topology

    host = Host.open(fixture_root(JOB))
    topo = read_topology(host)
    rank = read_process(host, 578, topo)
    assert rank.gpu_context.runtime == "CUDA" and "NVML" in rank.gpu_context.evidence
    assert rank.memory.driver == {"nvidia-uvm": {0: 2 << 20}, "nvidiactl": {0: 70 << 20}}
    sizes = [m.bytes for m in rank.memory.shared_anon.largest]
    assert sizes == [256 << 20, 2113 * 4096] + [2 << 20] * 7 and rank.memory.shared_anon.resident == 9
    assert rank.memory.shared_anon.largest[0].start == 0x7fe2c2000000
    worker = read_process(host, 613, topo)
    assert worker.gpu_context is None and "nvidia-uvm" not in worker.memory.gpu_maps
    shared = worker.memory.shared_anon  # inherited without resident pages: mapped, no chunk
    assert "nvidiactl" in worker.memory.gpu_maps and shared.mappings == 5
    assert shared.resident == 0 and shared.largest == () and shared.bytes == 0


def test_a_mapping_of_nvidia_uvm_is_a_cuda_context_without_nvml(tmp_path):
    from numatune.readers.procs import gpu_context, parse_numa_maps

    uvm = parse_numa_maps("204a00000 bind:0 file=/dev/nvidia-uvm dirty=4 mapped=512 N0=512 kernelpagesize_kB=4\n")
    assert gpu_context(7, uvm, None).evidence == "it maps /dev/nvidia-uvm"
    assert gpu_context(7, parse_numa_maps("7f00 default file=/dev/kfd\n"), None).runtime == "ROCm"
    ctl = parse_numa_maps("200800000 bind:0 file=/dev/nvidiactl mapped=14336 N0=14336 kernelpagesize_kB=4\n")
    assert gpu_context(7, ctl, None) is None  # inherited by every forked worker: no context


def test_rank_ancestors_reads_a_worker_s_rank_and_stops_at_another_environment():
    from numatune.readers.procs import rank_ancestors, read_process

    host = Host.open(fixture_root(JOB))
    worker = read_process(host, 613, None)
    known = rank_ancestors(host, [worker])
    assert list(known) == [578] and known[578].threads == ()  # read without its threads
    assert rank_ancestors(host, [worker, read_process(host, 578, None)]) == {}  # audited already
    assert rank_ancestors(host, [read_process(host, 578, None)]) == {}  # 541 (torchrun) is not in the capture


def test_rank_ancestors_read_each_ancestor_once_through_a_ppid_cycle(tmp_path):
    """Two processes with rank variables that name each other as parent: each read once, and the walk ends."""
    from numatune.readers.procs import rank_ancestors, read_process

    root = fixture_copy("intel-xeon-L5640-2node", tmp_path)
    for pid, ppid in ((20, 21), (21, 20)):
        proc = write_process(root, pid, "LOCAL_RANK=0\x00")
        for f in (proc / "stat", proc / "task" / str(pid) / "stat"):
            f.write_text(f.read_text().replace(" S 1 ", f" S {ppid} "))
    host = Host(str(root))
    assert list(rank_ancestors(host, [read_process(host, 20, None)])) == [21]



def test_nvml_compute_processes_are_looked_up_by_set_not_scanned_per_process():
    """4,000 ranks against NVML's list of 300,000 PIDs took 24 s (a tuple scan per process): indexed once, each
    process costs a set lookup, so the time follows the PIDs listed plus the processes asked, not their product."""
    from numatune.model.process import NumaMemory
    from numatune.model.topology import GpuFabric, NvmlGpu
    from numatune.readers.procs import gpu_context, nvml_processes
    from tests.limits import growth

    topo = read_topology(Host.open(fixture_root("intel-xeon-L5640-2node")))

    def make(n):
        gpus = (NvmlGpu(0, "0000:18:00.0", processes=tuple(range(0, 20 * n, 2))),
                NvmlGpu(1, "0000:19:00.0", processes=(3,)))
        return topo._replace(fabric=GpuFabric(nvml_gpus=gpus)), range(1, n + 1)

    def ask(made):
        t, pids = made
        return [gpu_context(pid, NumaMemory(), t) for pid in pids]

    t, _ = make(10)
    assert gpu_context(4, NumaMemory(), t).evidence == "NVML lists it as a compute process on GPU 0"
    assert gpu_context(5, NumaMemory(), t) is None and [g.index for g in nvml_processes(t)[3]] == [1]
    assert growth(make, ask, 8000) < 8

def test_a_snapshot_that_could_not_read_numa_maps_is_never_ok(cli, tmp_path):
    """A snapshot taken without the right to read a process (SNAPSHOT.txt `unreadable:`, as older numatune
    wrote it with exit 0) replayed as "PID N ok" where the live audit exits 4: now exit 4 saying so."""
    from tests.conftest import fixture_copy, write_process

    root = fixture_copy("dev-1node-x86", tmp_path / "copy")
    proc = write_process(root, 4242, "LOCAL_RANK=0\x00")
    (proc / "numa_maps").unlink()
    with open(root / "SNAPSHOT.txt", "a") as fh:
        fh.write("pids: 4242\nunreadable: /proc/4242/numa_maps\n")
    for args in (["audit", "4242"], ["audit", "4242", "--json"]):
        r = cli("--root", str(root), *args)
        assert r.exit_code == 4 and "could not be read where this snapshot was taken" in r.stderr, r.stderr
    (root / "SNAPSHOT.txt").write_text("pids: 4242\n")  # a plain tree that lacks the file: a note, as before
    r = cli("--root", str(root), "audit", "4242")
    assert r.exit_code == 0 and "numa_maps not available" in r.stderr + r.stdout
