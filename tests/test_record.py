from __future__ import annotations

import pytest

from numatune.model._record import record


@record
class Point:
    """A test record."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = ()

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)

    def __post_init__(self) -> None:
        if self.x < 0:
            raise ValueError("x must be >= 0")


def test_record_behaves_like_an_immutable_record():
    p = Point(3, y=-4)
    assert (p.x, p.y, p.tags, p.norm1) == (3, -4, (), 7)
    assert p._replace(y=1) == Point(3, 1) and hash(Point(1)) == hash(Point(1))
    assert Point._fields == ("x", "y", "tags") and p._asdict() == {"x": 3, "y": -4, "tags": ()}
    assert repr(p) == "Point(x=3, y=-4, tags=())" and Point.__doc__ == "A test record."
    assert Point.__annotations__["x"] == "int"
    with pytest.raises(AttributeError):
        p.x = 5
    with pytest.raises(ValueError, match="x must be"):
        Point(-1)


def test_the_json_paths_do_not_import_typing_dataclasses_or_click():
    import subprocess
    import sys

    from tests.conftest import PROJECT, fixture_root

    root = str(fixture_root("256ppc-8n8s4t"))
    code = (f"import sys; sys.argv = ['numatune', '--root', {root!r}, 'inspect', '--json']\n"
            "import numatune.entry as e, io, contextlib\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: e.run()\n"
            "    except SystemExit: pass\n"
            "print(sorted(m for m in ('typing', 'dataclasses', 'click', 'rich', 'pathlib') if m in sys.modules))")

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT, check=True)
    assert out.stdout.strip() == "[]"
