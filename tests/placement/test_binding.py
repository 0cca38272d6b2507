"""numatune.bind() and its worker helpers on this kernel (node 0; every NUMA kernel has it), and its planning
on fixture trees (dry_run, root=).

Binding changes the whole process (every thread's mask, the memory policy, range policies), so each live
case runs in a child process that prints what the kernel says afterwards as JSON; pytest's own process is
left as it was. The masks asked for are narrower than the child's starting mask (one core, where the child
started on another CPU), so a thread the call missed would show.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import numatune
from numatune.cpulist import format_cpulist, parse_cpulist
from numatune.errors import BindingError, NumatuneError, UsageError
from numatune.placement.binding import BindReport, bind, bind_actor, bind_worker
from numatune.plan.inherited import VARIABLE
from tests.conftest import PROJECT, fixture_root

CPUS = sorted(os.sched_getaffinity(0))
NEEDS_TWO = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs to see a mask change")
HM = "handmade-launch-2s4gpu-cxl"  # 2 sockets, 4 GPUs (2 per node: 0000:18, 0000:3b on 0; 0000:86, 0000:af on 1)


def first_core() -> list[int]:
    """CPU0's core (its SMT siblings): what cpu_bind="cores:1" on node 0 gives."""
    text = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").read_text().strip()

    return sorted(parse_cpulist(text))


def run_child(code: str, *, env: dict[str, str] | None = None, timeout: float = 240) -> dict:
    """Run `code` (which prints one JSON line last) in a fresh interpreter started on the last CPU only."""
    path = os.pathsep.join([str(PROJECT), *filter(None, [os.environ.get("PYTHONPATH")])])
    full = {**os.environ, "PYTHONPATH": path, **(env or {})}
    for key in ("NUMATUNE_BIND", VARIABLE):  # pytest's own binding (run under launch) is not the child's
        full.pop(key, None)
        if env and key in env:
            full[key] = env[key]
    prog = f"import os\nos.sched_setaffinity(0, {{{CPUS[-1]}}})\n" + textwrap.dedent(code)
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, cwd=PROJECT, env=full,
                         timeout=timeout, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- what it refuses, skips and plans (no change to this process) ---------------------------------------
def test_numatune_bind_0_is_a_no_op_that_says_so():
    before = os.sched_getaffinity(0)
    report = bind(node=0, environ={"NUMATUNE_BIND": "0"})
    assert not report.bound and report.skipped.startswith("NUMATUNE_BIND=0")
    assert report.describe() == f"numatune.bind: nothing bound: {report.skipped}"
    assert report.to_dict()["bound"] is False and report.to_dict()["plan"] is None
    assert os.sched_getaffinity(0) == before


def test_a_node_this_machine_lacks_is_an_error_unless_best_effort():
    from numatune.system import memsys

    missing = 1 + max(int(n[4:]) for n in os.listdir("/sys/devices/system/node") if n[4:].isdigit())
    before, policy = os.sched_getaffinity(0), memsys.get_mempolicy()
    with pytest.raises(BindingError, match=f"node {missing} .*does not exist"):
        bind(node=missing)
    report = bind(node=missing, best_effort=True)
    assert not report.bound and f"node {missing}" in report.skipped and report.warnings
    assert (os.sched_getaffinity(0), memsys.get_mempolicy()) == (before, policy)


