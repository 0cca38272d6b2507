"""The catalogue of binding failures (issue 46), each named by its code with its cause and fix: real processes
where this machine can show them (a seccomp filter refusing the NUMA calls, OpenMP variables in a rank's
environment), fixture trees otherwise (a cpuset without the GPU's node, a Grace Hopper HBM node given as the CPU
node)."""

from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from numatune.analysis.binding_failures import openmp_repinning, refused
from numatune.analysis.locality import audit_findings
from numatune.cpulist import format_cpulist
from numatune.errors import BindingError
from numatune.live.bind import named_failure, read_launch_devices, read_launch_topology
from numatune.model.launch import LaunchFacts, LaunchOptions
from numatune.model.process import GpuUse, ProcessInfo, ThreadInfo
from numatune.plan.inherited import VARIABLE
from numatune.plan.launch import plan_launch
from numatune.readers.procs import parse_numa_maps
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import PROJECT, child_cpuset, fixture_root

# -- a seccomp filter: the given system calls return EPERM, as a container's profile without CAP_SYS_NICE ------
SYSCALLS = {"set_mempolicy": 238, "sched_setaffinity": 203}  # x86_64
FILTERED = pytest.mark.skipif(platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
                              reason="the seccomp filter of this test is written for x86_64 Linux")

# Installs the filter (no_new_privs, then PR_SET_SECCOMP) and execs argv[2:]: argv[1] the calls, comma-separated.
SECCOMP = r"""
import ctypes, os, struct, sys
numbers = [int(n) for n in sys.argv[1].split(",")]
ARCH_X86_64, ALLOW, EPERM = 0xC000003E, 0x7FFF0000, 0x00050000 | 1
prog = [(0x20, 0, 0, 4), (0x15, 0, len(numbers) + 1, ARCH_X86_64), (0x20, 0, 0, 0)]
for i, nr in enumerate(numbers):
    prog.append((0x15, len(numbers) - i, 0, nr))
prog += [(0x06, 0, 0, ALLOW), (0x06, 0, 0, EPERM)]
raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
buf = ctypes.create_string_buffer(raw)
fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf))
fbuf = ctypes.create_string_buffer(fprog)
libc = ctypes.CDLL(None, use_errno=True)
U = ctypes.c_ulong
assert libc.prctl(38, U(1), U(0), U(0), U(0)) == 0, ctypes.get_errno()  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, U(2), U(ctypes.addressof(fbuf)), U(0), U(0)) == 0, ctypes.get_errno()  # SECCOMP, FILTER
os.execvp(sys.argv[2], sys.argv[2:])
"""


def filtered(calls: list[str], *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("NUMATUNE_BIND", VARIABLE)}
    full["PYTHONPATH"] = os.pathsep.join([str(PROJECT), *filter(None, [os.environ.get("PYTHONPATH")])])
    full.update(env or {})
    nrs = ",".join(str(SYSCALLS[c]) for c in calls)
    return subprocess.run([sys.executable, "-c", SECCOMP, nrs, *argv], capture_output=True, text=True, env=full,
                          cwd=PROJECT, timeout=120, check=False)


@FILTERED
@pytest.mark.parametrize(("calls", "options"), [
    (["set_mempolicy"], ["--mem-policy", "bind"]),
    (["sched_setaffinity"], ["--mem-policy", "none"]),
], ids=["set_mempolicy", "sched_setaffinity"])
def test_launch_refused_by_seccomp_stops_with_nt410(calls, options, tmp_path):
    marker = tmp_path / "ran"
    done = filtered(calls, sys.executable, "-m", "numatune", "launch", "--node", "0", *options, "--",
                    sys.executable, "-c", f"open({str(marker)!r}, 'w').close()")
    assert done.returncode == 4, (done.returncode, done.stderr)
    assert f"NT410: {calls[0]}(" in done.stderr and "refused (EPERM)" in done.stderr
    assert "CAP_SYS_NICE" in done.stderr and "--best-effort" in done.stderr
    assert not marker.exists()  # never the command without its binding, and never a silent death


