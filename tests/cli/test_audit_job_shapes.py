"""The job-shape matrix as real processes on this machine (issue 46, points 1, 5 and 6): launchers (torchrun, srun's
task running torchrun, a shell that does not exec, a rank that names itself, an mpirun-like parent passing rank
variables, a launcher passing --local-rank on the command line, two jobs side by side, an unrelated LOCAL_RANK=0
process) × worker kinds (fork, spawn, forkserver; DataLoader and multiprocessing.Pool), each read back through one
`audit --ranks --json` and checked exactly: every process of the job with its role, rank_pid, kind and job, and
nothing else in the job.

The programs (tests/data/jobshapes: rank.py, parent.py) are started once for the module, write the PIDs of what
they started, and sleep until killed. Only the test's own jobs are looked at (by job: the PID of their topmost
process), so the matrix passes while other jobs run on the machine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT

DATA = PROJECT / "tests" / "data" / "jobshapes"
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "PyTorch is not installed: torchrun and DataLoader shapes need it (scripts/test.sh installs it)"
SLURM = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "4711", "SLURM_STEP_ID": "0"}
READY_S = 150


def torchrun() -> list[str]:
    found = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "torch.distributed.run"]


def shapes(tmp: Path) -> dict[str, dict]:
    """name -> how it starts (argv, environment), how many ranks it reports, the launchers' kinds by depth (the
    top process first; None: a parent that is no named launcher, its comm not checked)."""
    py, rank = sys.executable, str(DATA / "rank.py")
    mpirun = tmp / "mpirun"  # an mpirun-like parent known by its name, as Open MPI's is
    mpirun.write_text(f"#!{py}\n" + (DATA / "parent.py").read_text())
    mpirun.chmod(0o755)
    wrap = tmp / "run.sh"  # a wrapper that waits on its child: `srun ./job.sh`, `torchrun --no-python ./run.sh`
    wrap.write_text('#!/bin/bash\n"$@"\necho "exit $?"\n')
    wrap.chmod(0o755)
    out = {
        "non-exec wrapper / spawn": dict(argv=["bash", str(wrap), py, rank, "spawn"], env={"LOCAL_RANK": "0"},
                                         ranks=1, launchers=["bash"]),
        "self-naming rank / spawn": dict(argv=[py, rank, "spawn", "--self-named"], env={}, ranks=1, launchers=[]),
        "mpirun-like / forkserver, pool-spawn": dict(
            argv=[str(mpirun), "2", "--env", "OMPI_COMM_WORLD_LOCAL_RANK,OMPI_COMM_WORLD_RANK", "--", py, rank,
                  "forkserver,pool-spawn"], env={}, ranks=2, launchers=["mpirun"]),
        "--local-rank launcher / fork, pool-fork": dict(
            argv=[py, str(DATA / "parent.py"), "2", "--", py, rank, "fork,pool-fork", "--local-rank={i}"], env={},
            ranks=2, launchers=[None]),
        "unrelated LOCAL_RANK=0 process": dict(argv=[py, rank, "none"], env={"LOCAL_RANK": "0"}, ranks=1,
                                               launchers=[]),
    }
    if HAS_TORCH:
        out["torchrun / dataloader, pool-fork"] = dict(
            argv=[*torchrun(), "--standalone", "--nproc-per-node", "2", rank, "dataloader,pool-fork"], env={},
            ranks=2, launchers=["torchrun"])
        out["srun → torchrun / fork"] = dict(
            argv=[py, str(DATA / "parent.py"), "1", "--", *torchrun(), "--standalone", "--nproc-per-node", "1", rank,
                  "fork"], env=SLURM, ranks=1, launchers=[None, "torchrun"])
    return out


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Every shape started at once; when all have reported, one `audit --ranks --json` of the machine."""
    from click.testing import CliRunner

    from numatune.cli import main

    tmp = tmp_path_factory.mktemp("jobshapes")
    out = tmp / "out"
    out.mkdir()
    started: dict[str, dict] = {}
    base = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "RANK", "SLURM_PROCID", "SLURM_LOCALID")}
    try:
        for name, how in shapes(tmp).items():
            tag = f"s{len(started)}"
            env = {**base, **how["env"], "JOBSHAPE_OUT": str(out), "JOBSHAPE_TAG": tag, "OMP_NUM_THREADS": "1"}
            proc = subprocess.Popen(how["argv"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            started[name] = {**how, "tag": tag, "top": proc.pid, "proc": proc}
        want = sum(s["ranks"] for s in started.values())
        deadline = time.monotonic() + READY_S
        while len(list(out.glob("*.json"))) < want and time.monotonic() < deadline:
            dead = [n for n, s in started.items() if s["proc"].poll() is not None]
            assert not dead, f"exited before reporting: {dead}"
            time.sleep(0.2)
        reports = [json.loads(p.read_text()) | {"tag": p.name.partition("-")[0]} for p in out.glob("*.json")]
        assert len(reports) == want, f"{len(reports)} of {want} ranks reported within {READY_S} s"
        for s in started.values():
            s["reports"] = sorted((r for r in reports if r["tag"] == s["tag"]), key=lambda r: r["local_rank"])
        r = CliRunner().invoke(main, ["audit", "--ranks", "--json"], catch_exceptions=False)
        assert r.exit_code in (0, 1), r.stderr
        doc = json.loads(r.stdout)
        yield started, doc
    finally:
        stop_all(started, out)


def tree(pid: int) -> set[int]:
    """`pid` and every live process under it."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                kids.setdefault(int(stat.rpartition(")")[2].split()[1]), []).append(int(entry))
    out, todo = {pid}, [pid]
    while todo:
        for c in kids.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def stop_all(started: dict[str, dict], out: Path) -> None:
    """Every process the shapes started, killed: their trees (torchrun starts each rank in a session of its own, so
    no one process group holds them), and whatever a rank reported, should it have been reparented already."""
    pids: set[int] = set()
    for s in started.values():
        pids |= tree(s["proc"].pid)
    for report in out.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            rep = json.loads(report.read_text())
            for pid in (rep["pid"], *map(int, rep["workers"]), *map(int, rep["helpers"])):
                pids |= tree(pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for s in started.values():
        s["proc"].wait()


def expected(shape: dict) -> dict[int, tuple]:
    """pid -> (role, rank_pid, kind) of every process the shape's job holds."""
    out: dict[int, tuple] = {}
    top = shape["top"]
    chain = [top]
    if len(shape["launchers"]) > 1:  # the launcher under the top: the ranks' parent
        chain.append(shape["reports"][0]["ppid"])
    for pid, kind in zip(chain, shape["launchers"], strict=False):
        out[pid] = ("launcher", None, kind)
    for rep in shape["reports"]:
        rank = rep["pid"]
        out[rank] = ("rank", rank, None)
        for pid, kind in rep["workers"].items():
            out[int(pid)] = ("worker", rank, kind)
        for pid, kind in rep["helpers"].items():
            out[int(pid)] = ("helper", rank, kind)
    return out


NAMES = ["non-exec wrapper / spawn", "self-naming rank / spawn", "mpirun-like / forkserver, pool-spawn",
         "--local-rank launcher / fork, pool-fork", "unrelated LOCAL_RANK=0 process",
         "torchrun / dataloader, pool-fork", "srun → torchrun / fork"]


@pytest.mark.parametrize("name", NAMES)
def test_each_shape_is_its_launchers_ranks_workers_and_helpers_exactly(jobs, name):
    started, doc = jobs
    if name not in started:
        pytest.skip(NO_TORCH)
    shape = started[name]
    job = shape["top"] if shape["launchers"] else shape["reports"][0]["pid"]
    got = {p["pid"]: p for p in doc["processes"] if p["job"] == job}
    want = expected(shape)
    unnamed = {pid for pid, w in want.items() if w[0] == "launcher" and w[2] is None}  # its comm: not checked
    seen = {pid: (p["role"], p["rank_pid"], None if pid in unnamed else p["kind"]) for pid, p in got.items()}
    assert seen == want, (name, {pid: (p["comm"], p["command"][:3]) for pid, p in got.items()})
    for rep in shape["reports"]:
        rank = got[rep["pid"]]
        assert rank["rank"] == rep["local_rank"]
        assert rank["rank_inferred_from"] == ("children" if "--self-named" in shape["argv"] else
                                              "command line" if "--local-rank={i}" in shape["argv"] else None)
    assert {j["job"] for j in doc["job"]["jobs"]} >= {job}


def test_two_jobs_side_by_side_are_two_jobs(jobs):
    started, doc = jobs
    tops = [s["top"] if s["launchers"] else s["reports"][0]["pid"] for s in started.values()]
    listed = {j["job"]: j for j in doc["job"]["jobs"]}
    assert set(tops) <= set(listed) and len(set(tops)) == len(tops)
    for s in started.values():
        job = listed[s["top"] if s["launchers"] else s["reports"][0]["pid"]]
        assert sorted(job["ranks"]) == sorted(r["pid"] for r in s["reports"])


def test_the_gpu_check_verdict_looks_only_at_its_own_job(jobs):
    """gpu-check's audit-ranks check passes for a job while an unrelated LOCAL_RANK=0 process runs on the machine
    (issue 46, point 5): it looks only at the tree under its launcher."""
    started, doc = jobs
    name = "torchrun / dataloader, pool-fork" if HAS_TORCH else "non-exec wrapper / spawn"
    spec = importlib.util.spec_from_file_location("gpu_check", PROJECT / "scripts" / "gpu-check.py")
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    shape = started[name]
    rank = shape["reports"][0]
    workers = [int(p) for p in rank["workers"]]
    own = gc.the_tree(shape["top"])
    assert gc.audit_ranks_verdict(doc, rank["pid"], workers, own)[0] == "PASS"
    other = started["unrelated LOCAL_RANK=0 process"]["reports"][0]["pid"]
    assert other not in own and next(p for p in doc["processes"] if p["pid"] == other)["role"] == "rank"