@pytest.mark.parametrize(("kw", "message"), [
    ({"cpu_bind": "nodes"}, "cpu_bind 'nodes'"),
    ({"mem_policy": "membind"}, "mem_policy='membind'"),
    ({"node": -1}, "node=-1"),
    ({"local_size": 0}, "local_size=0"),
    ({"mem_nodes": ()}, "mem_nodes is empty"),
    ({"node": 0, "root": "/"}, "needs dry_run=True"),
    ({"node": 0, "mem_nodes": "0"}, "mem_nodes='0': expected a list of node ids"),
    ({"node": 0, "mem_nodes": [-1]}, "mem_nodes=[-1]: expected a list of node ids"),
    ({"node": 0, "mem_nodes": 0}, "mem_nodes=0: expected a list of node ids"),
    ({"node": 0, "mem_policy": "weighted", "weights": "0:4"}, "weights='0:4': expected {node: weight}"),
    ({"node": 0, "mem_policy": "weighted", "weights": {0: 256}}, "weights={0: 256}: expected {node: weight}"),
    ({"node": 0, "mem_policy": "weighted", "weights": {0: 0}}, "weights={0: 0}: expected {node: weight}"),
    ({"node": 0, "max_move_bytes": -1}, "max_move_bytes=-1: expected a non-negative integer"),
    ({"node": 0, "max_move_bytes": "1G"}, "max_move_bytes='1G': expected a non-negative integer"),
    ({"node": 0, "environ": [("LOCAL_RANK", "0")]}, "environ is a list: expected a mapping"),
    ({"gpu": True}, "gpu=True: expected an index, a PCI address or a GPU UUID"),
    ({"node": 0, "cpu_bind": None}, "cpu_bind=None: expected a string: node, socket"),
    ({"node": 0, "nic": 5}, "nic=5: expected a string: none, auto"),
    ({"node": 0, "allow_isolated": "yes"}, "allow_isolated='yes': expected True or False"),
    ({"node": 0, "best_effort": 1}, "best_effort=1: expected True or False"),
    ({"node": 0, "inherit": "yes"}, "inherit='yes': expected True, False or None"),
    # issue 41: a TypeError from the root's reader before
    ({"dry_run": True, "root": b"/"}, "root=b'/': expected a path as text"),
    ({"dry_run": True, "root": 123}, "root=123: expected a path as text"),
    ({"dry_run": True, "root": "a\0b"}, "root='a\\x00b': expected a path as text"),
])
def test_impossible_keywords_are_usage_errors(kw, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        bind(**kw)


@pytest.mark.parametrize(("kw", "message"), [
    ({"node": 1, "mem_policy": "gpu-memory"}, "mem_policy gpu-memory needs a GPU: this rank has none (node without"),
    ({"node": 7}, "node 7: node 7 does not exist"),
    ({"gpu": "0000:99:00.0"}, "gpu 0000:99:00.0: no PCI device"),
    ({"node": 1, "reserve_cores": 99}, "reserve_cores 99 leaves no core on node 1"),
    ({"node": 1, "mem_policy": "weighted", "mem_nodes": [0, 1], "weights": {0: 1}}, "weights gives no weight"),
])
def test_planning_errors_name_the_keywords_not_launchs_options(kw, message):
    """bind()'s caller wrote keywords: the planner's refusals name them so (no `--mem-policy` in a traceback)."""
    with pytest.raises(NumatuneError) as info:
        bind(dry_run=True, root=str(fixture_root("intel-xeon-L5640-2node")), environ={}, **kw)
    assert message in str(info.value) and message in info.value.message and "--" not in info.value.message


def test_a_worker_helper_checks_its_keywords_when_made():
    with pytest.raises(UsageError):
        bind_worker(cpu_bind="cores:0")


def test_dry_run_on_a_saved_root_resolves_as_launch_does():
    """The same resolver as launch: LOCAL_RANK=3 with the node's 4 GPUs visible is GPU3 (0000:af:00.0) on node 1,
    and exclusive splits node 1's 8 cores between the 2 GPUs in use there."""
    root = str(fixture_root(HM))
    env = {"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"}
    report = bind(dry_run=True, root=root, environ=env, cpu_bind="exclusive")
    assert not report.bound and report.skipped == "dry run: nothing applied"
    assert (report.plan.gpu.bdf, report.node, report.memory_policy, report.memory_nodes) == ("0000:af:00.0", 1,
                                                                                            "bind", (1,))
    assert report.cpus == (6, 7, 14, 15)
    doc = report.to_dict()
    assert doc["plan"]["schema"] == "numatune.launch/2" and doc["plan"]["gpu"]["bdf"] == "0000:af:00.0"


@pytest.mark.parametrize(("visible", "bdf", "node"), [("3", "0000:af:00.0", 1), ("0", "0000:18:00.0", 0),
                                                      ("2,1", "0000:86:00.0", 1)])
def test_a_ray_actor_is_rank_0_of_the_gpus_ray_made_visible(visible, bdf, node):
    """Stand-in for Ray: an actor asking num_gpus=1 gets CUDA_VISIBLE_DEVICES set to its GPU's index (Ray's
    worker sets it per actor); no local rank variable is set, so bind_actor is rank 0 of that view."""
    report = bind_actor(dry_run=True, root=str(fixture_root(HM)), environ={"CUDA_VISIBLE_DEVICES": visible})
    assert (report.plan.gpu.bdf, report.node) == (bdf, node)
    assert report.plan.rank.rank == 0


def test_a_ray_train_worker_keeps_its_local_rank():
    """Ray Train sets LOCAL_RANK and shows each worker the node's GPUs: launch's rule, not rank 0."""
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "LOCAL_RANK": "2"}
    report = bind_actor(dry_run=True, root=str(fixture_root(HM)), environ=env)
    assert (report.plan.gpu.bdf, report.node) == ("0000:86:00.0", 1)