@FILTERED
def test_bind_refused_by_seccomp_raises_nt410_and_bind_worker_says_so():
    code = textwrap.dedent("""
        import json, numatune
        from numatune.errors import NumatuneError
        try:
            numatune.bind(node=0)
            out = {"raised": None}
        except NumatuneError as exc:
            out = {"raised": exc.message, "exit": int(exc.exit_code)}
        report = numatune.bind_worker(node=0)()
        out["worker"] = {"bound": report.bound, "text": report.describe(), "warnings": list(report.warnings)}
        print(json.dumps(out))
    """)
    done = filtered(["set_mempolicy"], sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["raised"].startswith("NT410: set_mempolicy(bind, nodes 0) refused (EPERM)") and out["exit"] == 4
    # best effort (the worker helper): the CPUs are bound and the report names the refusal
    assert any(w.startswith("NT410: set_mempolicy") for w in out["worker"]["warnings"]), out["worker"]


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0,
                    reason="needs setpriv and root to drop CAP_SYS_NICE from the bounding set")
def test_without_cap_sys_nice_a_processs_own_binding_is_not_refused():
    """CAP_SYS_NICE dropped (the bounding set, so the exec'd launch has it in no set): the kernel asks for it only
    to move another user's process or shared pages, so launch binds and no NT410 is said; in containers the
    refusal comes from the seccomp profile that gates the NUMA calls on the capability (the tests above)."""
    probe = "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])"
    full = {**os.environ, "PYTHONPATH": str(PROJECT)}
    full.pop(VARIABLE, None)
    done = subprocess.run(["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", sys.executable, "-m",
                           "numatune", "launch", "--node", "0", "--mem-policy", "bind", "--", sys.executable, "-c",
                           probe], capture_output=True, text=True, env=full, cwd=PROJECT, timeout=120, check=False)
    assert done.returncode == 0 and "NT410" not in done.stderr, done.stderr
    assert not int(done.stdout.split()[-1], 16) & (1 << 23)  # CAP_SYS_NICE (23) is not effective in the command


def test_refused_names_only_refusals():
    assert refused("set_mempolicy", errno.EPERM, "bind, nodes 0").startswith("NT410: set_mempolicy(bind, nodes 0)")
    assert refused("sched_setaffinity", errno.EACCES, "0").startswith("NT410")
    assert refused("set_mempolicy", errno.EINVAL, "bind, nodes 9") is None


# -- OpenMP variables that re-pin ------------------------------------------------------------------------------
def rank(topo, *, cpus, env=None, gpu=None, policy=None, rank=0) -> ProcessInfo:
    """A rank as audit reads it: its allowed CPUs, the named keys of its environment, its GPU, its numa_maps."""
    text = f"7f0000000000 {policy} anon=100 dirty=100 N0=100 kernelpagesize_kB=4\n" if policy else ""
    dev = None
    if gpu is not None:
        d = next(x for x in topo.devices if x.bdf == gpu)
        dev = GpuUse(d.bdf, d.node, "CUDA_VISIBLE_DEVICES entry 0", d.nvidia.minor if d.nvidia else None)
    threads = (ThreadInfo(4242, "python", cpus[0], tuple(cpus)),)
    return ProcessInfo(pid=4242, comm="python", cmdline=("python", "train.py"), ppid=1, state="S", threads=threads,
                       cpus_allowed=tuple(cpus), mems_allowed=tuple(n.id for n in topo.nodes),
                       memory=parse_numa_maps(text), environ=env or {}, gpu=dev, rank=rank)


@pytest.fixture(scope="module")
def dgx():
    return read_topology(Host.open(fixture_root("handmade-dgx-h100-ids")))


@pytest.fixture(scope="module")
def snc4():
    return read_topology(Host.open(fixture_root("handmade-snc4-8gpu")))


