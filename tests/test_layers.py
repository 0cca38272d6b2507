"""The house rule "no import runs up a layer", checked from the source.

LAYERS is the one statement of the layer order (docs/development.md quotes it; a test
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
    ("", "errors", "cpulist", "mempolicy", "numbers", "pieces"),  # the version, exit codes and errors, CPU list
    # syntax, MPOL_* numbers, integers from text, text split into bounded pieces
)

# The pure layers: they get text and records from the command and hand back records and text; nothing of them
# reads the node or a file (not the Host, not a reader, not system's file or syscall API, not open()).
PURE = ("render", "analysis", "plan", "model")
READING = ("readers", "system")
FILE_CALLS = ("open", "read_text", "read_bytes", "write_text", "write_bytes")

# What a cli/ module may import: options only. Its command's use case (reading, planning, rendering, executing)
# is reached through numatune.commands; besides, the model (option choices), errors, CPU lists and the output
# plumbing every command shares (App's Host and consoles, the safe echo, JSON's writer, the -o writer).
CLI_MAY_IMPORT = ("cli", "commands", "model", "errors", "cpulist", "numbers", "")  # numbers: option values (sizes)
CLI_PLUMBING = ("numatune.render.printable", "numatune.render.console", "numatune.render.envelope",
                "numatune.system.host", "numatune.system.outfile")
# The one exception to "no import runs up": the package face re-exports the in-process binding API
# (`numatune.bind()`, issue 36) and `numatune.pinned_host_memory()` (issue 40) lazily, from a module-level
# __getattr__ (PEP 562), so that `import numatune`
# still loads nothing and `numatune.bind` is one attribute away. Only these modules, only from there
# (test_the_face_imports_only_lazily).
FACE_EXPORTS = frozenset({"numatune.placement.binding", "numatune.placement.hostpinned"})


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


def upward(graph: dict[str, dict[str, str]], layers: tuple[tuple[str, ...], ...] = LAYERS,
           face_exports: frozenset[str] = frozenset()) -> list[str]:
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    return [f"{where}: {module} ({area(module) or 'numatune'}) imports {target} ({area(target) or 'numatune'}), "
            f"a higher layer"
            for module, targets in graph.items() for target, where in targets.items()
            if area(target) != area(module) and rank[area(target)] < rank[area(module)]
            and not (module == "numatune" and target in face_exports)]


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


def reads_the_node(graph: dict[str, dict[str, str]], pure: tuple[str, ...] = PURE,
                   reading: tuple[str, ...] = READING) -> list[str]:
    """Imports from a pure layer of the readers or the system (the Host, files, syscalls)."""
    return [f"{where}: {module} ({area(module)}) imports {target}: a pure layer reads nothing"
            for module, targets in graph.items() if area(module) in pure
            for target, where in targets.items() if area(target) in reading]


def _called(call: ast.Call) -> str:
    """The name a call calls: `open(...)` -> open, `path.read_text()` -> read_text."""
    return call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")


def file_calls(package: Path = PACKAGE, pure: tuple[str, ...] = PURE) -> list[str]:
    """Calls of open() or pathlib's read_/write_ methods in a pure layer."""
    root = package.parent
    out = []
    for path in sorted(package.rglob("*.py")):
        if area(module_name(path, root)) not in pure:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        calls = sorted((node.lineno, _called(node)) for node in ast.walk(tree) if isinstance(node, ast.Call))
        out += [f"{path.relative_to(root)}:{line}: {name}() in a pure layer" for line, name in calls
                if name in FILE_CALLS]
    return out


def cli_past_options(graph: dict[str, dict[str, str]]) -> list[str]:
    """Imports from a cli/ module of anything but the options' needs (CLI_MAY_IMPORT, CLI_PLUMBING)."""
    return [f"{where}: {module} imports {target}: the command line layer reaches its use case through "
            f"numatune.commands"
            for module, targets in graph.items() if area(module) == "cli"
            for target, where in targets.items()
            if area(target) not in CLI_MAY_IMPORT and target not in CLI_PLUMBING]


GRAPH = module_graph()
# For the circle checks, without the face's lazy re-exports: they run on first attribute use, never while a
# module is being imported, so they cannot close an import circle (render's envelope reads the version
# from the face, and numatune.bind's report renders through it).
STRICT = {m: ({t: w for t, w in targets.items() if t not in FACE_EXPORTS} if m == "numatune" else targets)
          for m, targets in GRAPH.items()}


def test_every_package_and_top_module_has_a_layer():
    placed = {name for layer in LAYERS for name in layer}
    assert len(placed) == sum(len(layer) for layer in LAYERS), "a name is on two layers"
    assert {area(m) for m in GRAPH} == placed


def test_no_import_runs_up_a_layer():
    assert upward(GRAPH, face_exports=FACE_EXPORTS) == []