def test_the_package_face_gives_the_api_lazily():
    assert numatune.bind is bind and numatune.BindReport is BindReport
    assert {"bind", "bind_worker", "bind_thread", "bind_actor"} <= set(dir(numatune))
    with pytest.raises(AttributeError):
        numatune.no_such_thing  # noqa: B018


# -- the page accounting, against numa_maps lines written for one real mapping -------------------------------------
class StatedMaps:
    """A Host stand-in whose numa_maps is written by the test (pages on a node this machine may lack) and whose
    maps is the kernel's: move_own_pages asks the kernel about the real mapping, judges from the stated pages."""

    def __init__(self, numa_maps: str) -> None:
        self.numa_maps = numa_maps

    def read_optional(self, path: str) -> str | None:
        if path == "/proc/self/numa_maps":
            return self.numa_maps
        with open(path) as f:
            return f.read()


@pytest.fixture
def buffer():
    import ctypes
    import mmap

    buf = mmap.mmap(-1, 2 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.write(b"x" * (2 << 20))
    yield ctypes.addressof(ctypes.c_char.from_buffer(buf))


def lines(addr: int) -> str:
    return (f"{addr:x} default anon=512 dirty=512 N0=256 N1=256 kernelpagesize_kB=4\n"
            f"{addr + (64 << 30):x} default file=/dev/shm/torch_1 mapped=3 N1=3 kernelpagesize_kB=4\n"
            f"{addr + (65 << 30):x} default file=/usr/lib/libc.so.6 mapped=40 N1=40 kernelpagesize_kB=4\n")


@pytest.mark.parametrize(("move", "budget", "why"), [(True, 0, "over max_move_bytes (0 bytes)"),
                                                      (False, 1 << 30, "not moved (move=False)")])
def test_pages_left_off_the_target_are_counted_with_the_reason(buffer, move, budget, why):
    """Off-target pages beyond the bound (or with move=False) stay, counted; shared memory is never moved; file
    pages (libraries) are not the process's own. The mapping still gets the range policy."""
    from numatune.placement.binding import move_own_pages
    from numatune.system import memsys

    before, after, moved, left, given = move_own_pages(StatedMaps(lines(buffer)), memsys.MPOL_BIND, (0,),
                                                       keep_policy=True, move=move, budget=budget, ps=4096)
    assert before == after == {0: 256, 1: 256} and moved == 0 and given == 1
    assert left == {why: 256, "shared memory (shm, memfd): other processes map it, not moved": 3}
    assert memsys.get_mempolicy(buffer) == (memsys.MPOL_BIND, frozenset({0}))


def test_a_range_policy_the_program_set_is_kept(buffer):
    from numatune.placement.binding import move_own_pages
    from numatune.system import memsys

    memsys.mbind(buffer, 2 << 20, memsys.MPOL_PREFERRED, (0,))
    *_, left, given = move_own_pages(StatedMaps(lines(buffer)), memsys.MPOL_BIND, (0,), keep_policy=True,
                                     move=True, budget=1 << 30, ps=4096)
    assert left["a range policy the program set (mbind) is kept"] == 256 and given == 0
    assert memsys.get_mempolicy(buffer) == (memsys.MPOL_PREFERRED, frozenset({0}))


def test_a_mapping_is_found_by_address_after_a_neighbour_merged_with_it():
    from numatune.placement.binding import _range_at

    ranges = [(0x1000, 0x5000, ""), (0x7000, 0x9000, "[heap]"), (0xA000, 0xB000, "[vdso]")]
    assert _range_at(ranges, 0x3000) == (0x5000, "")  # a numa_maps start inside a wider (merged) range
    assert _range_at(ranges, 0x7000) == (0x9000, "[heap]")
    assert _range_at(ranges, 0x6000) is None and _range_at(ranges, 0x500) is None
    assert _range_at(ranges, 0xB000) is None


# -- live: the whole process ---------------------------------------------------------------------------------
@NEEDS_TWO
def test_every_thread_the_memory_policy_and_the_existing_mappings():
    """Threads started before bind() get the mask; a thread started after inherits mask and policy; an existing
    thread keeps its own policy until bind_thread(); an existing anonymous mapping gets the range policy."""
    got = run_child("""
        import ctypes, json, mmap, threading
        import numatune
        from numatune.system import memsys
        go, done = threading.Event(), threading.Event()
        seen = {}
        def old():
            go.wait()
            seen["old"] = memsys.get_mempolicy()[0]
            numatune.bind_thread()
            seen["old_after"] = [memsys.get_mempolicy()[0], sorted(memsys.get_mempolicy()[1])]
            done.set()
        ts = [threading.Thread(target=old)] + [threading.Thread(target=done.wait) for _ in range(3)]
        for t in ts: t.start()
        buf = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf.write(b"x" * (4 << 20))
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        before = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
        report = numatune.bind(node=0, cpu_bind="cores:1")
        masks = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
        def new():
            seen["new"] = [sorted(os.sched_getaffinity(0)), memsys.get_mempolicy()[0]]
        t = threading.Thread(target=new); t.start(); t.join()
        go.set(); done.wait()
        print(json.dumps({"before": before, "masks": masks, "seen": seen, "report": report.to_dict(),
                          "range": memsys.get_mempolicy(addr)[0], "main": memsys.get_mempolicy()[0]}))
    """)
    core = first_core()
    assert len(got["masks"]) == 5 and all(m == [CPUS[-1]] for m in got["before"].values())
    assert all(m == core for m in got["masks"].values())
    report = got["report"]
    assert report["bound"] and report["cpus"] == core and report["memory"] == {"policy": "bind", "nodes": [0],
                                                                               "ranges": report["memory"]["ranges"]}
    assert {str(t["tid"]) for t in report["threads"]} == set(got["masks"])
    assert all(t["after"] == report["cpulist"] and t["error"] is None for t in report["threads"])
    assert report["memory"]["ranges"] >= 1 and report["pages"]["on_target"] == 1.0
    assert got["main"] == got["range"] == 2  # MPOL_BIND: the caller's policy and the existing mapping's
    assert got["seen"] == {"new": [core, 2], "old": 0, "old_after": [2, [0]]}


@NEEDS_TWO
def test_threads_started_while_binding_end_bound_too():
    """A thread that keeps starting short-lived threads during the call (a pool growing): bind() scans
    /proc/self/task again until no new thread appears, and what the bound spawner starts inherits the mask."""
    got = run_child("""
        import json, threading, time
        import numatune
        stop = threading.Event()
        def spawner():
            while not stop.is_set():
                t = threading.Thread(target=time.sleep, args=(0.05,)); t.start()
        threading.Thread(target=spawner, daemon=True).start()
        time.sleep(0.1)
        report = numatune.bind(node=0, cpu_bind="cores:1")
        time.sleep(0.2)  # the threads started before the spawner was bound have ended
        masks = {}
        for t in os.listdir("/proc/self/task"):
            try:
                masks[t] = sorted(os.sched_getaffinity(int(t)))
            except ProcessLookupError:  # a short-lived thread that ended meanwhile
                pass
        stop.set()
        print(json.dumps({"masks": masks, "threads": len(report.threads), "cpus": list(report.cpus)}))
    """)
    assert got["cpus"] == first_core() and got["threads"] >= 3
    assert len(got["masks"]) >= 2 and all(m == got["cpus"] for m in got["masks"].values()), got["masks"]


@NEEDS_TWO
@pytest.mark.parametrize(("env", "slurm"), [({}, False), ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}, True)])
def test_a_rebind_leaves_the_current_mask_except_inside_a_slurm_step(env, slurm):
    """Started on the last CPU only: a re-bind to node 0 takes node 0's CPUs within the cgroup's (the mask it
    replaces is no limit); inside a Slurm step the step's CPUs, the current mask, stay the limit, as for launch."""
    got = run_child("""
        import json
        import numatune
        report = numatune.bind(node=0)
        print(json.dumps({"cpus": list(report.cpus), "mask": sorted(os.sched_getaffinity(0))}))
    """, env=env)
    node0 = sorted(parse_cpulist(Path("/sys/devices/system/node/node0/cpulist").read_text().strip()) & set(CPUS))
    want = [CPUS[-1]] if slurm else node0
    assert got == {"cpus": want, "mask": want}


