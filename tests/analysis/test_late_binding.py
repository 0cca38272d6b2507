"""Late binding (NT406): threads created before a binding keep the old mask; memory first-touched before it
stays on the node where it was touched. Pure cases on a real two-socket tree (ghw L5640: node 0 = even CPUs,
node 1 = odd) with hand-made threads and numa_maps; a live case on this machine's kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numatune.analysis.locality import audit_findings, judge, late_binding
from numatune.model.process import ProcessInfo, ThreadInfo
from numatune.readers.procs import parse_numa_maps
from tests.analysis.test_locality import maps, two_socket  # noqa: F401 - the fixture

NODE0 = tuple(range(0, 24, 2))
NODE1 = tuple(range(1, 24, 2))


def proc(text: str, main: tuple[int, ...], others: list[tuple[int, ...]], **kw) -> ProcessInfo:
    threads = (ThreadInfo(2000, "python", main[0], main),
               *(ThreadInfo(2001 + i, "nccl", mask[0], mask) for i, mask in enumerate(others)))
    base = dict(pid=2000, comm="python", cmdline=("python", "serve.py"), ppid=1, state="S", threads=threads,
                cpus_allowed=main, mems_allowed=(0, 1), memory=parse_numa_maps(text))
    base.update(kw)
    return ProcessInfo(**base)


def test_threads_created_before_the_binding_are_named_with_the_fix(two_socket):  # noqa: F811
    all_cpus = tuple(range(24))
    p = proc(maps(N1=1000), NODE1, [all_cpus, NODE1])
    late = late_binding(p, two_socket)
    assert late.threads == (2001,) and late.bound_nodes == (1,) and late.old_cpus == NODE0
    assert late.remote_bytes == 0 and "keep the old mask" in late.cause
    assert late.fix == "bind at exec: numatune launch --node 1 -- python serve.py (the running process: " \
                       "taskset -p -c 1,3,5,7,9,11,13,15,17,19,21,23 2001)"
    a = judge(p, two_socket)
    assert a.locality.verdict == "warning" and a.locality.late_binding == late
    assert a.locality.fix.taskset == "taskset -p -c 1,3,5,7,9,11,13,15,17,19,21,23 2001"
    codes = {f.code: f for f in audit_findings(two_socket, p)}
    assert codes["NT406"].fix.startswith("bind at exec: numatune launch --node 1")


def test_memory_first_touched_before_the_binding_is_named(two_socket):  # noqa: F811
    p = proc(maps(N0=700, N1=300), NODE1, [NODE1])  # every thread bound to node 1, 70% of pages on node 0
    late = late_binding(p, two_socket)
    assert late.threads == () and late.remote_nodes == (0,) and late.remote_bytes == 700 * 4096
    assert "first-touched there before the binding" in late.cause
    assert "migratepages 2000 0 1" in late.fix
    a = judge(p, two_socket)
    assert a.locality.home_nodes == (1,) and {"NT401", "NT406"} <= {f.code for f in audit_findings(two_socket, p)}


def test_no_late_binding_when_unbound_bound_at_exec_or_the_policy_names_the_node(two_socket):  # noqa: F811
    everything = tuple(range(24))
    assert late_binding(proc(maps(N0=500, N1=500), everything, [everything]), two_socket) is None  # not bound
    assert late_binding(proc(maps(N1=1000), NODE1, [NODE1, (1,)]), two_socket) is None  # threads within it
    interleaved = "7f0000000000 interleave:0-1 anon=1000 dirty=1000 N0=500 N1=500 kernelpagesize_kB=4\n"
    assert late_binding(proc(interleaved, NODE1, [NODE1]), two_socket) is None  # pages where the policy says


def test_threads_pinned_each_within_the_binding_are_not_late_binding(two_socket):  # noqa: F811
    """OMP_PROC_BIND=close OMP_PLACES=cores in a real torch process: the main thread on CPU 0, the worker pinned
    itself to CPU 2 (the next core of node 0): no finding, and nothing would put both threads on one CPU."""
    p = proc(maps(N0=1000), (0,), [(2,)])
    assert late_binding(p, two_socket) is None
    a = judge(p, two_socket)
    assert "NT406" not in {f.code for f in audit_findings(two_socket, p)}
    assert not (a.locality.fix.taskset or "").startswith("taskset -a -p -c 0 ")
    # every OpenMP thread on a core of its own across both nodes (OMP_PLACES=cores, spread), main on CPU 0
    spread = proc(maps(N0=500, N1=500), (0,), [(c,) for c in range(1, 24)])
    assert late_binding(spread, two_socket) is None
    # OMP_PLACES=sockets: the main thread on node 0, the worker on node 1, each as wide as the other
    sockets = {"OMP_PROC_BIND": "close", "OMP_PLACES": "sockets"}
    assert late_binding(proc(maps(N0=500, N1=500), NODE0, [NODE1], environ=sockets), two_socket) is None
    # OMP_PROC_BIND=false asks for no pinning: a node-wide mask elsewhere is then the old one
    unbound = {"OMP_PROC_BIND": "false"}
    assert late_binding(proc(maps(N0=500, N1=500), NODE0, [NODE1], environ=unbound), two_socket).threads == (2001,)


def test_a_thread_left_on_the_node_the_process_started_on_is_late(two_socket):  # noqa: F811
    """Started under numactl --cpunodebind=0, bound itself to node 1: the helper kept node 0's mask (as wide as the
    main thread's, elsewhere), and no OpenMP variable says it was placed there on purpose."""
    late = late_binding(proc(maps(N1=1000), NODE1, [NODE0]), two_socket)
    assert late.threads == (2001,) and late.old_cpus == NODE0 and late.bound_cpus == NODE1


