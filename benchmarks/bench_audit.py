"""Time `numatune audit PID` against `numastat -p PID` and awk over /proc/PID/numa_maps, as JSON and as text
(goals: `--json` at most 2.0x numastat; every text report within 3x of its JSON, `--mappings --min-size 0`
included: issue 41).

The target is a child process with about max_map_count mappings (65,530 by default: an ordinary training
rank can come near it): small anonymous regions with alternating protections so the kernel cannot merge
them, each touched once (one resident page per line). `--saved N` times the same commands on a generated
saved root instead (tests/big_roots.py: one process of N mappings, long file names, pages on two nodes),
where numastat, which reads only live processes, is left out and the ratios are to `audit PID --mappings
--min-size 0 --json`. The awk line sums the pages per node of every line, the core of what numastat -p does. Commands
run interleaved, N rounds each (benchmarks/_timing.py): median and minimum wall time, median CPU time (user
+ system of the child, which a busy machine disturbs less), each as a ratio to the reference, and peak
resident memory.
Usage: .venv/bin/python benchmarks/bench_audit.py [--rounds N] [--mappings N | --saved N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import NUMATUNE, PROJECT, compile_package, measure, report

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
# Resident pages per node of every mapping: the sums numastat -p prints (it reads the same file).
AWK = '{for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {split($i, kv, "="); s[kv[1]] += kv[2]}} ' \
      'END {for (n in s) print n, s[n]}'


def count_lines(path: str) -> int:
    with open(path) as fh:
        return sum(1 for _ in fh)


def commands(pid: int, numa_maps: str, root: list[str], numastat: bool) -> dict[str, list[str]]:
    audit = [*NUMATUNE, *root, "audit", str(pid)]
    cmds = {"cat numa_maps (kernel floor)": ["cat", numa_maps],
            "awk: pages per node of numa_maps": ["awk", AWK, numa_maps]}
    if numastat:
        cmds[f"numastat -p {pid} (reference)"] = ["numastat", "-p", str(pid)]
    cmds.update({
        f"audit {pid} --json": [*audit, "--json"],
        f"audit {pid} (text)": audit,
        f"audit {pid} --mappings --json": [*audit, "--mappings", "--json"],
        f"audit {pid} --mappings (text, default --min-size 1M)": [*audit, "--mappings"],
        f"audit {pid} --mappings --min-size 0 --json": [*audit, "--mappings", "--min-size", "0", "--json"],
        f"audit {pid} --mappings --min-size 0 (text)": [*audit, "--mappings", "--min-size", "0"],
        "python -c 'import click'": [sys.executable, "-c", "import click"],
    })
    return cmds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--mappings", type=int, default=0, help="default: max_map_count minus room for the runtime")
    parser.add_argument("--saved", type=int, default=0, metavar="N", help="a generated saved root of N mappings")
    args = parser.parse_args()
    compile_package()
    env = {"NUMATUNE_PCI_IDS": "", "PATH": "/usr/bin:/bin"}
    if args.saved:
        sys.path.insert(0, str(PROJECT))
        from tests.big_roots import PID, mappings_root

        with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
            root = mappings_root(Path(tmp), args.saved)
            numa_maps = str(root / f"proc/{PID}/numa_maps")
            print(f"saved root: PID {PID}, {count_lines(numa_maps)} numa_maps lines (tests/big_roots.py), "
                  f"{args.rounds} rounds")
            cmds = commands(PID, numa_maps, ["--root", str(root)], numastat=False)
            report(measure(cmds, args.rounds, env), f"audit {PID} --mappings --min-size 0 --json", args.rounds,
                   peak=True)
        return
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
        numa_maps = f"/proc/{pid}/numa_maps"
        print(f"target PID {pid}: {count_lines(numa_maps)} numa_maps lines (max_map_count {max_maps}), "
              f"{args.rounds} rounds")
        cmds = commands(pid, numa_maps, [], numastat=True)
        report(measure(cmds, args.rounds, env), f"numastat -p {pid} (reference)", args.rounds, peak=True)
    finally:
        target.stdin.write("\n")
        target.stdin.flush()
        target.wait()


if __name__ == "__main__":
    main()
