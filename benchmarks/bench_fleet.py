"""Time `numatune fleet` over N inspect reports against `jq -s 'group_by(...)'` over the same files.

The reports are made by fleet_data.py (five topologies from fixture trees, varied per node; 10,000
reports are ~120 MB), written once into a temporary directory. jq's grouping is cruder (node CPU
counts only) but reads every byte as numatune must. Goal: at most 1.0x jq's wall time, peak RSS at
most 200 MB. `--stream N` also pipes N reports as JSON lines into `numatune fleet -` (made on the fly
by a generator process) to show memory stays flat at 100,000 nodes.
Usage: python benchmarks/bench_fleet.py [--rounds N] [--reports N (0: none)] [--stream N]
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from _timing import NUMATUNE, PROJECT, compile_package, measure, report
from fleet_data import write_fleet

JQ = "group_by([(.cpu.sockets | length), (.nodes | map(.cpus | length))]) | map(length)"
# Writes N reports as JSON lines to stdout, reusing fleet_data's variation (one file, rewritten per node).
STREAM = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, {bench!r})
from fleet_data import write_fleet
with tempfile.TemporaryDirectory() as d:
    write_fleet(Path(d), 200)
    docs = [json.dumps(json.loads(p.read_text())) for p in sorted(Path(d).glob('*.json'))]
out = sys.stdout
for i in range({n}):
    out.write(docs[i % 200].replace('"source": "', f'"hostname": "n{{i:06d}}", "source": "', 1) + "\\n")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--stream", type=int, default=0, help="also stream this many reports through stdin")
    args = parser.parse_args()
    if shutil.which("jq") is None:
        sys.exit("jq is not installed (apt-get install jq)")
    compile_package()
    print("numatune byte-compiled (python -m compileall)")
    if args.reports:  # --reports 0: the stream only
        with tempfile.TemporaryDirectory() as tmp:
            fleet = Path(tmp) / "fleet"
            size = write_fleet(fleet, args.reports)
            print(f"{args.reports} reports, {size / 1e6:.0f} MB")
            glob = f"{fleet}/*.json"
            cmds = {
                f"jq -s 'group_by(...)' {args.reports} files (reference)":
                    ["sh", "-c", f"exec jq -s '{JQ}' {glob}"],
                f"numatune fleet DIR ({args.reports} reports)": [*NUMATUNE, "fleet", str(fleet)],
                f"numatune fleet --json DIR ({args.reports} reports)": [*NUMATUNE, "fleet", "--json", str(fleet)],
            }
            report(measure(cmds, args.rounds), next(iter(cmds)), args.rounds, peak=True)
    if args.stream:
        gen = STREAM.format(bench=str(PROJECT / "benchmarks"), n=args.stream)
        script = Path(tempfile.gettempdir()) / "numatune-fleet-stream.py"
        script.write_text(gen)
        nt = shlex.join(NUMATUNE)
        cmds = {
            f"generator only ({args.stream} reports to /dev/null)": ["sh", "-c", f"{sys.executable} {script}"],
            f"generator | numatune fleet - ({args.stream} reports)":
                ["bash", "-o", "pipefail", "-c", f"{sys.executable} {script} | {nt} fleet -"],
        }
        print()
        report(measure(cmds, 1), next(iter(cmds)), 1, peak=True)
        script.unlink()


if __name__ == "__main__":
    main()