def test_a_thread_with_the_old_wide_mask_beside_pinned_ones_is_late_and_only_it_is_moved(two_socket):  # noqa: F811
    everything = tuple(range(24))
    p = proc(maps(N0=1000), (0,), [(2,), (4,), everything, everything])  # two OpenMP workers, two early threads
    late = late_binding(p, two_socket)
    assert late.bound_cpus == (0, 2, 4) and late.threads == (2003, 2004)
    assert late.old_cpus == tuple(c for c in everything if c not in (0, 2, 4))
    assert late.fix.endswith("(the running process: for t in 2003 2004; do taskset -p -c 0,2,4 $t; done)")
    assert "-a" not in late.fix.split("bind at exec")[1]  # the pinned workers keep CPUs 2 and 4


@pytest.fixture(scope="module")
def dgx():
    from numatune.readers.topology import read_topology
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    return read_topology(Host.open(fixture_root("handmade-dgx-h100-ids")))


def test_main_bound_to_four_cpus_and_a_thread_still_on_sixty_four_is_late(dgx):
    assert len(dgx.cpu.online) > 64
    first = tuple(range(64))
    p = proc(maps(N0=1000), (0, 1, 2, 3), [first, (1,)])
    late = late_binding(p, dgx)
    assert late.threads == (2001,) and late.bound_cpus == (0, 1, 2, 3) and late.old_cpus == tuple(range(4, 64))
    assert late.fix.endswith("taskset -p -c 0-3 2001)")
    # the same process with its worker pinned on CPU 1 only: nothing late
    assert late_binding(proc(maps(N0=1000), (0,), [(1,)]), dgx) is None


def test_a_real_process_that_binds_itself_late_on_this_kernel(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two allowed CPUs to bind to fewer")
    binder = Path(__file__).parents[1] / "vm" / "guest" / "late_binder.py"
    ready = tmp_path / "ready.json"
    child = subprocess.Popen([sys.executable, str(binder), "4", str(allowed[0]), str(ready)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if ready.exists():
                break
            time.sleep(0.05)
        rep = json.loads(ready.read_text())
        out = subprocess.run([sys.executable, "-m", "numatune", "audit", str(rep["pid"]), "--json"],
                             capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
        text = subprocess.run([sys.executable, "-m", "numatune", "audit", str(rep["pid"]), str(os.getpid())],
                              capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2],
                              env={**os.environ, "COLUMNS": "200"}).stdout
    finally:
        child.kill()
        child.wait()
    entry = json.loads(out.stdout)["processes"][0]
    late = entry["late_binding"]
    assert rep["helper_affinity"] == allowed and rep["main_affinity"] == [allowed[0]]
    assert late["threads"] == [rep["helper_tid"]] and late["bound_cpus"] == [allowed[0]]
    assert late["old_cpus"] == allowed[1:] and late["fix"].startswith("bind at exec: numatune launch --node ")
    assert entry["verdict"] == "warning"
    assert "(late binding NT406)" in text and "late binding: 1 of 2 threads still have the CPU mask" in text
