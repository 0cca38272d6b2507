"""`numatune --root T inspect --json` against hwloc's `lstopo -i T --of xml` (goal: at most 2.0x), and
`numatune --help` / `--version` against `python -c "import click"` (goal: at most 1.2x).

T is the 256-CPU POWER7 tree (fixtures/256ppc-8n8s4t.tar.gz, extracted).
Usage: python benchmarks/bench_inspect.py [--rounds N]
"""

from __future__ import annotations

import argparse
import shutil
import sys

from _timing import NUMATUNE, compile_package, fixture, measure, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tree", help="a root directory (default: the 256ppc-8n8s4t fixture)")
    args = parser.parse_args()
    if shutil.which("lstopo") is None:
        sys.exit("lstopo not found: apt-get install hwloc")
    compile_package()
    tree = args.tree or str(fixture("256ppc-8n8s4t"))
    inspect = {
        "lstopo -i T --of xml (reference)": ["lstopo", "-i", tree, "--of", "xml", "-"],
        "numatune --root T inspect --json": [*NUMATUNE, "--root", tree, "inspect", "--json"],
        "numatune --root T inspect (table)": [*NUMATUNE, "--root", tree, "inspect"],
    }
    report(measure(inspect, args.rounds, {"NUMATUNE_PCI_IDS": "", "PATH": "/usr/bin:/bin"}),
           "lstopo -i T --of xml (reference)", args.rounds)
    print()
    startup = {
        "python -c 'import click' (reference)": [sys.executable, "-c", "import click"],
        "numatune --help": [*NUMATUNE, "--help"],
        "numatune --version": [*NUMATUNE, "--version"],
    }
    report(measure(startup, args.rounds), "python -c 'import click' (reference)", args.rounds)


if __name__ == "__main__":
    main()
