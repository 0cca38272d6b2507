"""Fixture trees stay replayable from a fresh clone: provenance, no escaping links, no empty directories."""

from __future__ import annotations

import os

import pytest

from tests.conftest import FIXTURES, tree_fixtures


@pytest.mark.parametrize("name", tree_fixtures())
def test_fixture_is_documented(name):
    readme = (FIXTURES / "README.md").read_text()
    assert name in readme or (FIXTURES / name / "PROVENANCE.md").is_file(), f"{name}: no provenance"


@pytest.mark.parametrize("name", tree_fixtures())
def test_no_empty_directories_and_no_escaping_links(name):
    """git drops empty directories (an IRQ's action dir, net/<ifname>), so each holds a `.keep`."""
    root = FIXTURES / name
    for dirpath, dirnames, filenames in os.walk(root):
        assert dirnames or filenames, f"{dirpath} is empty: add a .keep file"
        for entry in dirnames + filenames:
            path = os.path.join(dirpath, entry)
            if os.path.islink(path):
                target = os.readlink(path)
                assert not target.startswith("/"), path
                resolved = os.path.normpath(os.path.join(dirpath, target))
                assert resolved.startswith(str(root)), f"{path} -> {target} leaves the tree"
