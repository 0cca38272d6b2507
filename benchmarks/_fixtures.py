"""The one place the benchmarks get fixture roots from.

Fixtures are reached through `tests.conftest.fixture_root(name)`, as the tests reach them. When that
gives an archive rather than a directory (lstopo cannot read archives), it is unpacked once into a
temporary directory that lives as long as the benchmark process.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
_unpacked: dict[str, Path] = {}


def fixture(name: str) -> Path:
    """A directory holding fixture NAME's root (sys/, proc/)."""
    if str(PROJECT) not in sys.path:
        sys.path.insert(0, str(PROJECT))
    from tests.conftest import fixture_root

    root = Path(fixture_root(name))
    if root.is_dir():
        return root
    if name not in _unpacked:
        import tarfile

        tmp = Path(tempfile.mkdtemp(prefix=f"numatune-bench-{name}-"))
        atexit.register(shutil.rmtree, tmp, True)
        with tarfile.open(root) as tar:
            tar.extractall(tmp, filter="data")
        entries = [p for p in tmp.iterdir()]
        _unpacked[name] = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
    return _unpacked[name]
