"""Run numatune in a child process under hard limits, and measure what it used.

`run_limited` starts `python -m numatune ARGS` with RLIMIT_AS (address space) and RLIMIT_CPU set in the
child before exec and a wall-clock timeout, through a small watcher process whose only child it is, so
that the watcher's RUSAGE_CHILDREN is that command's own peak resident memory and CPU time. A command that
needs more memory than the limit fails (MemoryError: exit 70, or killed) instead of passing, so an
assertion on exit 3 proves the bound held.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

MIB = 1 << 20
_WATCH = r"""
import json, resource, subprocess, sys, time
seconds, mib = float(sys.argv[1]), int(sys.argv[2])
def limit():
    resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    resource.setrlimit(resource.RLIMIT_CPU, (int(seconds) + 1, int(seconds) + 1))
start = time.monotonic()
try:
    done = subprocess.run(sys.argv[3:], capture_output=True, timeout=seconds, preexec_fn=limit,
                          stdin=subprocess.DEVNULL)
    rc, out, err = done.returncode, done.stdout, done.stderr
except subprocess.TimeoutExpired as exc:
    rc, out, err = "timeout", exc.stdout or b"", exc.stderr or b""
wall = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"rc": rc, "out": out.decode(errors="replace"), "err": err.decode(errors="replace"),
           "wall": wall, "peak_mib": usage.ru_maxrss / 1024, "cpu": usage.ru_utime + usage.ru_stime}, sys.stdout)
"""


@dataclass
class Limited:
    returncode: int | str  # "timeout" when the wall-clock limit ended it
    stdout: str
    stderr: str
    wall: float
    peak_mib: float
    cpu: float  # user + system seconds: what a loaded machine disturbs less than wall time

    def within(self, seconds: float, mib: float) -> bool:
        return self.returncode != "timeout" and self.wall < seconds and self.peak_mib < mib


def run_limited(*args: str, seconds: float = 10, mib: int = 256, env: dict[str, str] | None = None,
                cwd: str | None = None) -> Limited:
    """`numatune ARGS` under the limits; its exit status, output, wall and CPU seconds and peak RSS in MiB."""
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("NUMATUNE_PCI_IDS", "")
    full_env.pop("NUMATUNE_ROOT", None)
    done = subprocess.run([sys.executable, "-c", _WATCH, str(seconds), str(mib), sys.executable, "-m", "numatune",
                           *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=seconds + 30,
                          check=True)
    doc = json.loads(done.stdout)
    return Limited(doc["rc"], doc["out"], doc["err"], doc["wall"], doc["peak_mib"], doc["cpu"])


def best_seconds(run, repeats: int = 3) -> float:  # noqa: ANN001 - a callable of no arguments
    """The shortest of `repeats` wall-clock runs of `run()`: the one least disturbed by other work."""
    import time

    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def growth(make, run, n: int, factor: int = 4) -> float:  # noqa: ANN001 - callables
    """How much longer `run(make(factor * n))` takes than `run(make(n))` (best of 3 each, inputs made
    beforehand): about `factor` for a linear parser, `factor`² for a quadratic one. With factor 4 a test
    that asserts under 8 passes a linear parser on a loaded 2-core machine and fails a quadratic one.
    A ratio over 1.5 x `factor` is measured again, twice at most, and the lowest kept: a run of a few
    milliseconds read 8.4 for a linear view once in CI, while a quadratic one reads `factor`² every time."""
    small, large = make(n), make(factor * n)
    ratio = float("inf")
    for _ in range(3):
        ratio = min(ratio, best_seconds(lambda: run(large)) / best_seconds(lambda: run(small)))
        if ratio <= 1.5 * factor:
            break
    return ratio