def test_the_face_imports_only_lazily():
    """numatune/__init__.py imports numatune modules only inside its module-level __getattr__, and only
    FACE_EXPORTS: `import numatune` runs no import of the package."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert top == [], "numatune/__init__.py imports at module level"
    lazy = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "__getattr__"]
    inside = {t for f in lazy for n in ast.walk(f) if isinstance(n, ast.ImportFrom)
              for t in [f"{n.module}.{a.name}" for a in n.names]}
    assert inside == set(FACE_EXPORTS)
    assert set(GRAPH["numatune"]) == set(FACE_EXPORTS)


def test_a_face_export_elsewhere_is_still_upward():
    """The exception is the face's alone: another module importing the same module up is reported."""
    graph = {"numatune": {"numatune.placement.binding": "numatune/__init__.py:1"},
             "numatune.model.x": {"numatune.placement.binding": "numatune/model/x.py:3"}}
    assert upward(graph, face_exports=FACE_EXPORTS) == [
        "numatune/model/x.py:3: numatune.model.x (model) imports numatune.placement.binding (placement), "
        "a higher layer"]


def test_no_circle_between_packages():
    assert circles(package_edges(STRICT)) == []


def test_no_circle_between_modules():
    assert circles(module_edges(STRICT)) == []


def test_pure_layers_read_nothing():
    """analysis/plan/render/model import no reader and nothing of system (a policy file's text, a sysfs path
    constant, the MPOL_* numbers come from the command or from the model and the bottom layer)."""
    assert reads_the_node(GRAPH) == []
    assert file_calls() == []


def test_cli_modules_are_options_only():
    """Every command reaches its use case through numatune.commands only (its own module there)."""
    assert cli_past_options(GRAPH) == []
    commands = sorted(p.stem for p in (PACKAGE / "commands").glob("*.py") if p.stem != "__init__")
    assert len(commands) >= 12
    for name in commands:
        assert any(t == f"numatune.commands.{name}" for t in GRAPH[f"numatune.cli.{name}"]), name


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


def test_the_house_checks_can_fail(tmp_path):
    """A made-up package with each sideways reach of issue 37: a policy reading its file, a plan importing a
    reader for a constant, a model importing the syscall module, and a cli module planning itself."""
    pkg = tmp_path / "numatune"
    for rel, text in {
        "__init__.py": "",
        "analysis/__init__.py": "",
        "analysis/policy.py": "def load(p):\n    from numatune.system.infile import read_input\n"
                              "    return read_input(p)\n",
        "plan/__init__.py": "",
        "plan/launch.py": "from numatune.readers.nodes import WEIGHT_DIR\n",
        "render/__init__.py": "",
        "render/out.py": "def save(path, text):\n    with open(path, 'w') as f:\n        f.write(text)\n"
                         "    path.write_text(text)\n",
        "model/__init__.py": "",
        "model/launch.py": "from numatune.system.memsys import MPOL_BIND\n",
        "readers/__init__.py": "",
        "readers/nodes.py": "WEIGHT_DIR = 'x'\n",
        "system/__init__.py": "",
        "system/infile.py": "",
        "system/memsys.py": "MPOL_BIND = 2\n",
        "cli/__init__.py": "",
        "cli/launch.py": "from numatune.commands.launch import run\nfrom numatune.plan.launch import WEIGHT_DIR\n"
                         "def f():\n    from numatune.render.printable import echo\n",
        "cli/inspect.py": "from numatune.render.out import save\n",
        "commands/__init__.py": "",
        "commands/launch.py": "run = 1\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    graph = module_graph(pkg)
    assert reads_the_node(graph) == [
        "numatune/analysis/policy.py:2: numatune.analysis.policy (analysis) imports numatune.system.infile: "
        "a pure layer reads nothing",
        "numatune/model/launch.py:1: numatune.model.launch (model) imports numatune.system.memsys: "
        "a pure layer reads nothing",
        "numatune/plan/launch.py:1: numatune.plan.launch (plan) imports numatune.readers.nodes: "
        "a pure layer reads nothing"]
    assert file_calls(pkg) == ["numatune/render/out.py:2: open() in a pure layer",
                               "numatune/render/out.py:4: write_text() in a pure layer"]
    tail = ": the command line layer reaches its use case through numatune.commands"
    assert cli_past_options(graph) == [
        f"numatune/cli/inspect.py:1: numatune.cli.inspect imports numatune.render.out{tail}",
        f"numatune/cli/launch.py:2: numatune.cli.launch imports numatune.plan.launch{tail}"]


def test_readme_states_the_same_order():
    """docs/development.md (the README's map points there) names the layers in this order (one list, quoted once)."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    line = re.search(r"Layers, top to bottom: (.+?)\.\n", text, re.S)
    assert line, "docs/development.md: the 'Layers, top to bottom: ...' sentence is missing"
    said = [[n.strip(" `") for n in group.split(",")] for group in re.sub(r"\s+", " ", line.group(1)).split(" → ")]
    assert said == [[f"numatune/{n}" if n else "numatune/__init__.py" for n in layer] for layer in LAYERS]


@pytest.mark.parametrize("name", ["cli", "commands", "render", "analysis", "plan", "model", "readers"])
def test_the_named_layers_exist(name):
    assert (PACKAGE / name / "__init__.py").exists()
