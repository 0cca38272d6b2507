"""Time `numatune launch --node 0 -- true` against `python -c "import click"` (the goal: at most 1.3x).

Runs the commands interleaved, N rounds each, and prints a table of median and minimum wall times and the
median CPU time (user + system of the child), which a busy machine disturbs less.
`numatune` is invoked the way pip's console script does (`from numatune.cli import main`), so the
figure includes the interpreter start, click, the topology read and the exec of numactl and `true`.
Usage: .venv/bin/python benchmarks/bench_launch.py [--rounds N]
"""

from __future__ import annotations

import argparse
import sys

from _timing import NUMATUNE, compile_package, measure, report

REFERENCE = "python -c 'import click' (reference)"


def commands() -> dict[str, list[str]]:
    launch = [*NUMATUNE, "launch", "-q", "--node", "0"]
    return {
        REFERENCE: [sys.executable, "-c", "import click"],
        "numatune launch --node 0 -- true": [*launch, "--", "true"],
        "numatune launch --node 0 --via direct -- true": [*launch, "--via", "direct", "--", "true"],
        "numatune launch --node 0 --mem-policy none --cpu-bind none -- true": [
            *launch, "--mem-policy", "none", "--cpu-bind", "none", "--", "true"],
        "numactl --cpunodebind=0 --membind=0 true (tool alone)": ["numactl", "--cpunodebind=0", "--membind=0", "true"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    compile_package()
    report(measure(commands(), args.rounds), REFERENCE, args.rounds)


if __name__ == "__main__":
    main()
