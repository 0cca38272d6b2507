"""Time `numatune check`, `diff` and `fleet` against the tools an admin would use instead, side by side.

- check ROOT            vs  `lstopo-no-graphics --input ROOT --of xml` (hwloc reading the same saved tree)
- diff A B (two roots)  vs  lstopo both trees to XML, then `hwloc-diff a.xml b.xml`
- fleet DIR (N reports) vs  `jq -s 'group_by(...)'` over the same files (a crude grouping by node CPU counts)

Rounds are interleaved; the table shows median and minimum wall time and the ratio to the reference.
Usage: .venv/bin/python benchmarks/bench_check.py [--rounds N] [--reports N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import fixture

PROJECT = Path(__file__).resolve().parent.parent
ENTRY = "import sys; sys.argv[0] = 'numatune'; from numatune.entry import run; run()"
A = fixture("memorysidecaches")
B = fixture("32em64t-2n8c+dax+nvme+mic+dimms")
JQ = "group_by([(.cpu.sockets | length), (.nodes | map(.cpus | length))]) | map(length)"


def pairs(tmp: Path, reports: int) -> list[tuple[str, list[str], list[str]]]:
    """(label, numatune argv, reference argv)."""
    nt = [sys.executable, "-c", ENTRY]
    env = dict(os.environ, PYTHONPATH=str(PROJECT), NUMATUNE_PCI_IDS="")
    doc = subprocess.run([*nt, "--root", str(B), "inspect", "--json"], env=env, capture_output=True, check=True,
                         text=True).stdout
    fleet = tmp / "fleet"
    fleet.mkdir()
    for i in range(reports):
        (fleet / f"node{i:04d}.json").write_text(doc)
    files = " ".join(str(p) for p in sorted(fleet.glob("*.json")))
    lstopo = "lstopo-no-graphics --input {root} --of xml {out}"
    diff_ref = (f"{lstopo.format(root=A, out=tmp / 'a.xml')} && {lstopo.format(root=B, out=tmp / 'b.xml')} && "
                f"hwloc-diff {tmp / 'a.xml'} {tmp / 'b.xml'} >/dev/null; true")
    return [
        (f"check {B.name}", [*nt, "--root", str(B), "check", "--json"],
         ["lstopo-no-graphics", "--input", str(B), "--of", "xml", "-"]),
        (f"diff {A.name} {B.name}", [*nt, "diff", str(A), str(B)], ["sh", "-c", diff_ref]),
        (f"fleet {reports} reports", [*nt, "fleet", "--json", str(fleet)], ["sh", "-c", f"jq -s '{JQ}' {files}"]),
    ]


def run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"{argv[:4]} failed ({done.returncode}): {done.stderr.decode()[-300:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reports", type=int, default=500)
    args = parser.parse_args()
    for tool in ("lstopo-no-graphics", "hwloc-diff", "jq"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (apt-get install hwloc jq)")
    env = dict(os.environ, PYTHONPATH=str(PROJECT), NUMATUNE_PCI_IDS="")
    with tempfile.TemporaryDirectory() as tmp:
        cases = pairs(Path(tmp), args.reports)
        times = {label: ([], []) for label, _, _ in cases}
        for _ in range(args.rounds):
            for label, ours, ref in cases:
                times[label][0].append(run(ours, env))
                times[label][1].append(run(ref, env))
    print(f"{'case':44} {'numatune med ms':>15} {'min':>6} {'reference med ms':>16} {'min':>6} {'ratio':>6}")
    for label, _ours, ref in cases:
        a, b = times[label]
        ratio = statistics.median(a) / statistics.median(b)
        print(f"{label:44} {statistics.median(a) * 1000:15.0f} {min(a) * 1000:6.0f} "
              f"{statistics.median(b) * 1000:16.0f} {min(b) * 1000:6.0f} {ratio:6.2f}")
        print(f"{'':44} reference: {' '.join(ref)[:90]}")
    print(json.dumps({"rounds": args.rounds, "reports": args.reports}))


if __name__ == "__main__":
    main()
