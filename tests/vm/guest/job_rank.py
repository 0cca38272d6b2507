"""A rank of a Slurm step for the job-shape checks (checks_jobs.py): one fork worker and one spawn Pool worker, each
bound by `numatune.bind_worker()`, report their CPU masks; the rank reports itself and its workers, then waits.

    python job_rank.py DIR TAG MODE        (under srun: SLURM_PROCID/SLURM_LOCALID name the task)

MODE `bind`: the rank keeps the mask Slurm gave it; `narrow`: it narrows itself to the last CPU of that mask
(os.sched_setaffinity) before it starts its workers. Writes DIR/worker-PID.json (each worker, after binding),
DIR/bind-PID.json (bind_worker's report) and DIR/rank-TAG-PROCID.json (the rank: PID, parent, masks, its workers
and helpers); stops when DIR/stop exists. Needs numatune importable (PYTHONPATH: the checkout).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

WAIT_S = 240  # workers' reports; the guest is slow (TCG), every wait ends as soon as it holds


def record(out: str, kind: str) -> None:
    """A worker's facts once bind_worker bound it (bind_worker's `then`: called with the Pool's initargs)."""
    me = {"pid": os.getpid(), "ppid": os.getppid(), "kind": kind, "affinity": sorted(os.sched_getaffinity(0))}
    tmp = Path(out) / f".worker-{os.getpid()}"
    tmp.write_text(json.dumps(me))
    tmp.rename(Path(out) / f"worker-{os.getpid()}.json")


def fork_worker(out: str) -> None:
    import numatune

    numatune.bind_worker(record, report_to=str(Path(out) / "bind-{pid}.json"))(out, "fork")
    while not (Path(out) / "stop").exists():
        time.sleep(0.5)


def noop(x: int) -> int:
    return x


def main() -> None:
    out, tag, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    given = sorted(os.sched_getaffinity(0))
    if mode == "narrow":
        os.sched_setaffinity(0, {given[-1]})
    import numatune

    init = numatune.bind_worker(record, report_to=str(out / "bind-{pid}.json"))
    fork = multiprocessing.get_context("fork").Process(target=fork_worker, args=(str(out),), daemon=True)
    fork.start()
    pool = multiprocessing.get_context("spawn").Pool(1, initializer=init, initargs=(str(out), "spawn"))
    pool.apply(noop, (1,))  # the worker ran its initializer
    workers = {fork.pid: "fork", **{p.pid: "spawn" for p in pool._pool}}  # type: ignore[attr-defined]
    deadline = time.monotonic() + WAIT_S
    while not all((out / f"worker-{pid}.json").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    from multiprocessing import resource_tracker

    helpers = {}
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)  # type: ignore[attr-defined]
    if tracker:
        helpers[tracker] = "resource_tracker"
    me = {"pid": os.getpid(), "ppid": os.getppid(), "procid": int(os.environ.get("SLURM_PROCID", "-1")),
          "localid": int(os.environ.get("SLURM_LOCALID", "-1")), "given": given,
          "affinity": sorted(os.sched_getaffinity(0)), "workers": workers, "helpers": helpers}
    procid = me["procid"]
    tmp = out / f".rank-{tag}-{procid}"
    tmp.write_text(json.dumps(me))
    tmp.rename(out / f"rank-{tag}-{procid}.json")
    while not (out / "stop").exists():
        time.sleep(0.5)
    pool.terminate()
    fork.join(10)


if __name__ == "__main__":
    main()
