"""Fixture machines as snapshot archives: pack a tree into fixtures/NAME.tar.gz, unpack one for the tests.

Each archive is written by numatune's own snapshot writer (`Capture.write_tar`), so a fixture is exactly
what a user sends with `numatune snapshot -o NAME.tar.gz`. The whole tree is packed, not only what
`snapshot` selects (hwloc's EXPECTED-lstopo.*, HWLOC-TEST.txt, proc/interrupts.bz2 and PROVENANCE.md
included); empty directories are tar members, so the `.keep` files git needed are left out. Packing is
reproducible: sorted members, mtime 0, uid/gid 0 and a gzip header without name or time, so packing the
same tree again gives the same bytes.

    python -m tests.fixture_archives pack TREE [TREE ...] [--into fixtures]   # adding a machine
    python -m tests.fixture_archives repack fixtures/NAME.tar.gz             # exits 1 if not canonical

`pack` then checks the archive against the tree: same members (`.keep` aside), and the same output,
byte for byte, from `inspect --json`, `irq --json`, `check --json` and `inspect` on either root.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from numatune.commands.snapshot import DRY_RUN, Capture
from numatune.entry import match_fast_path
from numatune.system.host import Host

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SUFFIX = ".tar.gz"
KEEP = ".keep"  # marked empty directories when fixtures were trees in git; never packed
# Extracted fixtures, one directory per archive content hash: a changed archive gets a new directory, an
# unchanged one is extracted once per machine (extracting all 69k members costs seconds, reading them nothing).
CACHE = Path(os.environ.get("NUMATUNE_FIXTURE_CACHE")
             or Path(tempfile.gettempdir()) / f"numatune-fixtures-{os.getuid()}")


def fixture_names() -> list[str]:
    """Every fixture machine: each `fixtures/NAME.tar.gz`."""
    return sorted(p.name[: -len(SUFFIX)] for p in FIXTURES.glob(f"*{SUFFIX}"))


def fixture_archive(name: str) -> Path:
    path = FIXTURES / f"{name}{SUFFIX}"
    if not path.is_file():
        raise FileNotFoundError(f"no fixture {path}")
    return path


@functools.cache
def cache_key(name: str) -> Path:
    """CACHE/NAME-<content hash>: where this content of fixtures/NAME.tar.gz is extracted (and facts about it kept)."""
    return CACHE / f"{name}-{hashlib.sha256(fixture_archive(name).read_bytes()).hexdigest()[:16]}"


@functools.cache
def extracted(name: str) -> Path:
    """The root of fixtures/NAME.tar.gz extracted into CACHE (once per archive content; never written to)."""
    archive = fixture_archive(name)
    final = cache_key(name)
    if not final.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=CACHE))
        try:
            unpack(archive, tmp / "x")
            try:
                os.rename(tmp / "x", final)  # atomic: a concurrent run may have won, then its copy is used
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return tree_in(final)


def capture_tree(tree: Path) -> Capture:
    """Every directory, file and symlink under `tree` (symlinks as written; `.keep` markers dropped)."""
    tree = Path(tree)
    cap = Capture(Host(str(tree), str(tree)))
    cap.dirs.add("/")
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = os.path.relpath(dirpath, tree)
        logical = "/" if rel == "." else "/" + rel.replace(os.sep, "/")
        base = logical.rstrip("/")
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            child = f"{base}/{name}"
            if os.path.islink(path):
                cap.links[child] = os.readlink(path)
            elif os.path.isdir(path):
                cap.dirs.add(child)
            elif os.path.isfile(path):
                if name == KEEP and os.path.getsize(path) == 0:
                    continue
                with open(path, "rb") as fh:
                    cap.files[child] = fh.read()
            else:
                raise ValueError(f"{path}: not a file, directory or symlink")
    return cap


def pack(tree: Path, dest: Path, name: str | None = None) -> Path:
    """Write `tree` to `dest` (an archive whose single top directory is `name`); returns dest."""
    dest = Path(dest)
    name = name or dest.name.removesuffix(SUFFIX)
    tmp = dest.with_name(dest.name + ".partial")
    try:
        capture_tree(tree).write_tar(tmp, name, mtime=0)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


def unpack(archive: Path, dest: Path) -> Path:
    """Extract into `dest` (created) and return the tree root inside it (the single top directory).

    GNU tar when present: 5x faster than tarfile on the 69k members of all fixtures.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tar = shutil.which("tar")
    if tar:
        subprocess.run([tar, "-xzf", str(archive), "-C", str(dest), "--no-same-owner"], check=True,
                       stdin=subprocess.DEVNULL)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    return tree_in(dest)


