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
    job_places,
    rank_nodes,
    roles,
    with_worker_check,
)
from numatune.analysis.locality import judge
from numatune.model.process import GpuContext, GpuUse, JobPlace, ProcEntry, ProcessInfo, ThreadInfo
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


# -- the job tree from what the kernel shows (issue 46, point 1) -------------------------------------------------

TRAIN = ("python3", "train.py")
SPAWN = ("python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
         "--multiprocessing-fork")
TRACKER = ("python3", "-c", "from multiprocessing.resource_tracker import main;main(4)")
FORKSERVER = ("python3", "-c", "from multiprocessing.forkserver import main; main(3, 4, ['__main__'], **{})")
COMPILE = ("python3", "/venv/lib/python3.11/site-packages/torch/_inductor/compile_worker/__main__.py", "--kind=fork")


def e(pid, ppid, argv=TRAIN, env=None, comm=None):
    return ProcEntry(pid, ppid, comm or argv[0].rpartition("/")[2][:15], tuple(argv), env or {})


def where(places, pid):
    p = places.get(pid)
    return None if p is None else (p.role, p.rank_pid, p.kind, p.job)


SL = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "7"}


def test_srun_then_torchrun_is_two_launchers_above_two_ranks():
    """torchrun inherits SLURM_LOCALID/SLURM_PROCID from srun's task: a launcher, not one more rank 0."""
    p = job_places({x.pid: x for x in (
        e(1, 0, ("/sbin/init",)), e(90, 1, ("slurmstepd: [7.0]",), comm="slurmstepd"),
        e(100, 90, ("/venv/bin/python", "/venv/bin/torchrun", "--nproc-per-node", "2", "train.py"), SL,
          comm="torchrun"),
        e(101, 100, TRAIN, {**SL, "LOCAL_RANK": "0", "RANK": "0"}),
        e(102, 100, TRAIN, {**SL, "LOCAL_RANK": "1", "RANK": "1"}),
        e(103, 101, TRAIN, {**SL, "LOCAL_RANK": "0", "RANK": "0"}, comm="pt_data_worker"))})
    assert [where(p, pid) for pid in (90, 100, 101, 102, 103)] == [
        ("launcher", None, "slurmstepd", 90), ("launcher", None, "torchrun", 90), ("rank", 101, None, 90),
        ("rank", 102, None, 90), ("worker", 101, "dataloader", 90)]
    assert 1 not in p  # init is no part of the job


def test_srun_in_an_sbatch_script_is_a_launcher_not_one_more_rank_0():
    """The batch script (slurm_script under slurmstepd's batch step) and the srun it runs carry the batch step's
    SLURM_PROCID=0/SLURM_LOCALID=0, while srun's tasks run under another slurmstepd: a 2-rank job is 2 ranks
    (slurm_script was a rank and srun its helper; the VM guest's slurm_job_tree runs this shape under real Slurm)."""
    batch = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "7"}
    p = job_places({x.pid: x for x in (
        e(1, 0, ("/sbin/init",)), e(80, 1, ("slurmstepd: [7.batch]",), comm="slurmstepd"),
        e(81, 80, ("/bin/sh", "/var/spool/slurmd/job00007/slurm_script"), batch, comm="slurm_script"),
        e(82, 81, ("srun", "python3", "train.py"), batch, comm="srun"),
        e(90, 1, ("slurmstepd: [7.0]",), comm="slurmstepd"),
        e(91, 90, TRAIN, {**batch, "SLURM_STEP_ID": "0"}),
        e(92, 90, TRAIN, {**batch, "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0"}))})
    assert [where(p, pid) for pid in (80, 81, 82, 90, 91, 92)] == [
        ("launcher", None, "slurmstepd", 80), ("launcher", None, "slurm_script", 80), ("launcher", None, "srun", 80),
        ("launcher", None, "slurmstepd", 90), ("rank", 91, None, 90), ("rank", 92, None, 90)]
    # torchrun before its ranks start (under srun's task): a launcher already, not a rank
    alone = job_places({100: e(100, 1, ("/venv/bin/python", "/venv/bin/torchrun", "train.py"), batch,
                               comm="torchrun")})
    assert where(alone, 100) == ("launcher", None, "torchrun", 100)


