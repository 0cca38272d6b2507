"""Shared timing loop for the benchmarks: interleaved rounds, medians of wall and child CPU time.

Interleaving (A B C A B C ...) spreads a busy machine's noise over every command alike; the child's
CPU time (user + system) is disturbed less by other load than wall time, so both are printed.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
# The console script's own entry point, without depending on where pip put the script.
NUMATUNE = [sys.executable, "-c", "import sys; sys.argv[0] = 'numatune'; from numatune.entry import run; run()"]


def fixture(name: str) -> Path:
    """fixtures/NAME.tar.gz as a root directory, extracted once into the tests' cache: the benchmarks time
    reading a tree, not unpacking one."""
    if str(PROJECT) not in sys.path:
        sys.path.insert(0, str(PROJECT))
    from tests.fixture_archives import extracted

    return extracted(name)


def compile_package() -> None:
    """Byte-compile numatune first, as an installed package is (PYTHONDONTWRITEBYTECODE may be set)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(PROJECT / "numatune")], check=True,
                   stdout=subprocess.DEVNULL)


def measure(cmds: dict[str, list[str]], rounds: int, env: dict[str, str] | None = None,
            stdin: str | None = None) -> dict[str, tuple[list[float], list[float]]]:
    """name -> (wall seconds per round, child CPU seconds per round); exits if a command fails."""
    env = dict(os.environ if env is None else env, PYTHONPATH=str(PROJECT))
    out = {name: ([], []) for name in cmds}
    for _ in range(rounds):
        for name, argv in cmds.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  input=stdin.encode() if stdin is not None else None)
            out[name][0].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[name][1].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if done.returncode not in (0, 1):
                sys.exit(f"{name} failed ({done.returncode}): {done.stderr.decode()[-300:]}")
    return out


def report(results: dict[str, tuple[list[float], list[float]]], reference: str, rounds: int) -> None:
    """Print a table: median and minimum wall ms, median CPU ms, each as a ratio to `reference`."""
    ref_wall = statistics.median(results[reference][0])
    ref_cpu = statistics.median(results[reference][1])
    width = max(len(n) for n in results) + 2
    print(f"{'command':{width}} {'wall med ms':>11} {'wall min':>8} {'x ref':>6} {'cpu med ms':>10} {'x ref':>6}")
    for name, (wall, cpu) in results.items():
        med, cmed = statistics.median(wall), statistics.median(cpu)
        print(f"{name:{width}} {med * 1000:11.1f} {min(wall) * 1000:8.1f} {med / ref_wall:6.2f} "
              f"{cmed * 1000:10.1f} {cmed / ref_cpu:6.2f}")
    load = os.getloadavg()[0]
    print(f"(reference: {reference}; {rounds} interleaved rounds; {os.cpu_count()} CPUs; load {load:.1f}; "
          f"python {sys.version.split()[0]})")