def tree_in(path: Path) -> Path:
    """The single top directory of an extracted archive (NAME/ for the fixtures), else `path` itself."""
    entries = list(Path(path).iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(path)


def is_canonical(archive: Path) -> bool:
    """True if re-packing the archive's own tree gives the same bytes (it was packed by `pack`)."""
    archive = Path(archive)
    with tempfile.TemporaryDirectory(prefix="numatune-repack-") as tmp:
        root = unpack(archive, Path(tmp) / "tree")
        again = pack(root, Path(tmp) / archive.name, name=root.name)
        return again.read_bytes() == archive.read_bytes()


def members(tree: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """path -> (kind, content or link target) for a tree, the way `pack` sees it."""
    cap = capture_tree(tree)
    out: dict[str, tuple[str, bytes | str | None]] = {d: ("dir", None) for d in cap.dirs}
    out.update({p: ("file", data) for p, data in cap.files.items()})
    out.update({p: ("link", target) for p, target in cap.links.items()})
    return out


# The snapshot's lines that start click-free (numatune.entry), and the human inspect.
COMMANDS = (*(line for line in DRY_RUN if match_fast_path(line, {}) is not None), ("inspect",))


def output_differences(tree: Path, archive: Path) -> list[str]:
    """The commands whose exit status, stdout or stderr differ between the tree and the archive as --root
    (each root's own name replaced by ROOT, since reports name their source)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMATUNE_ROOT"}
    env.update(NUMATUNE_PCI_IDS="", COLUMNS="200", NO_COLOR="1")
    differ = []
    for args in COMMANDS:
        seen = []
        for root in (str(tree), str(archive)):
            r = subprocess.run([sys.executable, "-m", "numatune", "--root", root, *args], capture_output=True,
                               env=env, check=False)
            name = root.encode()
            seen.append((r.returncode, r.stdout.replace(name, b"ROOT"), r.stderr.replace(name, b"ROOT")))
        if seen[0] != seen[1]:
            differ.append(" ".join(args))
    return differ


def verify(tree: Path, archive: Path) -> list[str]:
    """Everything that differs between a tree and its archive (empty when the archive is faithful)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="numatune-verify-") as tmp:
        a, b = members(tree), members(unpack(archive, Path(tmp) / "x"))
        for path in sorted(a.keys() ^ b.keys()):
            problems.append(f"{path}: only in the {'tree' if path in a else 'archive'}")
        problems += [f"{p}: differs" for p in sorted(a.keys() & b.keys()) if a[p] != b[p]]
    problems += [f"`numatune {cmd}` output differs" for cmd in output_differences(tree, archive)]
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fixture_archives", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="pack trees into INTO/<tree name>.tar.gz")
    p.add_argument("trees", nargs="+", type=Path)
    p.add_argument("--into", type=Path, default=Path(__file__).resolve().parent.parent / "fixtures")
    r = sub.add_parser("repack", help="check that archives are canonical (re-packing gives the same bytes)")
    r.add_argument("archives", nargs="+", type=Path)
    args = ap.parse_args(argv)
    status = 0
    if args.cmd == "pack":
        for tree in args.trees:
            out = pack(tree, args.into / f"{tree.resolve().name}{SUFFIX}")
            problems = verify(tree, out)
            print(f"{out} ({out.stat().st_size} bytes): " + ("same members and outputs as the tree" if not problems
                                                            else f"{len(problems)} differences"))
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
            status |= bool(problems)
        return status
    bad = [a for a in args.archives if not is_canonical(a)]
    for a in bad:
        print(f"{a}: not canonical: re-pack it with `python -m tests.fixture_archives pack`", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
