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

    from tests.conftest import PROJECT, fixture_root, imports_of

    root = str(fixture_root("256ppc-8n8s4t"))
    code = imports_of(f"import sys; sys.argv = ['numatune', '--root', {root!r}, 'inspect', '--json']\n"
                      "import numatune.entry as e, io, contextlib\n"
                      "with contextlib.redirect_stdout(io.StringIO()):\n"
                      "    try: e.run()\n"
                      "    except SystemExit: pass\n", ("typing", "dataclasses", "click", "rich", "pathlib"))

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT, check=True)
    assert out.stdout.strip() == "[]"


@record
class Wide:
    """More fields than the precompiled constructors cover."""

    f0: int
    f1: int
    f2: int
    f3: int
    f4: int
    f5: int
    f6: int
    f7: int
    f8: int
    f9: int
    f10: int
    f11: int
    f12: int
    f13: int
    f14: int
    f15: int
    f16: int
    f17: int = 17
    f18: str = "x"


def test_record_construction_pickling_and_namedtuple_api():
    import pickle

    p = Point(x=2, tags=("a",))
    assert pickle.loads(pickle.dumps(p)) == p and type(pickle.loads(pickle.dumps(p))) is Point
    assert Point._field_defaults == {"y": 0, "tags": ()} and Point.__match_args__ == ("x", "y", "tags")
    assert Point._make([1, 2, ()]) == Point(1, 2) and isinstance(p, tuple) and tuple(p) == (2, 0, ("a",))
    with pytest.raises(TypeError, match="x"):
        Point()
    with pytest.raises(TypeError):
        Point(1, 2, (), 4)
    with pytest.raises(TypeError, match="Expected 3 arguments"):
        Point._make([1])
    with pytest.raises(ValueError, match="unexpected field names"):
        p._replace(z=1)
    w = Wide(*range(17), f18="y")
    assert (w.f0, w.f16, w.f17, w.f18) == (0, 16, 17, "y") and Wide._fields[-1] == "f18"
    assert w._replace(f3=30).f3 == 30 and pickle.loads(pickle.dumps(w)) == w


def test_record_rejects_fields_a_namedtuple_would_reject():
    with pytest.raises(ValueError, match="_hidden"):
        @record
        class Bad:
            _hidden: int

    with pytest.raises(TypeError, match="without a default"):
        @record
        class Order:
            a: int = 0
            b: int


def test_the_model_docstring_names_every_module_that_uses_another_record_mechanism():
    """model/__init__.py says which modules use typing.NamedTuple or dataclasses instead of @record: a module
    that starts using one (or stops) makes this fail until the docstring says so."""
    import ast
    import re

    import numatune.model
    from tests.conftest import PROJECT

    doc = " ".join(numatune.model.__doc__.split())
    uses = {"NamedTuple": set(), "dataclass": set()}
    for path in sorted((PROJECT / "numatune").rglob("*.py")):
        rel = path.relative_to(PROJECT / "numatune").as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                if any(getattr(b, "id", getattr(b, "attr", None)) == "NamedTuple" for b in node.bases):
                    uses["NamedTuple"].add(rel)
                for d in node.decorator_list:
                    d = d.func if isinstance(d, ast.Call) else d
                    if getattr(d, "id", getattr(d, "attr", None)) == "dataclass":
                        uses["dataclass"].add(rel)
    said = {kind: set(re.findall(r"\(([\w/]+(?:\.py|/))\)", part))
            for kind, part in zip(("NamedTuple", "dataclass"), doc.split("`typing.NamedTuple`")[1].split(
                "`dataclasses.dataclass`"), strict=True)}
    for kind, modules in uses.items():
        expected = {m for m in modules if not m.startswith("placement/")} | (
            {"placement/"} if any(m.startswith("placement/") for m in modules) else set())
        assert said[kind] == expected, kind
