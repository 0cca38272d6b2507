"""A training rank for the job-shape matrix (tests/cli/test_audit_job_shapes.py): starts the workers its kind names,
writes what it started to $JOBSHAPE_OUT/<tag>-<pid>.json and sleeps until killed.

    python rank.py KINDS [--self-named] [--local-rank=N]

KINDS: comma-separated, one per local rank (the rank picks KINDS[local rank], the last when there are fewer):
fork, spawn, forkserver (multiprocessing.Process of that start method, two each), pool-fork, pool-spawn
(multiprocessing.Pool(2)), dataloader (torch's DataLoader, num_workers=2, the fork default), none.
--self-named: the rank sets LOCAL_RANK/RANK in os.environ itself (DeepSpeed's MPI discovery, Accelerate in a
notebook), before it starts anything: /proc/PID/environ of the rank shows neither.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time


def sleep() -> None:
    time.sleep(3600)


def square(x: int) -> int:
    return x * x


class Slow:
    """A dataset whose workers stay: the iterator is kept and never drained."""

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int) -> int:
        time.sleep(0.05)
        return i


def local_rank() -> int:
    for arg in sys.argv:
        if arg.startswith("--local-rank="):
            return int(arg.partition("=")[2])
    for key in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0


def main() -> None:
    kinds = sys.argv[1].split(",")
    if "--self-named" in sys.argv:
        os.environ["LOCAL_RANK"] = os.environ["RANK"] = "0"
    me = local_rank()
    kind = kinds[min(me, len(kinds) - 1)]
    workers: dict[int, str] = {}
    keep: list[object] = []
    if kind in ("fork", "spawn", "forkserver"):
        ctx = multiprocessing.get_context(kind)
        for _ in range(2):
            p = ctx.Process(target=sleep, daemon=True)
            p.start()
            workers[p.pid] = kind
    elif kind.startswith("pool-"):
        method = kind[5:]
        pool = multiprocessing.get_context(method).Pool(2)
        pool.map(square, range(4))
        keep.append(pool)
        workers.update({p.pid: method for p in pool._pool})
    elif kind == "dataloader":
        from torch.utils.data import DataLoader

        it = iter(DataLoader(Slow(), num_workers=2, batch_size=2))
        next(it)
        keep.append(it)
        workers.update({w.pid: "dataloader" for w in it._workers})
    helpers: dict[int, str] = {}
    from multiprocessing import forkserver, resource_tracker

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    if tracker:
        helpers[tracker] = "resource_tracker"
    server = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if server:
        helpers[server] = "forkserver"
    if kind == "dataloader":  # torch renames each worker's main thread when its loop starts
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(comm(pid) == "pt_data_worker" for pid in workers):
            time.sleep(0.1)
    out = os.path.join(os.environ["JOBSHAPE_OUT"], f"{os.environ['JOBSHAPE_TAG']}-{os.getpid()}.json")
    with open(out + ".tmp", "w") as fh:
        json.dump({"pid": os.getpid(), "ppid": os.getppid(), "local_rank": me, "workers": workers,
                   "helpers": helpers}, fh)
    os.rename(out + ".tmp", out)
    while True:
        time.sleep(3600)


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


if __name__ == "__main__":
    main()
