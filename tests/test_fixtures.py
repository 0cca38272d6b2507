"""Fixture machines are snapshot archives: documented, safe to extract, canonical, and read like their tree."""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import subprocess
import tarfile

import pytest

from tests.conftest import FIXTURES, PROJECT, fixture_archive, fixture_copy, fixture_root, tree_fixtures
from tests.fixture_archives import KEEP, cache_key, pack


def test_the_checkout_holds_no_fixture_trees():
    """One file per machine (plus its notes): a tree of small files under fixtures/ is what #16 removed."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    tracked = subprocess.run(["git", "ls-files", "fixtures"], cwd=PROJECT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    extra = [p for p in tracked.stdout.splitlines()
             if not p.endswith((".tar.gz", ".md")) and not p.startswith("fixtures/LICENSES/")]
    assert not extra, extra[:10]


@pytest.mark.parametrize("name", tree_fixtures())
def test_fixture_is_documented(name):
    readme = (FIXTURES / "README.md").read_text()
    assert f"| {name} |" in readme or (FIXTURES / f"{name}.md").is_file(), f"{name}: no provenance"


def test_the_readme_claims_no_more_than_the_archives_show():
    """Hand-made trees are named handmade-*, listed in the hand-made table and labelled there; while one
    exists the README may not say that none was written by the team."""
    readme = (FIXTURES / "README.md").read_text()
    handmade = [n for n in tree_fixtures() if n.startswith("handmade-")]
    table = readme[readme.index("## Hand-made"):] if handmade else ""
    for name in handmade:
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        assert "**hand-made**" in row, name
    if handmade:
        assert "none was written by" not in " ".join(readme.lower().split())


@pytest.mark.parametrize("name", tree_fixtures())
def test_archive_is_safe_and_canonical(name):
    """What numatune's snapshot writer gives (`pack`, or a user's `numatune snapshot -o` as written): one
    top directory, data members only, no link leaving the tree, sorted (directories, files, links), owner
    0, no `.keep`, and a gzip header without time. The top directory's name and the members' mtime are
    free: a user's snapshot renamed to fixtures/NAME.tar.gz is a fixture as it is (`pack` writes NAME/
    and mtime 0, so that re-packing gives the same bytes).

    Reading 69k tar headers takes seconds, so a pass is remembered beside the extracted copy, keyed by the
    archive's content hash and by this check's own source: only a new or changed archive (or check) is read again.
    """
    rules = hashlib.sha256(inspect.getsource(_check_canonical).encode()).hexdigest()[:8]
    passed = cache_key(name).with_name(f"{cache_key(name).name}.canonical-{rules}")
    if passed.is_file():
        return
    _check_canonical(name, fixture_archive(name))
    passed.parent.mkdir(parents=True, exist_ok=True)
    passed.touch()


def _check_canonical(name, path):
    with open(path, "rb") as fh:
        header = fh.read(10)
    assert header[:3] == b"\x1f\x8b\x08" and header[4:8] == b"\0\0\0\0", "gzip header carries a time"
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    top = members[0].name
    assert members[0].isdir() and top and "/" not in top and top not in (".", ".."), top
    kinds = {"dir": [], "file": [], "link": []}
    for m in members:
        assert m.name == top or m.name.startswith(f"{top}/"), m.name
        assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", ""), m.name
        assert m.isdir() or m.isfile() or m.issym(), m.name
        assert os.path.basename(m.name) != KEEP, m.name
        if m.issym():
            assert not m.linkname.startswith("/"), m.name
            resolved = os.path.normpath(os.path.join(os.path.dirname(m.name), m.linkname))
            assert resolved == top or resolved.startswith(f"{top}/"), f"{m.name} -> {m.linkname} leaves the tree"
        kinds["dir" if m.isdir() else "link" if m.issym() else "file"].append(m.name)
    order = [n for k in ("dir", "file", "link") for n in kinds[k]]
    assert [m.name for m in members] == order, "members out of order: re-pack with tests.fixture_archives"
    for k in ("file", "link"):
        assert kinds[k] == sorted(kinds[k]), f"{k}s not sorted"


@pytest.mark.parametrize("name", tree_fixtures())
def test_the_archive_reads_like_its_tree(cli, name):
    """Every fixture archive, read in memory by numatune's own archive reader (never unpacked), gives the
    report of the tree GNU tar extracts from it, byte for byte."""
    archive, tree = fixture_root(name, archive=True), fixture_root(name)
    a = cli("--root", str(archive), "inspect", "--json")
    b = cli("--root", str(tree), "inspect", "--json")
    assert a.exit_code == b.exit_code == 0
    assert a.stdout.replace(str(archive), "ROOT") == b.stdout.replace(str(tree), "ROOT")


def test_a_users_snapshot_is_a_fixture_as_it_is(cli, tmp_path):
    """`numatune snapshot -o mine.tar.gz` (now: a real mtime, top directory `mine`), renamed to NAME.tar.gz
    and not re-packed, passes every rule a fixture must pass, and reads as the machine it came from."""
    mine = tmp_path / "mine.tar.gz"
    source = fixture_root("vm-two-socket")
    assert cli("--root", str(source), "snapshot", "-o", str(mine)).exit_code == 0
    fixture = tmp_path / "fixtures" / "node7.tar.gz"
    fixture.parent.mkdir()
    shutil.copyfile(mine, fixture)
    with tarfile.open(fixture) as tar:
        assert tar.getmembers()[0].name == "mine" and tar.getmembers()[1].mtime > 0  # as written, not canonical
    _check_canonical("node7", fixture)
    as_archive = cli("--root", str(fixture), "inspect", "--json")
    as_source = cli("--root", str(source), "inspect", "--json")
    assert as_archive.exit_code == as_source.exit_code == 0
    assert as_archive.stdout.replace(str(fixture), "ROOT") == as_source.stdout.replace(str(source), "ROOT")


def test_a_repacked_fixture_is_byte_identical(tmp_path):
    name = "vm-offlineCPUs"
    again = pack(fixture_root(name), tmp_path / f"{name}.tar.gz")
    assert again.read_bytes() == fixture_archive(name).read_bytes()


def test_writable_copies_are_private(tmp_path):
    copy = tmp_path / "c"
    root = fixture_copy("dev-1node-x86", copy)
    assert root.parent == copy and (root / "proc/irq").is_dir()
    (root / "proc/irq/38/smp_affinity_list").write_text("0\n")
    assert (fixture_root("dev-1node-x86") / "proc/irq/38/smp_affinity_list").read_text() == "0-1\n"