@NEEDS_TWO
def test_mem_policy_none_moves_without_a_policy_and_undoes_a_previous_bind():
    got = run_child("""
        import json
        import numatune
        from numatune.system import memsys
        first = numatune.bind(node=0)
        second = numatune.bind(node=0, mem_policy="none", cpu_bind="cores:1")
        print(json.dumps({"first": first.memory_policy, "second": second.to_dict()["memory"],
                          "policy": memsys.get_mempolicy()[0], "cpus": sorted(os.sched_getaffinity(0))}))
    """)
    assert got == {"first": "bind", "second": {"policy": "none", "nodes": [], "ranges": 0}, "policy": 0,
                   "cpus": first_core()}


def test_the_report_is_the_documented_json_document():
    got = run_child("""
        import json
        import numatune
        print(json.dumps(numatune.bind(node=0).to_dict()))
    """)
    assert got["schema"] == "numatune.bind/1"
    assert set(got) == documented_fields("numatune.bind/1")
    assert set(got["pages"]) == {"page_size", "before", "after", "moved", "moved_from", "on_target",
                                 "left"}
    assert got["env"].get("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS")) is not None


def documented_fields(schema: str) -> set[str]:
    """The top-level keys docs/json-schemas.md's table lists for `schema` (first column, in backticks)."""
    import re

    page = (PROJECT / "docs" / "json-schemas.md").read_text()
    section = page.split(f"## {schema}", 1)[1].split("\n## ", 1)[0]
    names = set()
    for row in re.findall(r"^\| ([^|]+) \|", section, re.M):
        names |= {n.removesuffix("[]") for n in re.findall(r"`([\w.\[\]]+)`", row) if "." not in n}
    return names


