"""Time `numatune fleet - --emit slurm-topology` over N GB200 trays' inspect reports streamed as pdsh prints them,
beside jq doing the least a jq script can for the same answer (strip the prefixes, parse every report, print each
GPU's domain).

The reports are tests/fleet_gen.py's SYNTHETIC GB200 trays (~91 KB of JSON each as inspect writes it, ~141 KB
with pdsh's "host: " prefixes; 18 trays a rack, a rack a domain), written once into a temporary file. Goal
(issue 48): 25,000 reports in under 60 s and 256 MiB on the 2-core development machine, linear in nodes.
Usage: python benchmarks/bench_fleet_emit.py [--trays N [N ...]] [--rounds N] [--no-jq]
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from _timing import NUMATUNE, PROJECT, compile_package, measure, report

JQ = "sed 's/^[^:]*: //' {file} | jq -c '[.gpu_fabric.nvml_gpus[].domain]' > /dev/null"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trays", type=int, nargs="+", default=[25_000])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-jq", action="store_true", help="numatune only")
    args = parser.parse_args()
    if not args.no_jq and shutil.which("jq") is None:
        sys.exit("jq is not installed (apt-get install jq), or give --no-jq")
    sys.path.insert(0, str(PROJECT))
    from tests.fleet_gen import write_pdsh

    compile_package()
    print("numatune byte-compiled (python -m compileall)")
    nt = shlex.join(NUMATUNE)
    for trays in args.trays:
        with tempfile.TemporaryDirectory() as tmp:
            stream = Path(tmp) / "pdsh.txt"
            with stream.open("w") as out:
                write_pdsh(out, trays)
            print(f"\n{trays} GB200 tray reports as pdsh prints them: {stream.stat().st_size / 1e9:.2f} GB")
            cmds = {}
            if not args.no_jq:
                cmds[f"sed | jq (reference, {trays})"] = ["sh", "-c", JQ.format(file=shlex.quote(str(stream)))]
            cmds[f"numatune fleet - --emit slurm-topology ({trays})"] = [
                "sh", "-c", f"exec {nt} fleet - --emit slurm-topology < {shlex.quote(str(stream))} > /dev/null"]
            report(measure(cmds, args.rounds), next(iter(cmds)), args.rounds, peak=True)


if __name__ == "__main__":
    main()
