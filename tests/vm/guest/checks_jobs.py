"""Job shapes under a real Slurm and binding failures on two real nodes (issue 46), in the two-socket guest.

- `slurm_job_tree`: `srun -n2 --cpu-bind=map_cpu:1,3 python job_rank.py` and an sbatch script whose srun runs
  each rank behind a bash that does not exec; every rank starts a fork worker and a spawn Pool worker (the Pool
  starts the resource tracker). One `numatune audit --ranks --json` names exactly: slurmstepd (and the bash
  wrappers) as launchers above the ranks, the four tasks as the only ranks (local rank = SLURM_LOCALID), each
  worker and helper under its rank with its kind, one job per step (the tree under its slurmstepd); srun run by
  hand is no part of a job, and the sbatch script (slurm_script) and its srun, which carry the batch step's
  SLURM_PROCID=0, are launchers of the batch step's job, never one more rank 0.
- `slurm_bind_worker`: the workers use `numatune.bind_worker()` (no launch record: the rank's own mask is the
  outer limit); under map_cpu every worker's sched_getaffinity stays within its rank's one CPU, and the ranks of
  the sbatch step, which narrow themselves (os.sched_setaffinity) from their socket to one CPU, keep their
  workers on that CPU; audit finds no worker outside its rank (NT408).
- `cpuset_without_the_ranks_node_is_nt411`: in a child cgroup v2 whose cpuset holds only node 1's CPUs, `numatune
  launch --node 0 -- true` and `numatune.bind(node=0)` fail naming NT411 (exit 7), the guest's run of
  tests/analysis/test_binding_failures.py's live test that a one-node machine skips.

The two Slurm checks run inside `slurm_places_as_numatune_says` (checks_slurm.py), on its phase-1 Slurm (the node
line of `emit slurm`, task/cgroup) before it restarts Slurm for phase 2, so no daemon starts twice; each is
reported as its own check from what that run recorded (its seconds are in the details).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from vm_checks import Context, check
from vm_guest import REPO, CheckFailed, EngineMissing, numatune, parse_cpulist, read, wait_for

RANK = Path(__file__).with_name("job_rank.py")
TREE, BINDING = "slurm_job_tree", "slurm_bind_worker"
RECORD = "slurm_jobs"  # Context.deferred key: {check name: (status, details)}
READY_S = 300


def _env(base: dict[str, str]) -> dict[str, str]:
    return {**base, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def _comm(pid: int) -> str:
    return read(f"/proc/{pid}/comm", "?")


def _ppid(pid: int) -> int:
    return int(read(f"/proc/{pid}/stat", "0 (x) S 0").rpartition(")")[2].split()[1])


def _ranks(work: Path, tag: str) -> list[dict[str, Any]]:
    return sorted((json.loads(p.read_text()) for p in work.glob(f"rank-{tag}-*.json")), key=lambda r: r["procid"])


def run_under_slurm(ctx: Context, cluster: Any, work: Path) -> None:
    """Called by slurm_places_as_numatune_says while its phase-1 Slurm runs: starts both shapes, audits them once,
    records each check's outcome in ctx.deferred[RECORD]. Never raises: the Slurm check goes on to phase 2."""
    t0 = time.monotonic()
    got: dict[str, tuple[str, Any]] = ctx.deferred.setdefault(RECORD, {})
    jobs = work / "jobs"
    srun: subprocess.Popen[bytes] | None = None
    batch = ""
    env = _env(cluster.env)
    try:
        shutil.rmtree(jobs, ignore_errors=True)
        jobs.mkdir(parents=True)
        py = sys.executable
        argv = ["srun", "--oversubscribe", "--job-name=jobs-srun", "-n2", "-c2", "--ntasks-per-socket=1",
                "--cpu-bind=map_cpu:1,3", py, str(RANK), str(jobs), "srun", "bind"]
        srun = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        cluster.procs.append(srun)
        # srun 22.05 reads no SLURM_CPUS_PER_TASK: the step repeats the job's layout
        wrap = (f"srun -n2 -c2 --ntasks-per-socket=1 --cpu-bind=sockets bash -c '{py} {RANK} {jobs} sbatch narrow; "
                "true'")
        sb = subprocess.run(["sbatch", "--parsable", "--oversubscribe", "--job-name=jobs-sbatch", "-n2", "-c2",
                             "--ntasks-per-socket=1", f"--output={jobs}/sbatch.out", f"--chdir={jobs}",
                             f"--wrap={wrap}"], env=env, capture_output=True, text=True, timeout=60, check=False)
        if sb.returncode != 0:
            raise CheckFailed(f"sbatch refused the job: {sb.stderr.strip()[-800:]}")
        batch = sb.stdout.strip().split(";")[0]

        def ready() -> bool:
            if srun is not None and srun.poll() is not None:
                return True
            if "error" in read(jobs / "sbatch.out", "").lower():
                return True
            return len(_ranks(jobs, "srun")) == 2 and len(_ranks(jobs, "sbatch")) == 2

        wait_for(ready, timeout=READY_S, interval=1)
        shapes = {"srun": _ranks(jobs, "srun"), "sbatch": _ranks(jobs, "sbatch")}
        if any(len(r) != 2 for r in shapes.values()):
            err = ""
            if srun.poll() is not None:
                err = srun.stderr.read().decode(errors="replace")[-800:] if srun.stderr else ""
            raise CheckFailed(f"ranks reported: srun {len(shapes['srun'])}/2 (rc {srun.poll()}: {err}), sbatch "
                              f"{len(shapes['sbatch'])}/2 (job {batch}: {read(jobs / 'sbatch.out', '')[-800:]})")
        res = numatune("audit", "--ranks", "--json", timeout=240)
        if res.returncode not in (0, 1):
            raise CheckFailed(f"numatune audit --ranks failed:\n{res.summary()}")
        doc = json.loads(res.stdout)
        setup = round(time.monotonic() - t0, 1)
        for name, judge in ((TREE, _judge_tree), (BINDING, _judge_binding)):
            try:
                got[name] = ("passed", {**judge(doc, shapes, srun.pid, jobs), "seconds_in_slurm_check": setup})
            except CheckFailed as exc:
                got[name] = ("failed", str(exc))
    except CheckFailed as exc:
        for name in (TREE, BINDING):
            got.setdefault(name, ("failed", str(exc)))
    except Exception:  # a bug here must not break the Slurm check it runs in
        for name in (TREE, BINDING):
            got.setdefault(name, ("error", traceback.format_exc()))
    finally:
        try:
            _stop(jobs, srun, batch, env, cluster)
        except Exception:  # the Slurm check goes on to phase 2 whatever happened here
            for name in (TREE, BINDING):
                got.setdefault(name, ("error", "stopping the job shapes: " + traceback.format_exc()))
        for entry in got.values():
            if entry[0] == "passed":
                entry[1]["seconds_total"] = round(time.monotonic() - t0, 1)