# -- a binding recorded by launch or bind(): NUMATUNE_BINDING -------------------------------------------------------
LAUNCHED_HM = "1 by=launch pid=578 node=0 cpus=0-1 mem=bind mems=0"  # a rank of the 2-socket tree, cores 0-1


def test_a_worker_plans_within_the_recorded_binding_and_bind_asked_elsewhere_says_it_moves():
    """On the 2-socket tree (planned, not applied): without a placement of its own, bind() stays within what the
    launcher recorded (its node, CPUs 0-1 of node 0's 0-3,8-11); asked for node 1 it moves there and says so; a
    worker helper asked for node 1 keeps the launcher's binding and says how to leave it."""
    root, env = str(fixture_root(HM)), {VARIABLE: LAUNCHED_HM}
    within = bind(dry_run=True, root=root, environ=env, cpu_bind="cores:1")
    assert (within.node, within.cpus, within.memory_nodes, within.relation, within.within) == (0, (0,), (0,),
                                                                                              "narrows", True)
    assert "node: 0 (NUMATUNE_BINDING: the binding numatune launch gave pid 578 (node 0, CPUs 0-1, memory bind 0))" \
        in within.reasons
    doc = within.to_dict()["inherited"]
    assert doc == {"by": "launch", "pid": 578, "node": 0, "cpus": [0, 1], "cpulist": "0-1",
                   "memory": {"policy": "bind", "nodes": [0]}, "narrowed": False, "within": True, "relation": "narrows"}
    moved = bind(dry_run=True, root=root, environ=env, node=1)
    assert moved.node == 1 and not moved.within and moved.relation == "moves"
    assert any(w.startswith("moves the binding numatune launch gave pid 578 (node 0, CPUs 0-1, memory bind 0): "
                            "to node 1, CPUs 4-7,12-15, memory bind 1") for w in moved.warnings), moved.warnings
    with pytest.raises(BindingError) as info:
        bind(dry_run=True, root=root, environ=env, node=1, inherit=True)
    assert "no usable CPU on node 1" in info.value.message and "inherit=False" in info.value.hint
    kept = bind(dry_run=True, root=root, environ=env, node=1, inherit=True, best_effort=True)
    assert not kept.bound and kept.skipped.endswith("kept the binding numatune launch gave pid 578 (node 0, CPUs 0-1, "
                                                    "memory bind 0)")
    widened_memory = bind(dry_run=True, root=root, environ=env, mem_policy="interleave", mem_nodes=[0, 1],
                          inherit=True)
    assert (widened_memory.memory_policy, widened_memory.memory_nodes) == ("bind", (0,))
    assert any(r.startswith("memory: interleave 0-1 would reach outside") for r in widened_memory.reasons)
    ignored = bind(dry_run=True, root=root, environ=env, inherit=False, node=0)
    assert (ignored.within, ignored.relation, ignored.cpus) == (False, "widens", (0, 1, 2, 3, 8, 9, 10, 11))