def test_a_parent_with_slurm_variables_running_torchrun_is_a_launcher_by_what_it_starts():
    p = job_places({x.pid: x for x in (
        e(200, 1, ("python3", "srun-like.py"), SL),
        e(201, 200, ("python3", "-m", "torch.distributed.run", "train.py"), SL),
        e(202, 201, TRAIN, {**SL, "LOCAL_RANK": "0"}))})
    assert [where(p, pid) for pid in (200, 201, 202)] == [
        ("launcher", None, "python3", 200), ("launcher", None, "torchrun", 200), ("rank", 202, None, 200)]


def test_a_wrapper_that_waits_on_its_child_is_the_launcher_and_python_the_rank():
    """srun ./job.sh, torchrun --no-python ./run.sh with python3 train.py inside."""
    r0 = {"LOCAL_RANK": "0"}
    p = job_places({x.pid: x for x in (
        e(300, 1, ("torchrun", "--no-python", "./run.sh"), {}), e(301, 300, ("bash", "./run.sh"), r0),
        e(302, 301, TRAIN, r0), e(303, 302, TRAIN, r0))})
    assert [where(p, pid) for pid in (300, 301, 302, 303)] == [
        ("launcher", None, "torchrun", 300), ("launcher", None, "bash", 300), ("rank", 302, None, 300),
        ("worker", 302, "fork", 300)]


def test_a_rank_that_names_itself_is_known_by_the_children_that_inherited_its_variables():
    """os.environ["RANK"] = ... at run time: /proc/PID/environ of the rank shows none, its spawn workers and the
    resource tracker carry them, its fork workers share its start-up environment (none either)."""
    mine = {"LOCAL_RANK": "0", "RANK": "0"}
    p = job_places({x.pid: x for x in (
        e(400, 1, ("python3", "self.py")), e(401, 400, TRACKER, mine), e(402, 400, SPAWN, mine),
        e(403, 400, ("python3", "self.py")))})
    assert p[400] == JobPlace("rank", 400, None, 400, 0, "LOCAL_RANK", "children")
    assert [where(p, pid) for pid in (401, 402, 403)] == [
        ("helper", 400, "resource_tracker", 400), ("worker", 400, "spawn", 400), ("worker", 400, "fork", 400)]