def codes(topo, proc) -> dict[str, object]:
    return {f.code: f for f in audit_findings(topo, proc)}


def test_openmp_affinity_variables_are_named_for_a_rank_only(dgx):
    env = {"KMP_AFFINITY": "granularity=fine,compact,1,0", "OMP_PROC_BIND": "false", "GOMP_CPU_AFFINITY": "0-3"}
    assert openmp_repinning(env) == ("GOMP_CPU_AFFINITY=0-3", "KMP_AFFINITY=granularity=fine,compact,1,0")
    node0 = list(dgx.node(0).cpus)
    found = codes(dgx, rank(dgx, cpus=node0, env=env))["NT412"]
    assert "KMP_AFFINITY" in found.message and found.subject == "pid 4242" and "OMP_PLACES=cores" in found.fix
    assert "NT412" not in codes(dgx, rank(dgx, cpus=node0, env=env, rank=None))  # not a rank: not judged
    assert "NT412" not in codes(dgx, rank(dgx, cpus=node0, env={"OMP_PROC_BIND": "false"}))


def test_a_rank_bound_by_its_visible_index_is_nt414_naming_physical_gpus(dgx):
    """CUDA_VISIBLE_DEVICES=4,5,6,7, local rank 0: its GPU is physical GPU4 on node 1; a binder that read visible
    index 0 as GPU0 put its CPUs on node 0. Bound right (node 1), or with an identity list, nothing is said."""
    env = {"CUDA_VISIBLE_DEVICES": "4,5,6,7", "LOCAL_RANK": "0"}
    node0, node1 = list(dgx.node(0).cpus), list(dgx.node(1).cpus)
    found = codes(dgx, rank(dgx, cpus=node0, env=env, gpu="0000:9d:00.0"))["NT414"]
    assert found.message == ("its GPU is CUDA_VISIBLE_DEVICES entry 0 = physical GPU4 0000:9d:00.0 (node 1), but its "
                             "CPUs are all on node 0, the node of physical GPU0 0000:1b:00.0: the visible index 0 "
                             "was taken for a physical GPU")
    assert found.fix.endswith(f"taskset -a -p -c {format_cpulist(node1)} 4242")
    assert "NT414" not in codes(dgx, rank(dgx, cpus=node1, env=env, gpu="0000:9d:00.0"))
    same = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "LOCAL_RANK": "0"}
    assert "NT414" not in codes(dgx, rank(dgx, cpus=node0, env=same, gpu="0000:1b:00.0"))


def test_memory_bound_to_the_sockets_first_cluster_is_nt415(snc4):
    cluster2 = list(snc4.node(2).cpus)
    found = codes(snc4, rank(snc4, cpus=cluster2, policy="bind:0"))["NT415"]
    assert found.message.startswith("SNC-4: its memory is bound to cluster node(s) 0 (the socket's first cluster) "
                                    "while its CPUs are on cluster node(s) 2")
    assert "--mem-policy socket" in found.fix
    assert "NT415" not in codes(snc4, rank(snc4, cpus=cluster2, policy="bind:2"))
    assert "NT415" not in codes(snc4, rank(snc4, cpus=cluster2, policy="bind:4"))  # another socket: remote, not this
    assert "NT415" not in codes(snc4, rank(snc4, cpus=cluster2, policy="interleave:0-3"))