def _stop(jobs: Path, srun: subprocess.Popen[bytes] | None, batch: str, env: dict[str, str], cluster: Any) -> None:
    """The ranks stop on DIR/stop (their workers with them): srun's step and the sbatch job end by themselves."""
    (jobs / "stop").touch()
    if srun is not None:
        try:
            srun.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(srun.pid, signal.SIGTERM)
            srun.wait(timeout=30)
        with contextlib.suppress(ValueError):
            cluster.procs.remove(srun)
    if batch:
        def gone() -> bool:
            return not subprocess.run(["squeue", "-h", "-j", batch], env=env, capture_output=True, text=True,
                                      timeout=20, check=False).stdout.strip()

        if not wait_for(gone, 60, 2):
            subprocess.run(["scancel", batch], env=env, capture_output=True, timeout=20, check=False)


def _judge_tree(doc: dict[str, Any], shapes: dict[str, list[dict[str, Any]]], srun_pid: int,
                jobs: Path) -> dict[str, Any]:
    rows = {p["pid"]: p for p in doc["processes"]}

    def place(pid: int) -> tuple[Any, ...]:
        p = rows.get(pid)
        return ("absent",) if p is None else (p["role"], p["rank_pid"], p["kind"], p["job"])

    def where(pid: int) -> str:
        return f"{pid} {_comm(pid)} {place(pid)}"

    out: dict[str, Any] = {}
    for tag, ranks in shapes.items():
        parents = [r["ppid"] for r in ranks]  # srun: slurmstepd; sbatch: each rank's bash, under slurmstepd
        steps = set(parents) if tag == "srun" else {_ppid(p) for p in parents}
        if len(steps) != 1 or (tag == "sbatch" and len(set(parents)) != 2):
            raise CheckFailed(f"{tag}: the tasks' parents {[where(p) for p in parents]} are not "
                              f"{'one slurmstepd' if tag == 'srun' else 'two shells under one slurmstepd'}")
        job = steps.pop()
        chain = [job, *(parents if tag == "sbatch" else [])]
        want: dict[int, tuple[Any, ...]] = {job: ("launcher", None, "slurmstepd", job)}
        want.update({p: ("launcher", None, "bash", job) for p in chain[1:]})
        for r in ranks:
            want[r["pid"]] = ("rank", r["pid"], None, job)
            want.update({int(w): ("worker", r["pid"], k, job) for w, k in r["workers"].items()})
            want.update({int(h): ("helper", r["pid"], k, job) for h, k in r["helpers"].items()})
        seen = {pid: place(pid) for pid in want}
        wrong = {where(pid): want[pid] for pid in want if seen[pid] != want[pid]}
        if wrong:
            raise CheckFailed(f"{tag}: audit --ranks places (role, rank_pid, kind, job) {wrong} (got -> wanted)")
        extra = {where(pid) for pid, p in rows.items() if p["job"] == job and pid not in want}
        if extra:
            raise CheckFailed(f"{tag}: job {job} holds processes that are none of its own: {sorted(extra)}")
        for r in ranks:
            if rows[r["pid"]]["rank"] != r["localid"]:
                raise CheckFailed(f"{tag}: rank {r['pid']} is local rank {rows[r['pid']]['rank']} in audit, "
                                  f"SLURM_LOCALID={r['localid']}")
        out[tag] = {"job": job, "launchers": [where(p) for p in chain],
                    "ranks": {r["pid"]: {"localid": r["localid"], "workers": r["workers"], "helpers": r["helpers"]}
                              for r in ranks}}
    # srun run by hand (no rank variables) is no part of any job; the sbatch script and its srun carry the batch
    # step's SLURM_PROCID=0/SLURM_LOCALID=0: launchers of the batch step's job, which holds no rank. (srun 22.05
    # runs as two processes, the second a child of the first.)
    sruns = [int(d) for d in os.listdir("/proc") if d.isdigit() and _comm(int(d)) == "srun"]
    by_hand = [p for p in sruns if p == srun_pid or _ppid(p) == srun_pid]
    if any(place(p)[0] in ("rank", "worker", "helper") for p in by_hand):
        raise CheckFailed(f"srun run by hand is placed {[where(p) for p in by_hand]}")
    batch = [p for p in sruns if p not in by_hand]
    if not batch:
        raise CheckFailed(f"the sbatch script's srun is not running: {[where(p) for p in sruns]}")
    up = [min(batch)]  # the first srun, the script above it, the batch step's slurmstepd
    while up[-1] > 1 and _comm(up[-1]) != "slurmstepd" and len(up) < 8:
        up.append(_ppid(up[-1]))
    chain = [*reversed(up), *(p for p in batch if p not in up)]
    batch_job = [where(p) for p in chain]
    if (_comm(up[-1]) != "slurmstepd" or {place(p)[0] for p in chain} != {"launcher"}
            or len({place(p)[3] for p in chain}) != 1):
        raise CheckFailed(f"the batch step (slurmstepd -> slurm_script -> srun) is placed {batch_job}: want "
                          "launchers of one job (srun in an sbatch script carries SLURM_PROCID=0 but is no rank)")
    ours = {r["pid"] for ranks in shapes.values() for r in ranks}
    all_ranks = {pid for pid, p in rows.items() if p["role"] == "rank"}
    if all_ranks != ours:
        raise CheckFailed(f"audit --ranks names {len(all_ranks)} rank(s), the steps run {len(ours)}: extra "
                          f"{[where(p) for p in sorted(all_ranks - ours)]}, missing {sorted(ours - all_ranks)}")
    listed = {j["job"]: j for j in doc["job"]["jobs"]}
    for tag in shapes:
        j = listed.get(out[tag]["job"])
        if j is None or sorted(j["ranks"]) != sorted(r["pid"] for r in shapes[tag]):
            raise CheckFailed(f"{tag}: job list {doc['job']['jobs']} lacks job {out[tag]['job']} with its two ranks")
    out["batch_step"] = batch_job
    out["srun_by_hand"] = [where(p) for p in by_hand]
    return out


