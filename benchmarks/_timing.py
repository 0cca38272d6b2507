"""Shared timing loop for the benchmarks: interleaved rounds, medians of wall and child CPU time.

Interleaving (A B C A B C ...) spreads a busy machine's noise over every command alike; the child's
CPU time (user + system) is disturbed less by other load than wall time, so both are printed, with
optionally, each command's peak resident memory (from wait4: the largest of the process and its
children, so an `sh -c` pipeline shows its biggest member; a forked child starts from this script's
own peak, ~30 MB, so smaller figures read as that floor).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
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


def run_once(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS KiB) of one run of ARGV, from os.wait4; exits if it fails."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, stdin=inp)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            err.seek(0)
            sys.exit(f"{argv[:6]} failed ({proc.returncode}): {err.read().decode()[-300:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def measure(cmds: dict[str, list[str]], rounds: int, env: dict[str, str] | None = None,
            stdin: str | None = None) -> dict[str, tuple[list[float], list[float], list[int]]]:
    """name -> (wall seconds, CPU seconds, peak RSS KiB) per round, commands interleaved."""
    env = dict(os.environ if env is None else env, PYTHONPATH=str(PROJECT))
    out = {name: ([], [], []) for name in cmds}
    data = None if stdin is None else stdin.encode()
    for _ in range(rounds):
        for name, argv in cmds.items():
            for series, value in zip(out[name], run_once(argv, env, data), strict=True):
                series.append(value)
    return out


def report(results: dict[str, tuple[list[float], list[float], list[int]]], reference: str, rounds: int,
           peak: bool = False) -> None:
    """Print a table: median and minimum wall ms, median CPU ms, each as a ratio to `reference`; peak RSS."""
    ref_wall = statistics.median(results[reference][0])
    ref_cpu = statistics.median(results[reference][1])
    width = max(len(n) for n in results) + 2
    print(f"{'command':{width}} {'wall med ms':>11} {'wall min':>8} {'x ref':>6} {'cpu med ms':>10} {'x ref':>6}"
          + (f" {'peak MB':>7}" if peak else ""))
    for name, (wall, cpu, rss) in results.items():
        med, cmed = statistics.median(wall), statistics.median(cpu)
        print(f"{name:{width}} {med * 1000:11.1f} {min(wall) * 1000:8.1f} {med / ref_wall:6.2f} "
              f"{cmed * 1000:10.1f} {cmed / ref_cpu:6.2f}" + (f" {max(rss) / 1024:7.0f}" if peak else ""))
    load = os.getloadavg()[0]
    print(f"(reference: {reference}; {rounds} interleaved rounds; {os.cpu_count()} CPUs; load {load:.1f}; "
          f"python {sys.version.split()[0]})")
