"""Time `numatune.bind()` against launch's own planning (issue 36: the in-process call costs no more).

Two views. Processes, interleaved rounds as bench_launch: `numatune launch --node 0 --via direct -- true`
(the CLI, its planning, the exec), against `python -c "import numatune; numatune.bind(node=0, ...)"` planned
only (dry_run), applied without moving pages (move=False), and applied in full. Then in one process, after the
imports: launch's planning function (live.bind.plan_live, what `launch` runs) against bind(dry_run=True) and
bind() itself (the planning, every thread's mask, the policy, the mappings' range policies, the page walk).
Usage: .venv/bin/python benchmarks/bench_bind.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from _timing import NUMATUNE, PROJECT, compile_package, measure, report

REFERENCE = "numatune launch --node 0 --via direct -- true (reference)"


def commands() -> dict[str, list[str]]:
    def py(call: str) -> list[str]:
        return [sys.executable, "-c", f"import numatune; numatune.{call}"]

    return {
        REFERENCE: [*NUMATUNE, "launch", "-q", "--node", "0", "--via", "direct", "--", "true"],
        "python -c 'import numatune; numatune.bind(node=0, dry_run=True)'": py("bind(node=0, dry_run=True)"),
        "python -c 'import numatune; numatune.bind(node=0, move=False)'": py("bind(node=0, move=False)"),
        "python -c 'import numatune; numatune.bind(node=0)'": py("bind(node=0)"),
    }


def in_process(rounds: int) -> None:
    sys.path.insert(0, str(PROJECT))
    import numatune
    from numatune.live.bind import plan_live
    from numatune.placement.binding import options
    from numatune.system.host import Host

    opts = options(0)
    calls = {
        "live.bind.plan_live (launch's planning)": lambda: plan_live(Host.open("/"), os.environ, opts),
        "numatune.bind(node=0, dry_run=True)": lambda: numatune.bind(node=0, dry_run=True),
        "numatune.bind(node=0, move=False)": lambda: numatune.bind(node=0, move=False),
        "numatune.bind(node=0)": lambda: numatune.bind(node=0),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t)
    print(f"\nin one process, after the imports ({rounds} rounds, interleaved)")
    print(f"{'call':48} {'median ms':>10} {'min ms':>8}")
    for name, ts in times.items():
        print(f"{name:48} {statistics.median(ts) * 1e3:10.2f} {min(ts) * 1e3:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    compile_package()
    report(measure(commands(), args.rounds), REFERENCE, args.rounds, peak=True)
    in_process(args.rounds)


if __name__ == "__main__":
    main()