@NEEDS_TWO
def test_a_record_this_process_has_left_is_ignored_with_a_warning():
    """Started on the last CPU with a record naming the first only (a stale variable): nothing is kept from it."""
    got = run_child("""
        import json
        import numatune
        report = numatune.bind(node=0, inherit=True)
        print(json.dumps({"inherited": report.to_dict()["inherited"], "warnings": report.warnings,
                          "record": os.environ["NUMATUNE_BINDING"]}))
    """, env={VARIABLE: f"1 by=launch pid=1 node=0 cpus={CPUS[0]} mem=bind mems=0"})
    assert any("no longer holds" in w for w in got["warnings"])  # the record is not used: the mask it runs with is
    assert (got["inherited"]["by"], got["inherited"]["cpus"]) == ("process", [CPUS[-1]])
    assert got["record"].startswith("1 by=bind ")  # replaced by what this bind() bound


@NEEDS_TWO
def test_bind_thread_repeats_the_launchers_binding_without_a_bind_of_its_own():
    got = run_child(f"""
        import json, threading
        import numatune
        out = {{}}

        def pool_thread():
            os.sched_setaffinity(0, {set(CPUS)!r})  # a library moved this thread
            out["bound"] = numatune.bind_thread()
            out["mask"] = sorted(os.sched_getaffinity(0))

        t = threading.Thread(target=pool_thread)
        t.start()
        t.join()
        print(json.dumps(out))
    """, env={VARIABLE: f"1 by=launch pid=1 node=0 cpus={CPUS[-1]} mem=bind mems=0"})
    assert got == {"bound": True, "mask": [CPUS[-1]]}


def launched(tmp_path: Path, job: str, *args: str) -> list[dict]:
    """`numatune launch --node 0 --cpu-bind cores:1 -- python JOB ARGS`: the JSON lines the job prints."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(job))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMATUNE_BIND", VARIABLE, "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT), *filter(None, [os.environ.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, "-m", "numatune", "launch", "--node", "0", "--cpu-bind", "cores:1", "--",
                          sys.executable, str(script), *args], capture_output=True, text=True, cwd=PROJECT, env=env,
                         timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def node0_cpus() -> list[int]:
    return sorted(parse_cpulist(Path("/sys/devices/system/node/node0/cpulist").read_text().strip()) & set(CPUS))


NARROWING = pytest.mark.skipif(len(CPUS) < 2 or first_core() == node0_cpus(),
                               reason="needs node 0 to have more than one core: cores:1 must be a narrowing")

POOL_JOB = """
    import json, multiprocessing as mp, os, sys
    import numatune
    from numatune.placement.binding import last_report

    def task(_):
        r = last_report()
        tids = os.listdir("/proc/self/task")
        return {"pid": os.getpid(), "masks": [sorted(os.sched_getaffinity(int(t))) for t in tids],
                "report": r.to_dict()}

    if __name__ == "__main__":
        kw = json.loads(sys.argv[2])
        print(json.dumps({"rank": os.getpid(), "mask": sorted(os.sched_getaffinity(0)),
                          "record": os.environ.get("NUMATUNE_BINDING")}))
        with mp.get_context(sys.argv[1]).Pool(2, initializer=numatune.bind_worker(**kw)) as pool:
            for row in pool.map(task, range(6)):
                print(json.dumps(row))
"""


@NARROWING
@pytest.mark.parametrize("start", ["fork", "spawn"])
@pytest.mark.parametrize("kw", [{}, {"node": 0}], ids=["bind_worker()", "bind_worker(node=0)"])
def test_pool_workers_under_launch_cores_1_keep_the_ranks_cpu(tmp_path, start, kw):
    """issue 40: `launch --node 0 --cpu-bind cores:1` whose Pool binds its workers with bind_worker (with or
    without node=0) used to give them every CPU of node 0; they keep the rank's CPU, and their reports say so."""
    rank, *rows = launched(tmp_path, POOL_JOB, start, json.dumps(kw))
    assert rank["mask"] == first_core() and rank["record"] == (
        f"1 by=launch pid={rank['rank']} node=0 cpus={','.join(map(str, first_core()))} mem=bind mems=0")
    assert len(rows) == 6 and {r["pid"] for r in rows} - {rank["rank"]}
    for row in rows:
        assert all(m == first_core() for m in row["masks"]), row
        report = row["report"]
        assert report["bound"] and report["cpus"] == first_core() and report["memory"]["nodes"] == [0]
        assert report["inherited"]["by"] == "launch" and report["inherited"]["pid"] == rank["rank"]
        assert report["inherited"]["within"] and report["inherited"]["relation"] == "same"


