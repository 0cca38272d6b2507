"""Every large text report against its own JSON, at N and 2N (goal: text within 3x of JSON, time about
doubling with the input: issue 41, point 4).

Inputs are generated saved roots (tests/big_roots.py): a process of N mappings (`audit PID --mappings
--min-size 0`), a /proc/interrupts of N device rows (`irq`), a process of N threads (`audit PID`), a job of
N ranks (`audit --ranks`), and a machine of N memory-only NUMA nodes (`inspect`, `check`). Each report is
timed three ways: text into a pipe (what `> file` and `| less` get), text laid out for a 200-column
colour terminal (FORCE_COLOR=1 COLUMNS=200: rich's path), and `--json`. The figures are medians of the
child's CPU time (user + system: a busy machine disturbs it less than wall time) over interleaved rounds;
"x json" is the text over the JSON of the same input, "x N" the time at 2N over the time at N.
Usage: .venv/bin/python benchmarks/bench_text_scale.py [--rounds N] [--scale F] [NAME ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _timing import NUMATUNE, PROJECT, compile_package, measure

# name -> (default N, root builder's name, arguments after --root ROOT)
CASES = {
    "mappings": (40_000, "mappings_root", ["audit", "4242", "--mappings", "--min-size", "0"]),
    "interrupts": (20_000, "interrupts_root", ["irq"]),
    "threads": (5_000, "threads_root", ["audit", "4242"]),
    "ranks": (1_000, "ranks_root", ["audit", "--ranks"]),
    "nodes (inspect)": (10_000, "nodes", ["inspect"]),
    "nodes (check)": (10_000, "nodes", ["check"]),
}
TERMINAL = {"FORCE_COLOR": "1", "COLUMNS": "200"}


def build(builder: str, base: Path, n: int) -> Path:
    import tests.big_roots as roots

    if builder == "nodes":
        return roots.topology_root(base, 256, n, distances=False)
    return getattr(roots, builder)(base, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every N (0.25: a quick look)")
    parser.add_argument("names", nargs="*", help=f"cases (default: all of {', '.join(CASES)})")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT))
    compile_package()
    env = {"NUMATUNE_PCI_IDS": "", "PATH": "/usr/bin:/bin"}
    print(f"{'report':17} {'N':>7} {'json ms':>8} {'pipe ms':>8} {'x json':>6} {'tty ms':>8} {'x json':>6} "
          f"{'x N':>11}")
    for name in args.names or CASES:
        default, builder, argv = CASES[name]
        n = max(1, int(default * args.scale))
        previous = None
        for size in (n // 2, n):
            with tempfile.TemporaryDirectory(prefix="bench-text-") as tmp:
                root = str(build(builder, Path(tmp), size))
                base = [*NUMATUNE, "--root", root, *argv]
                json_cmd = base + (["--json"] if argv[0] != "check" else ["--format", "json"])
                pipe = measure({"json": json_cmd, "pipe": base}, args.rounds, env)
                tty = measure({"tty": base}, args.rounds, {**env, **TERMINAL})
            cpu = {k: statistics.median(v[1]) * 1000 for k, v in {**pipe, **tty}.items()}
            growth = "" if previous is None else (f"{cpu['pipe'] / previous['pipe']:.1f} "
                                                  f"{cpu['tty'] / previous['tty']:.1f} "
                                                  f"{cpu['json'] / previous['json']:.1f}")
            print(f"{name:17} {size:7} {cpu['json']:8.0f} {cpu['pipe']:8.0f} {cpu['pipe'] / cpu['json']:6.2f} "
                  f"{cpu['tty']:8.0f} {cpu['tty'] / cpu['json']:6.2f} {growth:>11}", flush=True)
            previous = cpu
    print(f"(medians of child CPU ms over {args.rounds} interleaved rounds; x N: pipe, tty and json at N over N/2)")


if __name__ == "__main__":
    main()