def test_a_live_rank_with_kmp_affinity_is_nt412_in_check_pid_and_a_launch_warning():
    env = {k: v for k, v in os.environ.items() if k not in ("NUMATUNE_BIND", VARIABLE)}
    env.update({"PYTHONPATH": str(PROJECT), "LOCAL_RANK": "0", "KMP_AFFINITY": "compact", "SECRET_TOKEN": "x"})
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        time.sleep(0.3)
        done = subprocess.run([sys.executable, "-m", "numatune", "check", "--pid", str(rank.pid), "--json"],
                              capture_output=True, text=True, cwd=PROJECT, timeout=120, check=False)
        doc = json.loads(done.stdout)
        found = [f for f in doc["findings"] if f["code"] == "NT412"]
        assert len(found) == 1 and "KMP_AFFINITY=compact" in found[0]["message"], doc["findings"]
        assert "SECRET_TOKEN" not in done.stdout  # only the named keys of another process's environment are read
    finally:
        rank.kill()
        rank.wait()
    launched = subprocess.run([sys.executable, "-m", "numatune", "launch", "--dry-run", "--", "true"],
                              capture_output=True, text=True, cwd=PROJECT, env=env, timeout=120, check=False)
    assert launched.returncode == 0 and "NT412: KMP_AFFINITY=compact in the environment" in launched.stdout


# -- fixture trees: a cpuset without the GPU's node, a memory-only node as the CPU node ------------------------
def test_a_cpuset_without_the_gpus_node_is_nt411():
    root = fixture_root("handmade-launch-2s4gpu-cxl")
    host = Host.open(root)
    topo = read_launch_topology(host, node_kinds=False)
    devices = read_launch_devices(host, topo)
    node0 = frozenset(topo.node(0).cpus)
    facts = LaunchFacts(env={"LOCAL_RANK": "2"}, allowed_cpus=node0, allowed_source="/sys/fs/cgroup/pod/cpuset.cpus"
                        ".effective", numactl=None, taskset=None, kernel="6.10.0")
    with pytest.raises(BindingError) as info:
        plan_launch(topo, devices, facts, LaunchOptions(), ("python",))
    named = named_failure(info.value, topo)
    assert named.message.startswith("NT411: no usable CPU on node 1: the allowed CPUs ")
    assert "cpuset.cpus.effective) have none of its CPUs" in named.message and "docker --cpuset-cpus" in named.message
    assert named.exit_code == info.value.exit_code


def test_a_grace_hopper_hbm_node_given_as_the_cpu_node_is_nt413(cli):
    res = cli("--root", str(fixture_root("handmade-gh200-numa")), "launch", "--dry-run", "--node", "1", "--", "true")
    assert res.exit_code == 7
    assert "NT413: node 1 is a memory-only node" in res.output and "--node 0 (its nearest node with CPUs)" in res.output



@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs for a cpuset narrower than the machine")
def test_a_mask_the_cgroups_cpuset_gave_names_the_cpuset_so_launch_can_say_nt411():
    """launch started inside a container's cpuset has that cpuset as its mask: the allowed CPUs' source names the
    cgroup's file, so a node outside it is NT411, not a bare "no usable CPU" (seen in the two-socket VM guest:
    `launch --node 0` in a child cgroup holding node 1's CPUs said only "outside the allowed CPUs 2-3
    (sched_getaffinity)")."""
    last = max(os.sched_getaffinity(0))
    code = ("import json; from numatune.live.bind import gather_facts; from numatune.system.host import Host\n"
            "f = gather_facts(Host.open('/'), {}, probe=False)\n"
            "print(json.dumps([sorted(f.allowed_cpus), f.allowed_source]))")
    with child_cpuset(str(last)) as enter:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT, timeout=120,
                              check=False, preexec_fn=enter)
    cpus, source = json.loads(done.stdout)
    assert cpus == [last] and source.startswith("sched_getaffinity = the cgroup's ") and "cpuset" in source, source
    # a plan whose node lies outside that mask names the cause (the fixture tree: node 1 outside node 0's CPUs)
    root = fixture_root("handmade-launch-2s4gpu-cxl")
    host = Host.open(root)
    topo = read_launch_topology(host, node_kinds=False)
    facts = LaunchFacts(env={}, allowed_cpus=frozenset(topo.node(0).cpus), allowed_source=source, numactl=None,
                        taskset=None, kernel="6.10.0")
    with pytest.raises(BindingError) as info:
        plan_launch(topo, [], facts, LaunchOptions(node=1), ("python",))
    assert named_failure(info.value, topo).message.startswith("NT411: no usable CPU on node 1")


