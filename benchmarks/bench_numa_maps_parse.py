"""Time parsing a synthetic 65,536-line /proc/PID/numa_maps (vm.max_map_count is 65,530): the aggregate
`audit` always does, and the same pass keeping every mapping (`audit --mappings`).

Synthetic text (not from a kernel; shaped after fs/proc/task_mmu.c): "repeating" has a few hundred
distinct lines once the address is dropped (as a big PyTorch process: guard pages, arenas of equal
size), "distinct" gives every line its own page count (the worst case for the per-tail cache).
"""

from __future__ import annotations

import argparse
import time

from numatune.readers.procs import parse_numa_maps

LINES = 65_536


def synthetic(distinct: bool) -> str:
    out = []
    for i in range(LINES):
        addr = f"7f{i * 0x201000:010x}"[:12]
        n = i + 1 if distinct else i % 200 + 1
        if i % 7 == 0:
            out.append(f"{addr} default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped={n} mapmax=3 N0={n} "
                       "kernelpagesize_kB=4")
        elif i % 11 == 0:
            out.append(f"{addr} bind:1 anon={n} dirty={n} N0={n // 3} N1={n - n // 3} kernelpagesize_kB=4")
        elif i % 13 == 0:
            out.append(f"{addr} interleave:0-1 anon={n} dirty={n} N0={n // 2} N1={n - n // 2} kernelpagesize_kB=4")
        else:
            out.append(f"{addr} default anon={n} dirty={n} active=0 N0={n} kernelpagesize_kB=4")
    return "\n".join(out) + "\n"


def best(fn, rounds: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    for distinct in (False, True):
        text = synthetic(distinct)
        label = "distinct" if distinct else "repeating"
        agg = best(lambda t=text: parse_numa_maps(t), args.rounds)
        line = f"{LINES} lines, {label:9}: aggregate {agg * 1e3:7.1f} ms"
        try:
            per = best(lambda t=text: parse_numa_maps(t, per_mapping=True), args.rounds)
            line += f"   with every mapping {per * 1e3:7.1f} ms"
        except TypeError:  # a numatune without per-mapping parsing
            pass
        print(line)


if __name__ == "__main__":
    main()