def _judge_binding(doc: dict[str, Any], shapes: dict[str, list[dict[str, Any]]], srun_pid: int,
                   jobs: Path) -> dict[str, Any]:
    rows = {p["pid"]: p for p in doc["processes"]}
    out: dict[str, Any] = {}
    for tag, ranks in shapes.items():
        masks = []
        for r in ranks:
            given, mine = r["given"], set(r["affinity"])
            if tag == "srun" and (len(given) != 1 or mine != set(given)):
                raise CheckFailed(f"--cpu-bind=map_cpu:1,3 task {r['procid']} runs on {given}, not one CPU")
            if tag == "sbatch" and (len(given) < 2 or mine != {given[-1]}):
                raise CheckFailed(f"sbatch task {r['procid']}: Slurm gave {given} (a socket), the rank narrowed "
                                  f"itself to {sorted(mine)}")
            masks.append(sorted(mine))
            cgroup = next((x.split("::", 1)[1] for x in read(f"/proc/{r['pid']}/cgroup", "").splitlines()
                           if x.startswith("0::")), "")
            allowed = set(parse_cpulist(read(Path("/sys/fs/cgroup") / cgroup.lstrip("/") / "cpuset.cpus.effective",
                                             "") or read("/sys/devices/system/cpu/online", "")))
            workers = {}
            for w, kind in r["workers"].items():
                rep = jobs / f"worker-{w}.json"
                if not rep.exists():
                    raise CheckFailed(f"{tag} rank {r['pid']}: its {kind} worker {w} never reported")
                cpus = set(json.loads(rep.read_text())["affinity"])
                bound = json.loads(read(jobs / f"bind-{w}.json", "{}"))
                if not cpus <= mine:
                    raise CheckFailed(f"{tag} rank {r['pid']} runs on {sorted(mine)}; bind_worker put its {kind} "
                                      f"worker {w} on {sorted(cpus)} (bind report: bound={bound.get('bound')} "
                                      f"cpus={bound.get('cpus')} skipped={bound.get('skipped')})")
                row = (rows.get(int(w)) or {}).get("worker") or {}
                if row.get("outside_cpus") or row.get("outside_nodes"):
                    raise CheckFailed(f"{tag}: audit says worker {w} of rank {r['pid']} is outside it: {row}")
                workers[w] = {"kind": kind, "cpus": sorted(cpus), "bound": bound.get("bound"),
                              "skipped": bound.get("skipped")}
            # A widening is visible only where the cgroup's cpuset is wider than the rank's mask (the kernel cuts a
            # mask to the cpuset): always for the narrowed ranks.
            visible = bool(allowed - mine)
            if tag == "sbatch" and not visible:
                raise CheckFailed(f"sbatch rank {r['pid']}: its cgroup {cgroup} allows only {sorted(allowed)}: a "
                                  "widening could not be seen")
            out.setdefault(tag, {})[r["pid"]] = {"given": given, "mask": sorted(mine), "cgroup_cpus": sorted(allowed),
                                                 "widening_visible": visible, "workers": workers}
        if tag == "srun" and masks[0] == masks[1]:
            raise CheckFailed(f"--cpu-bind=map_cpu:1,3 put both tasks on {masks[0]}")
    return out


