"""`numatune --root ARCHIVE inspect --json` against `--root TREE` (the same archive extracted), for every
fixture machine, two ways (goals from issue 22):

- full tree: fixtures/NAME.tar.gz (the whole saved tree, up to 16k members) against it extracted
  (goal: at most 10x);
- snapshot: `numatune --root TREE snapshot -o NAME.tar.gz` (what a user sends) against it extracted
  (goal: at most 2x).

The archive is read into memory on every call (never unpacked); the tree is read file by file. Both
columns are medians of interleaved rounds; the ratios are of wall time and of the child's CPU time
(the CPU ratio is the steadier one on a loaded machine). Prints a Markdown table.
Usage: python benchmarks/bench_roots.py [--rounds N] [--command inspect|check] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from _timing import NUMATUNE, PROJECT, compile_package, fixture, measure


def _members(archive: Path) -> int:
    with tarfile.open(archive) as tar:
        return sum(1 for _ in tar)


def _snapshot(tree: Path, work: Path, name: str, env: dict[str, str]) -> tuple[Path, Path]:
    """(numatune's own snapshot of TREE, that snapshot extracted) under WORK."""
    archive = work / f"{name}.tar.gz"
    subprocess.run([*NUMATUNE, "--root", str(tree), "snapshot", "-o", str(archive)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = work / f"{name}.x"
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")  # our own archive, extracted to time the tree it holds
    [top] = list(out.iterdir())
    return archive, top


def _ratio(results: dict, archive: str, tree: str) -> tuple[float, float, float, float]:
    """(tree wall ms, archive wall ms, wall ratio, CPU ratio) from medians."""
    tw, ac = statistics.median(results[tree][0]), statistics.median(results[archive][0])
    tc, acpu = statistics.median(results[tree][1]), statistics.median(results[archive][1])
    return tw * 1000, ac * 1000, ac / tw, acpu / tc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--command", default="inspect", choices=["inspect", "check"])
    parser.add_argument("names", nargs="*", help="fixture machines (default: every one)")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT))
    from tests.fixture_archives import fixture_archive, fixture_names

    compile_package()
    env = {"NUMATUNE_PCI_IDS": "", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT)}
    print(f"numatune byte-compiled (python -m compileall); `{args.command} --json`, {args.rounds} interleaved "
          "rounds, medians; ratio = archive / tree (wall, CPU)\n")
    print("| machine | full-tree members | tree ms | archive ms | ratio wall / CPU | snapshot members | "
          "tree ms | archive ms | ratio wall / CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst_full, worst_snap = (0.0, ""), (0.0, "")
    with tempfile.TemporaryDirectory(prefix="bench-roots-") as tmp:
        for name in args.names or fixture_names():
            full, tree = fixture_archive(name), fixture(name)
            snap, snap_tree = _snapshot(tree, Path(tmp), name, env)
            cmd = [args.command, "--json"]
            roots = {"full archive": full, "full tree": tree, "snap archive": snap, "snap tree": snap_tree}
            results = measure({k: [*NUMATUNE, "--root", str(v), *cmd] for k, v in roots.items()}, args.rounds, env)
            f = _ratio(results, "full archive", "full tree")
            s = _ratio(results, "snap archive", "snap tree")
            worst_full, worst_snap = max(worst_full, (f[3], name)), max(worst_snap, (s[3], name))
            print(f"| {name} | {_members(full)} | {f[0]:.0f} | {f[1]:.0f} | {f[2]:.2f}x / {f[3]:.2f}x "
                  f"| {_members(snap)} | {s[0]:.0f} | {s[1]:.0f} | {s[2]:.2f}x / {s[3]:.2f}x |", flush=True)
    load = os.getloadavg()[0]
    print(f"\nworst CPU ratio: full tree {worst_full[0]:.2f}x ({worst_full[1]}; goal <= 10x), snapshot "
          f"{worst_snap[0]:.2f}x ({worst_snap[1]}; goal <= 2x); load {load:.1f}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