def test_a_live_cpuset_without_the_ranks_node_is_nt411(tmp_path):
    """A child cgroup holding node 0's CPUs and a rank asked onto node 1: needs two nodes with CPUs."""
    from numatune.cpulist import parse_cpulist

    base = "/sys/devices/system/node"
    nodes = {int(n[4:]): parse_cpulist(Path(f"{base}/{n}/cpulist").read_text().strip()) for n in os.listdir(base)
             if n.startswith("node") and n[4:].isdigit()}
    with_cpus = sorted(n for n, cpus in nodes.items() if cpus)
    if len(with_cpus) < 2:
        pytest.skip("this machine has one node with CPUs: no cpuset can leave out a rank's node here (the "
                    "fixture-tree test above stands for it; a machine with two runs this)")
    first, other = with_cpus[0], with_cpus[1]
    with child_cpuset(format_cpulist(nodes[first])) as enter:
        done = subprocess.run([sys.executable, "-m", "numatune", "launch", "--node", str(other), "--", "true"],
                              capture_output=True, text=True, cwd=PROJECT, timeout=120, check=False, preexec_fn=enter)
    assert done.returncode == 7 and f"NT411: no usable CPU on node {other}" in done.stderr, done.stderr


LATE = """
    import json, os, sys, threading, time
    ready = threading.Event()
    threading.Thread(target=lambda: (ready.set(), time.sleep(60)), name="progress", daemon=True).start()
    ready.wait()
    if sys.argv[1] == "bind":
        import numatune
        numatune.bind(cpu_bind="cores:1", mem_policy="none")
    else:
        os.sched_setaffinity(0, {int(sys.argv[2])})  # the main thread only: the progress thread keeps its mask
    masks = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
    print(json.dumps(masks), flush=True)
    time.sleep(60)
"""


def _start(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, object]:
    full = {k: v for k, v in os.environ.items() if k not in ("NUMATUNE_BIND", VARIABLE)}
    full.update({"PYTHONPATH": str(PROJECT), **(env or {})})
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=full, cwd=PROJECT,
                            stdout=subprocess.PIPE, text=True)
    return proc, json.loads(proc.stdout.readline())