@NARROWING
def test_bind_asked_for_the_whole_node_under_launch_says_it_widens(tmp_path):
    (row,) = launched(tmp_path, """
        import json, os
        import numatune
        report = numatune.bind(node=0)
        print(json.dumps({"report": report.to_dict(), "describe": report.describe(),
                          "mask": sorted(os.sched_getaffinity(0)), "record": os.environ["NUMATUNE_BINDING"]}))
    """)
    assert row["mask"] == node0_cpus() and row["report"]["inherited"]["relation"] == "widens"
    assert "; widens the binding numatune launch gave pid" in row["describe"]
    assert any(w.startswith("widens the binding numatune launch gave") for w in row["report"]["warnings"])
    assert row["record"].startswith("1 by=bind ") and f"cpus={format_cpulist(node0_cpus())} " in row["record"]


# -- live: the worker helpers with the real torch --------------------------------------------------------------
@NEEDS_TWO
def test_dataloader_workers_are_bound_by_worker_init_fn(tmp_path):
    """DataLoader(num_workers=2, worker_init_fn=numatune.bind_worker(...)): each worker process, including a thread
    it had started before the call (as a library would), ends on node 0's first core within the rank's mask (the
    rank runs on the last CPU only: the workers keep it, never widened to node 0's first core); each writes its
    report."""
    pytest.importorskip("torch", reason="PyTorch is not installed (scripts/test.sh installs it)")
    got = run_child(f"""
        import json, threading
        import torch
        import numatune

        def masks():
            return {{t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}}

        class Masks(torch.utils.data.Dataset):
            def __len__(self):
                return 8
            def __getitem__(self, i):
                return json.dumps({{"pid": os.getpid(), "masks": masks()}})

        binder = numatune.bind_worker(node=0, cpu_bind="cores:1", report_to={str(tmp_path)!r} + "/w-{{pid}}.json")

        def init(worker_id):
            threading.Thread(target=threading.Event().wait, daemon=True).start()  # a thread that exists before
            binder(worker_id)

        loader = torch.utils.data.DataLoader(Masks(), num_workers=2, worker_init_fn=init, batch_size=None)
        rows = [json.loads(r) for r in loader]
        print(json.dumps({{"rows": rows, "parent": sorted(os.sched_getaffinity(0))}}))
    """)
    core = [CPUS[-1]]  # the rank's mask: node 0's first core within it, or nothing but it
    pids = {r["pid"] for r in got["rows"]}
    assert len(pids) == 2 and got["parent"] == [CPUS[-1]]  # the parent is not touched
    for row in got["rows"]:
        assert len(row["masks"]) >= 2 and all(m == core for m in row["masks"].values()), row
    reports = {int(p.name[2:-5]): json.loads(p.read_text()) for p in tmp_path.glob("w-*.json")}
    assert set(reports) == pids
    assert all((r["cpus"] == core if r["bound"] else "kept" in r["skipped"]) and len(r["threads"]) >= 2 * r["bound"]
               for r in reports.values())


@NEEDS_TWO
def test_torch_multiprocessing_pool_initializer_binds_each_worker():
    """torch.multiprocessing with the spawn start method: the initializer is pickled (BindWorker), each worker is
    bound before its first task, and the caller's own initializer runs after with its arguments."""
    pytest.importorskip("torch", reason="PyTorch is not installed (scripts/test.sh installs it)")
    got = run_child("""
        import json
        import torch.multiprocessing as mp
        import numatune
        from tests.placement.test_binding import pool_task, pool_then

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            with ctx.Pool(2, initializer=numatune.bind_worker(pool_then, node=0, cpu_bind="cores:1"),
                          initargs=("tag",)) as pool:
                rows = pool.map(pool_task, range(4))
            print(json.dumps(rows))
    """)
    core = [CPUS[-1]]  # the caller's mask: the spawned workers start with it and stay within it
    assert len({r["pid"] for r in got}) >= 1
    for row in got:
        assert row["then"] == "tag" and (row["cpus"] == core if row["bound"] else True)
        assert all(m == core for m in row["masks"].values()), row


_THEN: list[str] = []


