"""Ranks and their workers, and each worker against its rank's binding (NT408), on hand-made process records.

The processes are hand-made records (shaped after the real job in fixtures/h100-job-2026-11-28.md: a rank
bound to CPUs 0-5 and `bind:0`, DataLoader workers forked from it); the topology is the real two-socket ghw
tree (node 0: even CPUs, node 1: odd CPUs).
"""

from __future__ import annotations

import pytest

from numatune.analysis.jobtree import (
    as_worker,
    check_worker,
    job_findings,
    job_order,
    rank_nodes,
    roles,
    with_worker_check,
)
from numatune.analysis.locality import judge
from numatune.model.process import GpuContext, GpuUse, ProcessInfo, ThreadInfo
from numatune.readers.procs import parse_numa_maps
from numatune.readers.topology import read_topology


@pytest.fixture(scope="module")
def two_socket():
    from numatune.system.host import Host
    from tests.conftest import fixture_root

    return read_topology(Host.open(fixture_root("intel-xeon-L5640-2node")))


RANK_MAPS = "7f0000000000 bind:0 anon=25600 dirty=25600 N0=25600 kernelpagesize_kB=4\n"


def mk(pid: int, ppid: int, env: dict[str, str] | None, *, comm: str = "python", cpus=(0, 2, 4), maps=RANK_MAPS,
       mems=(0, 1), **kw) -> ProcessInfo:
    env = env or {}
    rank = int(env["LOCAL_RANK"]) if "LOCAL_RANK" in env else None
    return ProcessInfo(pid=pid, comm=comm, cmdline=(comm, "train.py"), ppid=ppid, state="S",
                       threads=(ThreadInfo(pid, comm, cpus[0], tuple(cpus)),), cpus_allowed=tuple(cpus),
                       mems_allowed=tuple(mems), memory=parse_numa_maps(maps), environ=env, rank=rank,
                       rank_source="LOCAL_RANK" if rank is not None else None, **kw)


R0 = {"LOCAL_RANK": "0", "RANK": "0"}
R1 = {"LOCAL_RANK": "1", "RANK": "1"}


def test_a_rank_s_descendants_with_its_variables_are_its_workers():
    procs = [mk(11, 10, R0), mk(12, 11, R0), mk(13, 12, R0), mk(21, 10, R1), mk(22, 21, R1), mk(30, 10, None)]
    assert roles(procs) == {11: ("rank", None), 12: ("worker", 11), 13: ("worker", 11), 21: ("rank", None),
                            22: ("worker", 21), 30: ("process", None)}
    # a child started for another rank (its own variables) is a rank, not a worker of its parent
    assert roles([mk(11, 10, R0), mk(12, 11, R1)])[12] == ("rank", None)


def test_a_worker_audited_alone_finds_its_rank_among_the_known_ancestors():
    assert roles([mk(613, 578, R0)], {578: mk(578, 541, R0)}) == {613: ("worker", 578)}
    assert roles([mk(613, 578, R0)]) == {613: ("rank", None)}  # its parent unknown: it is the top of its rank


def test_a_shell_that_started_the_rank_is_its_launcher():
    """torchrun --no-python bash run.sh: bash carries LOCAL_RANK and starts python, the rank."""
    procs = [mk(11, 10, R0, comm="bash"), mk(12, 11, R0), mk(13, 12, R0)]
    assert roles(procs) == {11: ("launcher", None), 12: ("rank", None), 13: ("worker", 12)}
    assert roles([mk(11, 10, R0, comm="bash")])[11] == ("rank", None)  # a shell with no child is the rank itself


def test_a_worker_owns_no_gpu_unless_it_holds_a_context():
    gpu = GpuUse("0000:00:06.0", 0, "fd /dev/nvidia0", 0, "GPU0")
    w = as_worker(mk(613, 578, R0, gpu=gpu), 578)
    assert w.gpu is None and "descriptors inherited from its rank (PID 578)" in w.notes[-1]
    holding = mk(615, 578, R0, gpu=gpu, gpu_context=GpuContext("CUDA", "it maps /dev/nvidia-uvm"))
    assert as_worker(holding, 578).gpu == gpu


def test_the_rank_s_memory_nodes_come_from_its_policy_or_cpuset(two_socket):
    assert rank_nodes(mk(1, 0, R0), two_socket) == (0,)  # bind:0 holds every page
    default = "7f0000000000 default anon=10 N0=10 kernelpagesize_kB=4\n"
    assert rank_nodes(mk(1, 0, R0, maps=default, mems=(1,)), two_socket) == (1,)  # its cpuset is narrower
    assert rank_nodes(mk(1, 0, R0, maps=default), two_socket) is None  # binds no memory


def test_a_worker_within_its_rank_is_fine(two_socket):
    c = check_worker(mk(613, 578, R0), mk(578, 541, R0), two_socket)
    assert c.rank_cpus == (0, 2, 4) and c.rank_nodes == (0,) and not c.reason
    assert c.outside_cpus == () and c.outside_nodes == ()


def test_a_worker_widened_to_the_whole_machine_is_nt408_with_the_fix(two_socket):
    """What bind_worker() did in the captured job: the rank had CPUs 0-5, its workers got the whole node."""
    rank = mk(578, 541, R0)
    wide = mk(613, 578, R0, cpus=tuple(range(24)),
              maps=RANK_MAPS + "7f1000000000 interleave:0-1 anon=1024 dirty=1024 N1=1024 kernelpagesize_kB=4\n")
    c = check_worker(wide, rank, two_socket)
    assert c.outside_cpus == tuple(c for c in range(24) if c not in (0, 2, 4))
    assert c.outside_nodes == (1,) and c.outside_bytes == 4 << 20
    assert c.reason.startswith("a worker of rank PID 578 (LOCAL_RANK=0) outside its rank's binding: it may run on CPUs")
    assert "outside its rank's memory node(s) 0" in c.reason
    assert "bind_worker" not in c.fix and "bind within the rank's CPUs" in c.fix and "--reserve-cores" in c.fix
    assert c.fix.endswith("(the running worker: taskset -a -p -c 0,2,4 613)")
    a = with_worker_check(judge(wide, two_socket), c)
    assert a.role == "worker" and a.rank_pid == 578 and a.locality.verdict == "warning"
    assert a.locality.reasons[-1] == c.reason and a.locality.fix.taskset == "taskset -a -p -c 0,2,4 613"
    codes = [f.code for f in job_findings(two_socket, [wide], {578: rank})]
    assert codes.count("NT408") == 1
    assert "NT408" not in {f.code for f in job_findings(two_socket, [mk(613, 578, R0)], {578: rank})}


def test_a_few_pages_elsewhere_are_not_a_worker_outside_its_rank(two_socket):
    small = mk(613, 578, R0, maps=RANK_MAPS + "7f1000000000 default anon=8 N1=8 kernelpagesize_kB=4\n")
    assert not check_worker(small, mk(578, 541, R0), two_socket).reason


def test_job_order_puts_each_rank_s_workers_under_it(two_socket):
    procs = [mk(22, 21, R1), mk(30, 10, None), mk(21, 10, R1), mk(12, 11, R0), mk(11, 10, R0)]
    role = roles(procs)
    audits = [judge(p, two_socket)._replace(role=role[p.pid][0], rank_pid=role[p.pid][1]) for p in procs]
    assert [a.process.pid for a in job_order(audits)] == [11, 12, 21, 22, 30]
