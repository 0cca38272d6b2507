"""Write N reproducible `inspect --json` reports of a made-up fleet, for timing `numatune fleet`.

Five topologies come from real fixture trees (`numatune --root FIXTURE inspect --json`, each run once);
every node then gets its own free memory, kernel release, source path and a few MiB less or more
total memory (below the fingerprint's rounding), as identical nodes do. 40% of the nodes are of the
first topology, 15% of each other one. The same N always gives the same bytes (a seeded generator).
Usage: python benchmarks/fleet_data.py DIR [--reports N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from _timing import PROJECT, fixture

sys.path.insert(0, str(PROJECT))
from numatune.analysis.fleet import round_gib  # noqa: E402

TOPOLOGIES = (  # (fixture, share in percent)
    ("32em64t-2n8c+dax+nvme+mic+dimms", 40),
    ("40intel64-2g2n4c+pcilocality", 15),
    ("topo-mi210-xgmi-pcie", 15),
    ("handmade-launch-2s4gpu-cxl", 15),
    ("nvidiagpunumanodes", 15),
)
KERNELS = ("6.1.0-18-amd64", "6.1.0-21-amd64", "6.12.9-amd64")
ENTRY = "import sys; sys.argv[0] = 'numatune'; from numatune.entry import run; run()"


def base_reports() -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(PROJECT), NUMATUNE_PCI_IDS="")
    out = []
    for name, _share in TOPOLOGIES:
        text = subprocess.run([sys.executable, "-c", ENTRY, "--root", str(fixture(name)), "inspect", "--json"],
                              env=env, capture_output=True, check=True, text=True).stdout
        out.append(json.loads(text))
    return out


def write_fleet(directory: Path, reports: int) -> int:
    """Writes node00000.json ... into DIRECTORY; returns the bytes written."""
    bases = base_reports()
    weights = [share for _name, share in TOPOLOGIES]
    rng = random.Random(reports)
    directory.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(reports):
        doc = json.loads(json.dumps(rng.choices(bases, weights)[0]))
        host = f"gpu{i:05d}"
        doc["source"] = f"/ (live node {host})"
        for node in doc["nodes"]:
            if node.get("memory_total_kib"):
                jittered = node["memory_total_kib"] + rng.randint(-4096, 4096)
                if round_gib(jittered) == round_gib(node["memory_total_kib"]):  # same group, as in a real fleet
                    node["memory_total_kib"] = jittered
                node["memory_free_kib"] = rng.randint(0, node["memory_total_kib"])
        doc["settings"]["release"] = rng.choice(KERNELS)
        if doc.get("findings") and rng.random() < 0.1:
            doc["findings"] = doc["findings"][1:]
        text = json.dumps(doc, indent=2) + "\n"
        (directory / f"{host}.json").write_text(text)
        total += len(text)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--reports", type=int, default=10_000)
    args = parser.parse_args()
    size = write_fleet(args.directory, args.reports)
    print(f"{args.reports} reports, {size / 1e6:.0f} MB in {args.directory}")


if __name__ == "__main__":
    main()
