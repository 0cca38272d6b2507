"""Time `numatune irq --json` and the `irq` text report against `awk '{n+=NF} END {print n}'` on a large
/proc/interrupts (goals: JSON at most 4x awk; the text within 3x of its JSON: issue 41).

By default the PCP sample (13 MB, 1034 IRQ rows, 1152 CPU columns) is decompressed into a temporary root
that holds only proc/interrupts; numatune reads it through --root and prints its report (the i40e queue
IRQs of four netdevs, found by their action names). `--rows N` times a generated root instead
(tests/big_roots.py: the vm-two-socket tree with N rows of its NIC's queues, every row a row of the
table; the row bound is 32,768). awk reads the same file. The commands run interleaved, N rounds each,
after one warm-up; the table gives median and minimum wall time, median CPU time (user + system of the
child, which a busy machine disturbs less) and the ratio to awk. A bare `python -c "import click"` is shown
as the floor every Python CLI pays. The package is byte-compiled first (as an installed package is): with
PYTHONDONTWRITEBYTECODE set, a checkout would otherwise be compiled from source on every run.
Usage: .venv/bin/python benchmarks/bench_irq.py [--rounds N] [--rows N]
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import fixture

PROJECT = Path(__file__).resolve().parent.parent
SAMPLE = fixture("pcp-1152cpu-x86_64") / "proc/interrupts.bz2"
ENTRY = "import sys; sys.argv[0] = 'numatune'; from numatune.entry import run; run()"


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env).stdout
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--rows", type=int, default=0, help="a generated /proc/interrupts of N device rows")
    args = parser.parse_args()
    awk = shutil.which("awk")
    if awk is None:
        sys.exit("awk not found")
    import compileall

    compileall.compile_dir(str(PROJECT / "numatune"), quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-irq-"))
    try:
        if args.rows:
            sys.path.insert(0, str(PROJECT))
            from tests.big_roots import interrupts_root

            root = interrupts_root(tmp, args.rows)
            target = root / "proc/interrupts"
            what = f"generated, {args.rows} rows of a NIC's queues, 4 CPUs"
        else:
            root = tmp
            (tmp / "proc").mkdir()
            target = tmp / "proc/interrupts"
            target.write_bytes(bz2.decompress(SAMPLE.read_bytes()))
            what = "PCP sample, 1152 CPUs"
        env = dict(os.environ, PYTHONPATH=str(PROJECT), NUMATUNE_PCI_IDS="")
        commands = {
            "numatune irq --json": [sys.executable, "-c", ENTRY, "--root", str(root), "irq", "--json"],
            "numatune irq (text)": [sys.executable, "-c", ENTRY, "--root", str(root), "irq"],
            "awk '{n+=NF} END {print n}'": [awk, "{n+=NF} END {print n}", str(target)],
            'python -c "import click"': [sys.executable, "-c", "import click"],
        }
        _, _, out = timed(commands["numatune irq --json"], env)  # warm-up, and a sanity check
        doc = json.loads(out)
        irqs = sum(len(d["irqs"]) for d in doc["devices"])
        for cmd in commands.values():
            timed(cmd, env)
        walls: dict[str, list[float]] = {k: [] for k in commands}
        cpus: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                wall, cpu, _ = timed(cmd, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        ref = statistics.median(walls["awk '{n+=NF} END {print n}'"])
        ref_cpu = statistics.median(cpus["awk '{n+=NF} END {print n}'"])
        size = target.stat().st_size
        print(f"/proc/interrupts: {what}, {size / 1e6:.1f} MB; numatune reported {len(doc['devices'])} devices, "
              f"{irqs} IRQs; {args.rounds} rounds, {os.cpu_count()} CPUs")
        print(f"{'command':34} {'median ms':>10} {'min ms':>8} {'cpu ms':>8} {'x awk':>6} {'x awk cpu':>9}")
        for name in commands:
            med = statistics.median(walls[name])
            cpu = statistics.median(cpus[name])
            print(f"{name:34} {med * 1e3:10.1f} {min(walls[name]) * 1e3:8.1f} {cpu * 1e3:8.1f} "
                  f"{med / ref:6.2f} {cpu / ref_cpu if ref_cpu else float('nan'):9.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