def _check_pid(pid: int) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "numatune", "check", "--pid", str(pid), "--json"],
                          capture_output=True, text=True, cwd=PROJECT, timeout=120, check=False)
    return json.loads(done.stdout)["findings"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to see a mask change")
def test_a_thread_started_before_binding_is_nt406_and_bind_moves_it_too():
    """A progress thread (as NCCL's or UCX's) started before the binding: sched_setaffinity on the main thread
    leaves it on the old mask (audit: NT406); numatune.bind() sets every thread's mask."""
    last = max(os.sched_getaffinity(0))
    proc, masks = _start(LATE, "main", str(last), env={"LOCAL_RANK": "0"})
    try:
        assert masks[str(proc.pid)] == [last] and any(m != [last] for m in masks.values())
        assert "NT406" in {f["code"] for f in _check_pid(proc.pid)}
    finally:
        proc.kill()
        proc.wait()
    proc, masks = _start(LATE, "bind", env={"LOCAL_RANK": "0"})
    try:
        assert len(masks) >= 2 and len({tuple(m) for m in masks.values()}) == 1 and len(masks[str(proc.pid)]) < len(
            os.sched_getaffinity(0)), masks
    finally:
        proc.kill()
        proc.wait()


ENGINE = """
    import json, multiprocessing as mp, os, sys, time

    def worker(q):
        os.sched_setaffinity(0, set(json.loads(sys.argv[2])))  # the worker binds itself wider than the engine core
        q.put(os.getpid())
        time.sleep(60)

    if __name__ == "__main__":
        os.sched_setaffinity(0, {int(sys.argv[1])})  # the engine core: one CPU
        q = mp.get_context("spawn").Queue()
        mp.get_context("spawn").Process(target=worker, args=(q,), daemon=True).start()
        print(json.dumps({"worker": q.get()}), flush=True)
        time.sleep(60)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to see a mask change")
def test_an_engine_core_narrower_than_its_worker_is_nt408_without_recommending_the_helper(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    script = tmp_path / "engine.py"
    script.write_text(textwrap.dedent(ENGINE))
    full = {k: v for k, v in os.environ.items() if k not in ("NUMATUNE_BIND", VARIABLE)}
    full.update({"PYTHONPATH": str(PROJECT), "LOCAL_RANK": "0"})
    proc = subprocess.Popen([sys.executable, str(script), str(cpus[-1]), json.dumps(cpus)], env=full, cwd=tmp_path,
                            stdout=subprocess.PIPE, text=True)
    try:
        worker = json.loads(proc.stdout.readline())["worker"]
        found = [f for f in _check_pid(worker) if f["code"] == "NT408"]
        assert len(found) == 1 and f"rank PID {proc.pid}" in found[0]["message"], found
        assert "bind_worker" not in found[0]["fix"] and f"taskset -a -p -c {cpus[-1]} {worker}" in found[0]["fix"]
    finally:
        proc.kill()
        proc.wait()


def _actor(topo, *, cpus, gpu, title="ray::Trainer") -> ProcessInfo:
    proc = rank(topo, cpus=cpus, env={"CUDA_VISIBLE_DEVICES": "4"}, gpu=gpu, rank=None)
    return proc._replace(comm=title[:15], cmdline=(title,))


def test_a_ray_actor_with_a_gpu_on_every_socket_is_nt416(dgx):
    """Ray sets an actor's CUDA_VISIBLE_DEVICES and binds nothing (sglang#22989): the actor `ray::Trainer` holds
    GPU4 (node 1) and may run on both sockets. Bound to node 1, or not an actor, nothing is said."""
    node0, node1 = list(dgx.node(0).cpus), list(dgx.node(1).cpus)
    found = codes(dgx, _actor(dgx, cpus=node0 + node1, gpu="0000:9d:00.0"))["NT416"]
    assert found.message.startswith("Ray actor ray::Trainer holds ") and "(node 1) but may run on CPUs of node(s) 0" \
        in found.message, found.message
    assert "numatune.bind_actor()" in found.fix and found.fix.endswith(f"taskset -a -p -c {format_cpulist(node1)} 4242")
    assert "NT416" not in codes(dgx, _actor(dgx, cpus=node1, gpu="0000:9d:00.0"))
    assert "NT416" not in codes(dgx, _actor(dgx, cpus=node0 + node1, gpu="0000:9d:00.0", title="python"))
    assert "NT416" not in codes(dgx, _actor(dgx, cpus=node0 + node1, gpu=None))  # an actor without a GPU


def test_audit_names_an_unbound_ray_actor_in_a_saved_tree(cli, tmp_path):
    """The same through check --pid, from a process in a saved DGX tree (its title in cmdline: setproctitle)."""
    from tests.conftest import fixture_copy, write_process

    root = fixture_copy("handmade-dgx-h100-ids", tmp_path / "dgx")
    proc = write_process(root, 4242, "CUDA_VISIBLE_DEVICES=4\0")
    (proc / "cmdline").write_text("ray::Trainer.train\0")
    for where in (proc, proc / "task" / "4242"):
        (where / "stat").write_text((where / "stat").read_text().replace("(python)", "(ray::Trainer)"))
    out = cli("--root", str(root), "check", "--pid", "4242", "--json").stdout
    found = [f for f in json.loads(out)["findings"] if f["code"] == "NT416"]
    assert len(found) == 1 and "Ray actor ray::Trainer.train holds GPU4" in found[0]["message"], out