def test_deepspeed_mpi_discovery_keeps_the_workers_under_the_rank():
    """mpirun gave OMPI_COMM_WORLD_LOCAL_RANK; the rank set LOCAL_RANK/RANK itself: its workers carry both."""
    ompi = {"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_RANK": "1"}
    p = job_places({x.pid: x for x in (
        e(500, 1, ("mpirun", "-np", "2", "python3", "train.py")),
        e(501, 500, TRAIN, {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_RANK": "0"}),
        e(502, 500, TRAIN, ompi), e(503, 502, SPAWN, {**ompi, "LOCAL_RANK": "1", "RANK": "1"}))})
    assert [where(p, pid) for pid in (500, 501, 502, 503)] == [
        ("launcher", None, "mpirun", 500), ("rank", 501, None, 500), ("rank", 502, None, 500),
        ("worker", 502, "spawn", 500)]


def test_a_launcher_that_passes_the_local_rank_on_the_command_line():
    """torch.distributed.launch without --use-env, deepspeed's launcher: `--local-rank=N` / `--local_rank N`."""
    p = job_places({x.pid: x for x in (
        e(600, 1, ("python3", "launcher.py")), e(601, 600, (*TRAIN, "--local-rank=0")),
        e(602, 600, (*TRAIN, "--local_rank", "1")), e(603, 602, FORKSERVER), e(604, 603, FORKSERVER))})
    assert [where(p, pid) for pid in (600, 601, 602, 603, 604)] == [
        ("launcher", None, "python3", 600), ("rank", 601, None, 600), ("rank", 602, None, 600),
        ("helper", 602, "forkserver", 600), ("worker", 602, "forkserver", 600)]
    assert (p[602].rank, p[602].rank_source, p[602].inferred) == (1, "--local-rank", "command line")


def test_two_jobs_on_one_node_are_two_jobs_and_every_helper_kind_sits_under_its_rank():
    r0 = {"LOCAL_RANK": "0"}
    p = job_places({x.pid: x for x in (
        e(700, 1, ("torchrun", "a.py")), e(701, 700, TRAIN, r0),
        e(702, 701, ("/venv/lib/python3.11/site-packages/torch/bin/torch_shm_manager", "--x"), r0),
        e(703, 701, COMPILE, r0), e(704, 703, COMPILE, r0), e(705, 701, ("nvidia-smi",), r0),
        e(800, 1, ("torchrun", "b.py")), e(801, 800, TRAIN, r0), e(900, 1, ("python3", "other.py"), r0))})
    assert [where(p, pid) for pid in (701, 702, 703, 704, 705, 801, 900)] == [
        ("rank", 701, None, 700), ("helper", 701, "torch_shm_manager", 700), ("worker", 701, "compile", 700),
        ("worker", 701, "compile", 700), ("helper", 701, "subprocess", 700), ("rank", 801, None, 800),
        ("rank", 900, None, 900)]


def test_an_unrelated_process_is_no_part_of_a_job_and_a_cycle_is_walked_once():
    r0 = {"LOCAL_RANK": "0"}
    p = job_places({x.pid: x for x in (
        e(1, 0, ("init",)), e(50, 1, ("python3", "pytest")), e(51, 50, ("python3", "job.py"), r0),
        e(60, 61, TRAIN, r0), e(61, 60, TRAIN, r0), e(70, 70, ("x",)))})
    assert 50 not in p and where(p, 51) == ("rank", 51, None, 51)  # a harness that started one job is not its rank
    assert where(p, 60) == ("rank", 60, None, 60) and where(p, 61) == ("worker", 60, "fork", 60)
    assert 70 not in p


def _chain(n: int) -> dict[int, ProcEntry]:
    r0 = {"LOCAL_RANK": "0"}
    return {pid: e(pid, pid - 1, TRAIN, r0) for pid in range(10, 10 + n)}


def _flat(n: int) -> dict[int, ProcEntry]:
    return {1: e(1, 0, ("torchrun",)), **{pid: e(pid, 1, TRAIN, {"LOCAL_RANK": str(pid)}) for pid in range(10, 10 + n)}}


@pytest.mark.parametrize("make", [_chain, _flat], ids=["worker chain", "flat job"])
def test_the_job_tree_grows_linearly_with_the_processes(make):
    """A chain of 4,000 workers took 9.97 s (a walk up per worker); 6,000 in a chain or flat well within 10 s."""
    from tests.limits import growth

    places = job_places(make(6000))
    assert len(places) == 6000 + (make is _flat)
    assert growth(make, job_places, 1500) < 8


def test_job_order_grows_linearly_with_many_jobs(two_socket):
    """Thousands of single-rank jobs (ranks without a launcher seen): grouped in one pass, not a pass per job."""
    from tests.limits import growth

    base = judge(mk(1, 0, R0), two_socket)

    def make(n):
        return [base._replace(process=base.process._replace(pid=pid), role="rank",
                              place=JobPlace("rank", pid, None, pid, 0)) for pid in range(10, 10 + n)]

    assert [a.process.pid for a in job_order(make(3))] == [10, 11, 12]
    assert growth(make, job_order, 2000) < 8


def test_init_and_reapers_are_never_ranks_and_an_orphaned_worker_has_no_rank():
    """A resource tracker or spawn worker left carrying LOCAL_RANK=0 when its rank died hangs under PID 1 (or a
    subreaper): it is an orphaned helper or worker, never a rank, and PID 1 never the rank or launcher above it."""
    r0 = {"LOCAL_RANK": "0"}
    p = job_places({x.pid: x for x in (
        e(1, 0, ("/sbin/init",), comm="systemd"), e(40, 1, TRACKER, r0), e(41, 1, SPAWN, {"LOCAL_RANK": "1"}),
        e(42, 1, ("python3", "/sbin/init")), e(50, 1, ("tini", "--", "sh"), comm="tini"), e(51, 50, SPAWN, r0),
        e(60, 1, TRAIN, r0))})
    assert 1 not in p and 50 not in p and 42 not in p
    assert [where(p, pid) for pid in (40, 41, 51, 60)] == [
        ("helper", None, "resource_tracker", None), ("worker", None, "spawn", None), ("worker", None, "spawn", None),
        ("rank", 60, None, 60)]
