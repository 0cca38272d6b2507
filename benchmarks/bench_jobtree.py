"""The job tree at 1,000, 2,000, 4,000 and 6,000 processes, in a chain of workers and flat (goal: linear, 6,000
within 10 s: issues 46 and 47; a chain was quadratic: 1,000/2,000/4,000 processes took 0.95/2.85/9.97 s).

Two figures per shape and size: `job_places` alone on synthetic records (the tree's two passes, in this process,
best of three), and `audit --ranks --json` on a generated saved root (tests/big_roots.py's `job_archive`: a torchrun
above N processes, in an uncompressed tar); wall and CPU time of the child, medians over the rounds
(benchmarks/_timing.py). "x" is the time over the time at the size before it: about the ratio of the sizes for
linear work.
Usage: .venv/bin/python benchmarks/bench_jobtree.py [--rounds N] [--sizes 1000,2000,4000,6000] [--no-audit]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _timing import NUMATUNE, PROJECT, compile_package, run_once


def records(n: int, shape: str) -> dict:
    from numatune.model.process import ProcEntry

    argv = ("python3", "train.py")
    out = {9999: ProcEntry(9999, 1, "torchrun", ("torchrun", "train.py"), {})}
    for i in range(n):
        pid = 10000 + i
        ppid = pid - 1 if shape == "chain" else 9999
        out[pid] = ProcEntry(pid, ppid, "python3", argv, {"LOCAL_RANK": "0" if shape == "chain" else str(i)})
    return out


def check(argv: list[str], env: dict[str, str], n: int, shape: str) -> bool:
    """The audit answers what the job is: N processes, one rank (a chain) or N (flat), the launcher above."""
    import json
    import subprocess

    doc = json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=False).stdout)
    roles = [p["role"] for p in doc["processes"]]
    ranks = 1 if shape == "chain" else n
    return roles.count("rank") == ranks and roles.count("worker") == n - ranks and roles.count("launcher") == 1


def best(run, repeats: int = 3) -> float:  # noqa: ANN001 - a callable
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1000,2000,4000,6000")
    parser.add_argument("--no-audit", action="store_true", help="the tree alone, no saved root")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT))
    compile_package()
    from numatune.analysis.jobtree import job_places
    from tests.big_roots import job_archive

    sizes = [int(s) for s in args.sizes.split(",")]
    env = {"NUMATUNE_PCI_IDS": "", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT)}
    print(f"{'shape':6} {'N':>6} {'tree ms':>8} {'x':>5} {'audit wall s':>12} {'cpu s':>6} {'x':>5}")
    for shape in ("chain", "flat"):
        before = None
        for n in sizes:
            made = records(n, shape)
            tree = best(lambda made=made: job_places(made))
            wall = cpu = None
            if not args.no_audit:
                with tempfile.TemporaryDirectory(prefix="bench-jobtree-") as tmp:
                    root = job_archive(Path(tmp) / "job.tar", n, shape)
                    argv = [*NUMATUNE, "--root", str(root), "audit", "--ranks", "--json"]
                    runs = sorted(run_once(argv, env)[:2] for _ in range(args.rounds))
                    wall, cpu = runs[len(runs) // 2]
                    assert check(argv, env, n, shape), "the audit did not name the job"
            ratio = "" if before is None else f"{tree / before[0]:5.2f}"
            aratio = "" if before is None or wall is None else f"{wall / before[1]:5.2f}"
            print(f"{shape:6} {n:6d} {tree * 1000:8.1f} {ratio:>5} "
                  + (f"{wall:12.2f} {cpu:6.2f} {aratio:>5}" if wall is not None else f"{'-':>12} {'-':>6}"),
                  flush=True)
            before = (tree, wall)


if __name__ == "__main__":
    main()
