"""`numatune --root T inspect --json` against hwloc's `lstopo -i T --of xml` (goal: at most 2.0x), the
human `inspect` (tables, piped) against `lstopo -i T --of console` (goal: at most 2.0x), and
`numatune --help` / `--version` against `python -c "import click"` (goal: at most 1.2x).

T is the 256-CPU POWER7 tree (fixture 256ppc-8n8s4t); `--tree pcp-1152cpu-x86_64` shows growth.
Usage: python benchmarks/bench_inspect.py [--rounds N] [--tree NAME]
"""

from __future__ import annotations

import argparse
import shutil
import sys

from _timing import NUMATUNE, compile_package, fixture, measure, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tree", default="256ppc-8n8s4t")
    args = parser.parse_args()
    if shutil.which("lstopo") is None:
        sys.exit("lstopo not found: apt-get install hwloc")
    compile_package()
    print(f"numatune byte-compiled (python -m compileall); T = {args.tree}")
    tree = str(fixture(args.tree))
    env = {"NUMATUNE_PCI_IDS": "", "PATH": "/usr/bin:/bin"}
    inspect = {
        "lstopo -i T --of xml (reference)": ["lstopo", "-i", tree, "--of", "xml", "-"],
        "numatune --root T inspect --json": [*NUMATUNE, "--root", tree, "inspect", "--json"],
    }
    report(measure(inspect, args.rounds, env), "lstopo -i T --of xml (reference)", args.rounds)
    print()
    human = {
        "lstopo -i T --of console (reference)": ["lstopo", "-i", tree, "--of", "console"],
        "numatune --root T inspect (tables)": [*NUMATUNE, "--root", tree, "inspect"],
    }
    report(measure(human, args.rounds, env), "lstopo -i T --of console (reference)", args.rounds)
    print()
    startup = {
        "python -c 'import click' (reference)": [sys.executable, "-c", "import click"],
        "numatune --help": [*NUMATUNE, "--help"],
        "numatune --version": [*NUMATUNE, "--version"],
    }
    report(measure(startup, args.rounds), "python -c 'import click' (reference)", args.rounds)


if __name__ == "__main__":
    main()
