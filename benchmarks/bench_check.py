"""Time `numatune check` and `diff` against the tools an admin would use instead, side by side.

- check T (built-in rules)  vs  `lstopo -i T --of xml` (hwloc reading the same saved tree); goal: at most 1.5x
- diff A B (two trees)      vs  lstopo both trees to XML, then `hwloc-diff a.xml b.xml`; goal: at most 2x
(`fleet` has its own benchmark, bench_fleet.py.) T defaults to the 256-CPU POWER7 tree; pass
`--tree pcp-1152cpu-x86_64` to watch growth with 1,000+ CPUs. Rounds are interleaved.
Usage: python benchmarks/bench_check.py [--rounds N] [--tree NAME] [--a NAME --b NAME]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _timing import NUMATUNE, compile_package, fixture, measure, report

ENV = {"NUMATUNE_PCI_IDS": "", "PATH": "/usr/bin:/bin"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tree", default="256ppc-8n8s4t")
    parser.add_argument("--a", default="memorysidecaches")
    parser.add_argument("--b", default="32em64t-2n8c+dax+nvme+mic+dimms")
    args = parser.parse_args()
    for tool in ("lstopo", "hwloc-diff"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (apt-get install hwloc)")
    compile_package()
    print("numatune byte-compiled (python -m compileall)")
    tree, a, b = str(fixture(args.tree)), str(fixture(args.a)), str(fixture(args.b))
    check = {
        "lstopo -i T --of xml (reference)": ["lstopo", "-i", tree, "--of", "xml", "-"],
        "numatune --root T check": [*NUMATUNE, "--root", tree, "check"],
        "numatune --root T check --json": [*NUMATUNE, "--root", tree, "check", "--json"],
    }
    print(f"T = {args.tree}")
    report(measure(check, args.rounds, ENV), next(iter(check)), args.rounds)
    print()
    with tempfile.TemporaryDirectory() as tmp:
        xa, xb = Path(tmp) / "a.xml", Path(tmp) / "b.xml"
        ref = (f"lstopo -f -i {a} --of xml {xa} && lstopo -f -i {b} --of xml {xb} && "
               f"hwloc-diff {xa} {xb} >/dev/null; true")
        diff = {
            "2x lstopo --of xml + hwloc-diff (reference)": ["sh", "-c", ref],
            "numatune diff A B": [*NUMATUNE, "diff", a, b],
            "numatune diff A B --json": [*NUMATUNE, "diff", a, b, "--json"],
        }
        print(f"A = {args.a}, B = {args.b}")
        report(measure(diff, args.rounds, ENV), next(iter(diff)), args.rounds)


if __name__ == "__main__":
    main()
