"""`numatune probe`'s local idle latency against an independent C chase that walks a 256 MiB cycle
continuously (benchmarks/chase_walk.c), at probe's default time budget and at --time-budget 0.2.

Goal: probe's latency median within 10% of the C walk's at both budgets. Rounds are interleaved
(probe default, probe 0.2 s, C, probe default, ...) so a busy machine's noise falls on all three alike;
the medians over the rounds are compared. Both sides ask for transparent huge pages (MADV_HUGEPAGE), so
the THP setting (printed) is the same for both. A chase that restarts each sample at the buffer's start
reads the last-level cache at short budgets and fails this comparison.
Usage: .venv/bin/python benchmarks/bench_chase.py [--rounds N] [--mib 256] [--window 2048] [--budgets 0.2,0.1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import NUMATUNE, PROJECT, compile_package


def build() -> Path:
    out = Path(tempfile.mkdtemp(prefix="numatune-chase-")) / "chase_walk"
    subprocess.run(["cc", "-O2", "-o", str(out), str(PROJECT / "benchmarks" / "chase_walk.c")], check=True)
    return out


def c_walk(exe: Path, mib: int, window: int, laps: int = 3) -> float:
    done = subprocess.run([str(exe), str(mib), str(laps), str(window)], capture_output=True, text=True, check=True)
    return statistics.median(float(x) for x in done.stdout.split())


def probe(*extra: str) -> tuple[float | None, int, str | None]:
    """(local latency median in ns, bytes of the chase buffer, why there is no latency) from `numatune probe
    --json`. The budget counts the buffers' set-up, so a short one may leave the latency out, with a reason."""
    done = subprocess.run([*NUMATUNE, "probe", "--json", *extra], capture_output=True, text=True, check=True)
    doc = json.loads(done.stdout)
    cell = next(c for c in doc["cells"] if c["initiator"] == c["target"])
    median = cell["latency_ns"]["median"] if cell["latency_ns"] else None
    return median, doc["buffer_bytes"], None if median is not None else cell["reason"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mib", type=int, default=256, help="the C walk's buffer")
    parser.add_argument("--window", type=int, default=2048, help="the C walk's window in KiB (0: whole buffer)")
    parser.add_argument("--budgets", default="0.2", help="probe --time-budget values compared besides the default")
    args = parser.parse_args()
    compile_package()
    exe = build()
    thp = (Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
           if Path("/sys/kernel/mm/transparent_hugepage/enabled").exists() else "unknown")
    budgets = [b.strip() for b in args.budgets.split(",") if b.strip()]
    runs = {"probe (default budget)": (), **{f"probe --time-budget {b}": ("--time-budget", b) for b in budgets}}
    rows: dict[str, list[float]] = {name: [] for name in [*runs, "C walk"]}
    missing: dict[str, list[str]] = {name: [] for name in runs}
    size = 0
    for _ in range(args.rounds):
        for name, extra in runs.items():
            lat, size, why = probe(*extra)
            (rows[name].append(lat) if lat is not None else missing[name].append(why or "no reason given"))
        rows["C walk"].append(c_walk(exe, args.mib, args.window))
    print(f"THP {thp}; probe's buffer {size >> 20} MiB, C walk {args.mib} MiB (window {args.window} KiB), "
          f"{args.rounds} interleaved rounds; medians (min … max), ns per load")
    for name, vals in rows.items():
        left_out = f"; no latency in {len(missing[name])} round(s): {missing[name][0]}" if missing.get(name) else ""
        shown = f"{statistics.median(vals):7.1f}   ({min(vals):.1f} … {max(vals):.1f})" if vals else "    -"
        print(f"  {name:<26} {shown}{left_out}")
    ref = statistics.median(rows["C walk"])
    for name in [n for n in runs if rows[n]]:
        print(f"{name} / C walk: {statistics.median(rows[name]) / ref:.3f} (goal 0.90-1.10)")


if __name__ == "__main__":
    sys.exit(main())
