"""The house rule "no import runs up a layer", checked from the source.

LAYERS is the one statement of the layer order (README's Development section quotes it; a test
below keeps the two equal). Every import of every module under numatune/ counts, the ones inside
function bodies too (a lazy import is still a dependency): an import may go to its own package or
to a lower layer, never up; and neither packages nor modules may import each other in a circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "numatune"

# Top to bottom. A name is a sub-package or a top-level module of numatune; "" is the package's face
# (numatune/__init__.py: the version). Packages on one line are one layer and may not import each other
# in a circle.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__", "entry"),  # the process entry: the click-free fast path, else the CLI
    ("cli",),  # options only
    ("commands",),  # one module per command: its use case
    ("measure",),  # probe's timing loops (run bound through live)
    ("placement",),  # the in-process placement library
    ("live",),  # live execution: binding, IRQ writes, live-only enrichment
    ("render",),  # text, JSON, HTML, Prometheus, JUnit
    ("analysis",),  # findings and judgements (pure)
    ("plan",),  # launch, IRQ, memory and scheduler plans (pure)
    ("readers",),  # Host -> model
    ("model",),  # immutable records, the types the layers above exchange
    ("system",),  # the Host (files under a root) and the memory-policy syscalls
    ("", "errors", "cpulist"),  # the version, exit codes and errors, CPU list syntax
)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """Every numatune module `path` imports, anywhere in it, with the line."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from numatune.pkg import module` imports numatune.pkg.module; other names come from the face
            modules = [f"{target}.{alias.name}" for alias in node.names if _is_module(root, f"{target}.{alias.name}")]
            out += [(m, node.lineno) for m in modules]
            if len(modules) < len(node.names):
                out.append((target, node.lineno))
    return [(t, line) for t, line in out if t == "numatune" or t.startswith("numatune.")]


def _is_module(root: Path, dotted: str) -> bool:
    path = root / dotted.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def module_graph(package: Path = PACKAGE) -> dict[str, dict[str, str]]:
    """module -> {imported module: "path:line"} for every .py under `package`."""
    root = package.parent
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(package.rglob("*.py")):
        graph[module_name(path, root)] = {target: f"{path.relative_to(root)}:{line}"
                                          for target, line in imports(path, root)}
    return graph


def upward(graph: dict[str, dict[str, str]], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    return [f"{where}: {module} ({area(module) or 'numatune'}) imports {target} ({area(target) or 'numatune'}), "
            f"a higher layer"
            for module, targets in graph.items() for target, where in targets.items()
            if area(target) != area(module) and rank[area(target)] < rank[area(module)]]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package_edges(graph: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            if area(target) != area(module):
                edges.setdefault(area(module), set()).add(area(target))
    return edges


def module_edges(graph: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    """Between modules; importing a package's face (`from numatune.readers import x`) is an edge to it."""
    return {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}


GRAPH = module_graph()


def test_every_package_and_top_module_has_a_layer():
    placed = {name for layer in LAYERS for name in layer}
    assert len(placed) == sum(len(layer) for layer in LAYERS), "a name is on two layers"
    assert {area(m) for m in GRAPH} == placed


def test_no_import_runs_up_a_layer():
    assert upward(GRAPH) == []


def test_no_circle_between_packages():
    assert circles(package_edges(GRAPH)) == []


def test_no_circle_between_modules():
    assert circles(module_edges(GRAPH)) == []


def test_the_checks_can_fail(tmp_path):
    """The same functions, on a made-up package with one import up and one circle, report both."""
    pkg = tmp_path / "numatune"
    for rel, text in {
        "__init__.py": "",
        "model/__init__.py": "",
        "model/a.py": "def f():\n    from numatune.render.b import x\n",  # up, inside a function
        "render/__init__.py": "",
        "render/b.py": "from numatune.model import a\nx = 1\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    graph = module_graph(pkg)
    assert upward(graph, (("render",), ("model",), ("",))) == [
        "numatune/model/a.py:2: numatune.model.a (model) imports numatune.render.b (render), a higher layer"]
    assert circles(package_edges(graph)) == [["model", "render"]]
    assert circles(module_edges(graph)) == [["numatune.model.a", "numatune.render.b"]]


def test_readme_states_the_same_order():
    """README's Development section names the layers in this order (one list, quoted once)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    line = re.search(r"Layers, top to bottom: (.+?)\.\n", text, re.S)
    assert line, "README: the 'Layers, top to bottom: ...' sentence is missing"
    said = [[n.strip(" `") for n in group.split(",")] for group in re.sub(r"\s+", " ", line.group(1)).split(" → ")]
    assert said == [[f"numatune/{n}" if n else "numatune/__init__.py" for n in layer] for layer in LAYERS]


@pytest.mark.parametrize("name", ["cli", "commands", "render", "analysis", "plan", "model", "readers"])
def test_the_named_layers_exist(name):
    assert (PACKAGE / name / "__init__.py").exists()