def pool_then(tag: str) -> None:
    _THEN.append(tag)


def pool_task(_: int) -> dict:
    from numatune.placement.binding import last_report

    report = last_report()
    return {"pid": os.getpid(), "then": _THEN[-1] if _THEN else None, "bound": report.bound,
            "cpus": list(report.cpus), "masks": {t: sorted(os.sched_getaffinity(int(t)))
                                                 for t in os.listdir("/proc/self/task")}}


@NEEDS_TWO
def test_ray_actors_are_bound_from_init():
    """Ray from PyPI (when installed): two actors with num_gpus=1 each (declared GPUs: Ray sets
    CUDA_VISIBLE_DEVICES per actor all the same); bind_actor resolves each actor's GPU on the 4-GPU fixture tree
    as rank 0 of its view, and binds the actor's own process live, every one of its threads."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install ray: about 80 MB, adds msgpack, protobuf)")
    got = run_child(f"""
        import json
        import ray
        import numatune

        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)

        @ray.remote(num_gpus=1, num_cpus=0)
        class Actor:
            def __init__(self):
                self.planned = numatune.bind_actor(dry_run=True, root={str(fixture_root(HM))!r})
                self.report = numatune.bind_actor(node=0, cpu_bind="cores:1")

            def info(self):
                return {{"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpu": self.planned.plan.gpu.bdf,
                        "bound": self.report.bound, "threads": len(self.report.threads),
                        "masks": {{t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}}}}

        actors = [Actor.remote() for _ in range(2)]
        rows = ray.get([a.info.remote() for a in actors])
        ray.shutdown()
        print(json.dumps(rows))
    """)
    by_visible = {r["visible"]: r for r in got}
    assert set(by_visible) == {"0", "1"}
    assert by_visible["0"]["gpu"] == "0000:18:00.0" and by_visible["1"]["gpu"] == "0000:3b:00.0"
    for row in got:
        assert row["threads"] >= 2  # bound within the mask the actor's process was given (the driver's last CPU)
        assert all(m == [CPUS[-1]] for m in row["masks"].values()), row


@NARROWING
def test_dataloader_workers_under_launch_cores_1_keep_the_ranks_cpu(tmp_path):
    """issue 40 with torch's DataLoader: worker_init_fn=numatune.bind_worker() (persistent workers, pinned memory
    asked for on a CPU build) keeps each worker on the rank's CPU, every thread of it."""
    pytest.importorskip("torch", reason="PyTorch is not installed (scripts/test.sh installs it)")
    rank, *rows = launched(tmp_path, """
        import json, os
        import torch
        import numatune
        from numatune.placement.binding import last_report

        class Masks(torch.utils.data.Dataset):
            def __len__(self):
                return 6
            def __getitem__(self, i):
                r = last_report()
                tids = os.listdir("/proc/self/task")
                return json.dumps({"pid": os.getpid(), "report": r.to_dict()["inherited"] | {"bound": r.bound},
                                   "masks": [sorted(os.sched_getaffinity(int(t))) for t in tids]})

        if __name__ == "__main__":
            print(json.dumps({"rank": os.getpid(), "mask": sorted(os.sched_getaffinity(0))}))
            loader = torch.utils.data.DataLoader(Masks(), num_workers=2, batch_size=None, persistent_workers=True,
                                                 worker_init_fn=numatune.bind_worker())
            for row in loader:
                print(row)
    """)
    assert rank["mask"] == first_core() and len(rows) == 6 and len({r["pid"] for r in rows}) == 2
    for row in rows:
        assert all(m == first_core() for m in row["masks"]), row
        assert row["report"]["bound"] and row["report"]["relation"] == "same"
        assert row["report"]["within"] and row["report"]["pid"] == rank["rank"]


def test_a_slurm_repeat_count_costs_bind_nothing():
    """issue 47: SLURM_TASKS_PER_NODE='2(x999999999)' with a large SLURM_NODEID built a list as long as the node
    id in bind() too (1.6 GB); the local size is counted, and the planning stays within a few MiB."""
    import tracemalloc

    env = {"SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "2(x999999999)", "SLURM_NODEID": "999999998"}
    tracemalloc.start()
    try:
        report = bind(dry_run=True, root=str(fixture_root(HM)), environ=env, mem_policy="none")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.plan.rank.local_size == 2 and report.plan.gpu.bdf == "0000:3b:00.0"
    assert peak < 64 << 20, peak
