"""Time `numatune launch --node 0 -- true` against `python -c "import click"` (the goal: at most 1.3x).

Runs the commands interleaved, N rounds each, and prints a table of median and minimum wall times and the
median CPU time (user + system of the child), which a busy machine disturbs less.
`numatune` is invoked the way pip's console script does (`from numatune.cli import main`), so the
figure includes the interpreter start, click, the topology read and the exec of numactl and `true`.
Usage: .venv/bin/python benchmarks/bench_launch.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
ENTRY = "import sys; from numatune.cli import main; sys.argv[0] = 'numatune'; sys.exit(main())"


def commands() -> dict[str, list[str]]:
    py = sys.executable
    launch = [py, "-c", ENTRY, "launch", "-q", "--node", "0"]
    return {
        "python -c 'import click' (reference)": [py, "-c", "import click"],
        "numatune launch --node 0 -- true": [*launch, "--", "true"],
        "numatune launch --node 0 --via direct -- true": [*launch, "--via", "direct", "--", "true"],
        "numatune launch --node 0 --mem-policy none --cpu-bind none -- true": [
            *launch, "--mem-policy", "none", "--cpu-bind", "none", "--", "true"],
        "numactl --cpunodebind=0 --membind=0 true (tool alone)": ["numactl", "--cpunodebind=0", "--membind=0", "true"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(PROJECT))
    cmds = commands()
    times: dict[str, list[float]] = {name: [] for name in cmds}
    cpu: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(args.rounds):
        for name, argv in cmds.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if done.returncode != 0:
                sys.exit(f"{name} failed ({done.returncode}): {done.stderr.decode()[-300:]}")
    key = "python -c 'import click' (reference)"
    ref, ref_cpu = statistics.median(times[key]), statistics.median(cpu[key])
    print(f"{'command':68} {'wall med ms':>11} {'wall min':>8} {'x click':>7} {'cpu med ms':>10} {'x click':>7}")
    for name, values in times.items():
        med, cmed = statistics.median(values), statistics.median(cpu[name])
        print(f"{name:68} {med * 1000:11.1f} {min(values) * 1000:8.1f} {med / ref:7.2f} {cmed * 1000:10.1f} "
              f"{cmed / ref_cpu:7.2f}")
    print(f"({args.rounds} interleaved rounds; {os.cpu_count()} CPUs; python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
