"""Time `numatune audit PID --json` against `numastat -p PID` and `cat /proc/PID/numa_maps` (goal: <= 2.0x numastat).

The target is a child process with about max_map_count mappings: small anonymous regions with alternating
protections so the kernel cannot merge them, each touched once (one resident page per line). The three
commands run interleaved, N rounds each; the table gives median and minimum wall time and median CPU time
(user + system of the child, which a busy machine disturbs less), and the ratio to numastat.
Usage: .venv/bin/python benchmarks/bench_audit.py [--rounds N] [--mappings N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
ENTRY = "import sys; sys.argv[0] = 'numatune'; from numatune.entry import run; run()"

TARGET = """
import ctypes, mmap, sys
n = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
page = mmap.PAGESIZE
base = libc.mmap(None, n * page, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
if base in (None, ctypes.c_void_p(-1).value):
    sys.exit("mmap failed")
for i in range(n):
    ctypes.c_char.from_address(base + i * page).value = b"x"
    if i % 2:
        libc.mprotect(base + i * page, page, 1)  # PROT_READ: neighbours differ, no merge
print("ready", flush=True)
sys.stdin.readline()
"""


def count_lines(pid: int) -> int:
    with open(f"/proc/{pid}/numa_maps") as fh:
        return sum(1 for _ in fh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--mappings", type=int, default=0, help="default: max_map_count minus room for the runtime")
    args = parser.parse_args()
    if shutil.which("numastat") is None:
        sys.exit("numastat not found: apt-get install -y numactl")
    with open("/proc/sys/vm/max_map_count") as fh:
        max_maps = int(fh.read())
    n = args.mappings or max_maps - 200  # the interpreter and its libraries need about 100 mappings
    target = subprocess.Popen([sys.executable, "-c", TARGET, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    if target.stdout.readline().strip() != "ready":
        sys.exit("the target process could not map its regions")
    pid = target.pid
    try:
        lines = count_lines(pid)
        env = dict(os.environ, PYTHONPATH=str(PROJECT))
        cmds = {
            f"cat /proc/{pid}/numa_maps (kernel floor)": ["cat", f"/proc/{pid}/numa_maps"],
            f"numastat -p {pid} (reference)": ["numastat", "-p", str(pid)],
            f"numatune audit {pid} --json": [sys.executable, "-c", ENTRY, "audit", str(pid), "--json"],
            "python -c 'import click'": [sys.executable, "-c", "import click"],
        }
        times: dict[str, list[float]] = {k: [] for k in cmds}
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
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
        ref_key = f"numastat -p {pid} (reference)"
        ref, ref_cpu = statistics.median(times[ref_key]), statistics.median(cpu[ref_key])
        print(f"target PID {pid}: {lines} numa_maps lines (max_map_count {max_maps}), {args.rounds} rounds")
        print(f"{'command':48} {'wall med ms':>11} {'wall min':>8} {'x numastat':>10} {'cpu med ms':>10} "
              f"{'x numastat':>10}")
        for name, values in times.items():
            med, cmed = statistics.median(values), statistics.median(cpu[name])
            print(f"{name:48} {1000 * med:11.1f} {1000 * min(values):8.1f} {med / ref:10.2f} {1000 * cmed:10.1f} "
                  f"{cmed / ref_cpu:10.2f}")
    finally:
        target.stdin.write("\n")
        target.stdin.flush()
        target.wait()


if __name__ == "__main__":
    main()