def _deferred(ctx: Context, name: str) -> dict[str, Any]:
    entry = ctx.deferred.get(RECORD, {}).get(name)
    if entry is None:
        missing = [b for b in ("slurmctld", "slurmd", "srun", "sbatch", "munged")
                   if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
        if missing:
            raise EngineMissing(f"Slurm/munge not installed on the host root ({', '.join(missing)}; "
                                "tests/vm/setup.sh installs them)")
        raise CheckFailed("did not run: it runs inside slurm_places_as_numatune_says's phase 1, which stopped "
                          "before it (see that check's result), or that check was not run")
    status, details = entry
    if status != "passed":
        raise CheckFailed(f"({status} inside slurm_places_as_numatune_says) {details}")
    return details


@check("two-socket", engines=True)
def slurm_job_tree(ctx: Context) -> dict[str, Any]:
    """srun and sbatch → srun → bash → python under real Slurm: audit --ranks names launchers, ranks, workers."""
    return _deferred(ctx, TREE)


@check("two-socket", engines=True)
def slurm_bind_worker(ctx: Context) -> dict[str, Any]:
    """bind_worker() under Slurm --cpu-bind=map_cpu and in a self-narrowed rank keeps workers in the rank's CPUs."""
    return _deferred(ctx, BINDING)


@check("two-socket")
def cpuset_without_the_ranks_node_is_nt411(ctx: Context) -> dict[str, Any]:
    """A child cgroup with only node 1's CPUs: launch --node 0 and bind(node=0) fail naming NT411 (exit 7)."""
    base = Path("/sys/devices/system/node")
    nodes = {int(d.name[4:]): parse_cpulist(read(d / "cpulist", "")) for d in base.glob("node[0-9]*")}
    if not nodes.get(0) or not nodes.get(1):
        raise CheckFailed(f"the guest needs CPUs on nodes 0 and 1: {nodes}")
    root = Path("/sys/fs/cgroup")
    if not any(f.split()[1:3] == ["/sys/fs/cgroup", "cgroup2"] for f in read("/proc/mounts", "").splitlines()):
        subprocess.run(["mount", "-t", "cgroup2", "none", str(root)], capture_output=True, timeout=20, check=False)
    with contextlib.suppress(OSError):
        (root / "cgroup.subtree_control").write_text("+cpuset")
    if "cpuset" not in read(root / "cgroup.subtree_control", ""):
        raise CheckFailed(f"cannot delegate the cpuset controller at {root}: {read(root / 'cgroup.controllers', '')}")
    where = root / "numatune-nt411"
    node1 = ",".join(map(str, nodes[1]))
    with contextlib.suppress(OSError):
        where.rmdir()
    where.mkdir()
    try:
        (where / "cpuset.cpus").write_text(node1)
        procs = str(where / "cgroup.procs")

        def enter() -> None:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        inside = ("import sys, os, numatune\nfrom numatune.errors import NumatuneError\n"
                  "print('MASK', sorted(os.sched_getaffinity(0)), flush=True)\n"
                  "try:\n    numatune.bind(node=0)\nexcept NumatuneError as exc:\n"
                  "    print(exc.message, file=sys.stderr)\n    sys.exit(exc.exit_code)\n")
        argvs = {"launch": [sys.executable, "-m", "numatune", "launch", "--node", "0", "--", "true"],
                 "bind": [sys.executable, "-c", inside]}
        started = {k: subprocess.Popen(a, cwd=REPO, env=_env(dict(os.environ)), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=enter)
                   for k, a in argvs.items()}
        out: dict[str, Any] = {"cpuset": node1}
        for k, proc in started.items():
            try:
                so, se = proc.communicate(timeout=240)
            except subprocess.TimeoutExpired:
                proc.kill()
                so, se = proc.communicate()
            line = next((x for x in se.splitlines() if "NT411" in x), "")
            if proc.returncode != 7 or "NT411: no usable CPU on node 0" not in line:
                raise CheckFailed(f"$ {' '.join(argvs[k])} (in a cpuset of CPUs {node1})\n-> rc {proc.returncode}, "
                                  f"want 7 naming NT411:\n{so[-600:]}{se[-1200:]}")
            named = line.partition("allowed CPUs ")[2].split(" ")[0]
            if set(parse_cpulist(named.replace("?", ""))) != set(nodes[1]):
                raise CheckFailed(f"{k}: NT411 does not name the cpuset's CPUs {node1}: {line}")
            out[k] = {"rc": proc.returncode, "said": line[:400]}
        return out
    finally:
        for _ in range(50):
            try:
                where.rmdir()
                break
            except OSError:
                time.sleep(0.1)
