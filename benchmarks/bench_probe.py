"""probe's figures against plain C in one run: its copy bandwidth against a C memcpy loop, its latency
against a C pointer chase written here (lmbench/multichase style). The goal: within 10% of both.

Same node, same CPU(s), same buffer sizes, THP requested on both sides, rounds interleaved (probe, C,
probe, C, ...) and medians compared. The reference C is compiled here, independently of probe's
helper: its own random cycle (a 64-bit LCG, Sattolo's algorithm within 2 MiB windows, windows in
random order), its own timing loop that walks on from where the last sample stopped (one continuous
walk round the cycle, never a restart at the buffer's start), and a plain
`for (r...) memcpy(dst, src, n)` loop for copy.
Usage: .venv/bin/python benchmarks/bench_probe.py [--rounds N] [--size 192M] [--threads N]
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _timing import compile_package

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

C_REFERENCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static uint64_t lcg(uint64_t *s) { *s = *s * 6364136223846793005ULL + 1442695040888963407ULL; return *s >> 17; }
/* Sattolo within each window (one cycle per window), windows chained in random order. */
void ref_init(char *buf, size_t bytes, size_t window) {
    size_t per = window / 64, nw = bytes / window; uint64_t s = 42;
    size_t *w = malloc(nw * sizeof *w), *l = malloc(per * sizeof *l);
    for (size_t i = 0; i < nw; i++) w[i] = i;
    for (size_t i = nw - 1; i > 0; i--) { size_t j = lcg(&s) % (i + 1); size_t t = w[i]; w[i] = w[j]; w[j] = t; }
    char *prev = 0, *first = 0;
    for (size_t k = 0; k < nw; k++) {
        for (size_t i = 0; i < per; i++) l[i] = i;
        for (size_t i = per - 1; i > 0; i--) { size_t j = lcg(&s) % i; size_t t = l[i]; l[i] = l[j]; l[j] = t; }
        char *base = buf + w[k] * window;
        for (size_t i = 0; i < per; i++) {
            char *p = base + l[i] * 64; if (prev) *(char **)prev = p; else first = p; prev = p;
        }
    }
    *(char **)prev = first; free(w); free(l);
}
/* Walk on from *where (and leave the pointer reached there): successive calls go round the one cycle. */
double ref_chase(char **where, uint64_t steps) {
    char **p = (char **)*where; double t0 = now();
    for (uint64_t i = 0; i < steps; i++) p = (char **)*p;
    double t1 = now(); if (!p) abort(); *where = (char *)p; return (t1 - t0) / steps;
}
double ref_copy(char *dst, const char *src, size_t n, uint64_t reps) {
    double t0 = now(); for (uint64_t r = 0; r < reps; r++) memcpy(dst, src, n); return now() - t0;
}
"""


def build_reference() -> ctypes.CDLL:
    tmp = Path(tempfile.mkdtemp(prefix="numatune-bench-"))
    (tmp / "ref.c").write_text(C_REFERENCE)
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(tmp / "ref.so"), str(tmp / "ref.c")], check=True)
    lib = ctypes.CDLL(str(tmp / "ref.so"))
    lib.ref_init.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
    lib.ref_chase.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64)
    lib.ref_chase.restype = ctypes.c_double
    lib.ref_copy.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64)
    lib.ref_copy.restype = ctypes.c_double
    return lib


def pinned(cpu: int, fn):  # noqa: ANN001, ANN201
    box = {}

    def body() -> None:
        os.sched_setaffinity(0, {cpu})
        box["v"] = fn()

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return box["v"]


def c_latency(ref, cpu: int, size: int, seconds: float) -> float:  # noqa: ANN001
    from numatune.measure.bench import Buffer

    def work() -> float:
        buf = Buffer(size, node)
        try:
            ref.ref_init(buf.addr, size, 2 << 20)
            where = ctypes.c_void_p(buf.addr)  # every sample continues where the last one stopped
            per = ref.ref_chase(ctypes.byref(where), 200_000)
            steps = max(int(seconds / 6 * 1e9 / per), 100_000)
            out = [ref.ref_chase(ctypes.byref(where), steps) for _ in range(6)]
            return statistics.median(out[1:])
        finally:
            buf.close()

    return pinned(cpu, work)


def c_copy(ref, cpus: list[int], size: int, seconds: float) -> float:  # noqa: ANN001
    """GB/s over all threads (bytes read + written, as probe counts), median of 3 samples."""
    from numatune.measure.bench import Buffer

    per = size // len(cpus) // mmap.PAGESIZE * mmap.PAGESIZE
    results: list[list[tuple[float, float, int]]] = [[] for _ in cpus]
    barrier = threading.Barrier(len(cpus))

    def run(i: int) -> None:
        os.sched_setaffinity(0, {cpus[i]})
        src, dst = Buffer(per, node), Buffer(per, node)
        src.touch()
        dst.touch()
        ns = ref.ref_copy(dst.addr, src.addr, per, 1)
        reps = max(1, int(seconds / 4 * 1e9 / ns))
        for _ in range(3):
            barrier.wait()
            t0 = time.perf_counter()
            ref.ref_copy(dst.addr, src.addr, per, reps)
            results[i].append((t0, time.perf_counter(), 2 * per * reps))
        src.close()
        dst.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cpus))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    samples = []
    for k in range(3):
        start = min(r[k][0] for r in results)
        end = max(r[k][1] for r in results)
        samples.append(sum(r[k][2] for r in results) / (end - start) / 1e9)
    return statistics.median(samples)


node = 0


def main() -> None:
    global node
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", default="192M")
    parser.add_argument("--threads", type=int, default=0, help="copy threads (default: every allowed CPU)")
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    args = parser.parse_args()
    compile_package()
    from numatune.commands.probe import parse_size
    from numatune.measure import bench, helper
    from numatune.system import memsys

    size = parse_size(args.size)
    cpus = sorted(os.sched_getaffinity(0))
    node = min(memsys.mems_allowed())
    copy_cpus = cpus[:args.threads] if args.threads else cpus
    lib, why = helper.load()
    if lib is None:
        sys.exit(f"probe's helper is unavailable: {why}")
    ref = build_reference()
    rows = {"latency ns (probe)": [], "latency ns (C chase)": [],
            "copy GB/s (probe)": [], "copy GB/s (C memcpy)": []}
    for _ in range(args.rounds):
        r = bench.measure_latency(lib, cpus[0], node, size, args.seconds)
        rows["latency ns (probe)"].append(statistics.median(r.samples_ns))
        rows["latency ns (C chase)"].append(c_latency(ref, cpus[0], size, args.seconds))
        r = bench.measure_bandwidth("copy", lib, copy_cpus, node, size, args.seconds)
        rows["copy GB/s (probe)"].append(statistics.median(r.gbps))
        rows["copy GB/s (C memcpy)"].append(c_copy(ref, copy_cpus, size, args.seconds))
    print(f"node {node}, latency on CPU {cpus[0]}, copy on CPUs {copy_cpus}, {size >> 20} MiB, "
          f"{args.rounds} interleaved rounds; medians (min … max)")
    for name, vals in rows.items():
        print(f"  {name:<24} {statistics.median(vals):8.2f}   ({min(vals):.2f} … {max(vals):.2f})")
    lat = statistics.median(rows["latency ns (probe)"]) / statistics.median(rows["latency ns (C chase)"])
    cp = statistics.median(rows["copy GB/s (probe)"]) / statistics.median(rows["copy GB/s (C memcpy)"])
    print(f"probe / C: latency {lat:.3f}, copy {cp:.3f} (goal: both within 0.90-1.10)")


if __name__ == "__main__":
    main()
