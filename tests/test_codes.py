"""The finding-code registry: one declaration per code, documented, and every mention of a code names one."""

from __future__ import annotations

import re

import pytest

from numatune.analysis.codes import GROUPS, all_codes
from numatune.model.findings import REGISTRY, Severity, register
from numatune.render.codes_man import codes_man_page
from tests.conftest import PROJECT

CODES = {c.code: c for c in all_codes()}
CODE = re.compile(r"\bNT(\d{3})\b")
RANGE = re.compile(r"\bNT(\d{3})\s*(?:-|–|\\-|to)\s*NT(\d{3})\b")


def test_codes_are_well_formed_and_documented():
    assert len(CODES) >= 45
    for c in CODES.values():
        assert re.fullmatch(r"NT\d{3}", c.code)
        assert c.group in GROUPS
        assert isinstance(c.severity, Severity)
        assert c.title and not c.title.endswith("."), c.code
        assert len(c.doc) > len(c.title), c.code
        assert not c.supersedes or c.supersedes in CODES, c.code
    # the hundreds digit names the family; in the 5xx, NT501-NT511 are probe's, NT520-NT549 the scheduler checks
    # (NT540-NT549: Kubernetes DRA ResourceSlices)
    family = {"0": "topology", "2": "irq", "3": "policy", "4": "audit"}
    fives = {"0": "probe", "1": "probe", "2": "scheduler", "3": "scheduler", "4": "scheduler"}
    assert all((family[c.code[2]] if c.code[2] != "5" else fives[c.code[3]]) == c.group for c in CODES.values())


def test_a_code_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="NT001 is registered twice"):
        register("NT001", Severity.INFO, "topology", "again", "a second meaning")
    assert REGISTRY["NT001"].title == "a device reports numa_node -1"


def test_man_page_is_generated_from_the_registry():
    page = (PROJECT / "man" / "numatune-codes.7").read_text()
    assert page == codes_man_page(), "regenerate: python -m numatune.render.codes_man > man/numatune-codes.7"
    assert set(re.findall(r"^\.B (NT\d{3})$", page, re.M)) == set(CODES)


def _mentioned(text: str) -> set[str]:
    out = {f"NT{n}" for n in CODE.findall(text)}
    for lo, hi in RANGE.findall(text):  # "NT201-NT207": both ends and every code between must exist
        inside = {c for c in CODES if lo <= c[2:] <= hi}
        assert f"NT{lo}" in CODES and f"NT{hi}" in CODES, (lo, hi)
        assert inside, (lo, hi)
    return out


DOCS = ["README.md", "CHANGELOG.md", *(f"docs/{p.name}" for p in (PROJECT / "docs").glob("*.md")),
        *(f"man/{p.name}" for p in (PROJECT / "man").iterdir()),
        *(f"examples/{p.name}" for p in (PROJECT / "examples").glob("*.toml")), "tests/cli/check_expected.toml"]


@pytest.mark.parametrize("path", DOCS)
def test_every_code_a_document_names_is_registered(path):
    assert _mentioned((PROJECT / path).read_text()) <= set(CODES)


def test_every_code_in_the_source_is_registered():
    for path in (PROJECT / "numatune").rglob("*.py"):
        assert _mentioned(path.read_text()) <= set(CODES), path


def test_check_man_page_names_each_policy_key_with_its_code():
    from numatune.analysis.policy import EXPECTATIONS

    page = (PROJECT / "man" / "numatune-check.1").read_text()
    for e in EXPECTATIONS:
        leaf = e.key.split(".", 1)[1]
        at = page.find(f"\\fB{leaf}\\fR")
        assert at > 0, e.key
        assert CODE.search(page, at).group(0) == e.code.code, e.key


def test_a_superseding_finding_replaces_the_other_on_the_same_subject():
    from numatune.analysis.check import supersede
    from numatune.model.check import CheckResult

    nic, other = "0000:18:00.0", "0000:3b:00.0"
    irq = CheckResult("irq.NT203", "irq", "t", (REGISTRY["NT203"]("m", "f", nic), REGISTRY["NT203"]("m", "f", other)))
    policy = CheckResult("policy.irq.rank_cpus", "policy", "t", (REGISTRY["NT340"]("m", "f", nic),))
    got = supersede([irq, policy])
    assert [f.subject for f in got[0].findings] == [other]  # NT203 kept only where NT340 does not speak
    assert got[1] == policy
    assert supersede([irq]) == [irq]


def test_the_registry_is_the_only_collection_of_codes():
    """No module keeps its own dict, list or set of Code objects beside REGISTRY (probe's CODES dict was one),
    and nothing lists the rule modules by name (all_codes imports the whole analysis package)."""
    import ast
    import sys

    from numatune.model.findings import Code

    for name, module in list(sys.modules.items()):
        if not name.startswith("numatune.") or module is None:
            continue
        for attr, value in vars(module).items():
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple, set,
                                                                                                frozenset)) else ()
            if value is not REGISTRY and any(isinstance(v, Code) for v in items):
                raise AssertionError(f"{name}.{attr} is a second collection of finding codes")
    for path in (PROJECT / "numatune").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.startswith("numatune.analysis."), f"{path}: names a rule module"


def test_a_new_rule_module_is_found_without_a_list():
    """all_codes finds codes in any module of numatune.analysis, one it has never heard of too."""
    import sys

    new = PROJECT / "numatune" / "analysis" / "zz_test_only_rules.py"
    new.write_text('from numatune.model.findings import Severity, register\n'
                   'NT099 = register("NT099", Severity.INFO, "topology", "a test-only code",\n'
                   '                 "Only while a test runs.")\n')
    try:
        assert "NT099" in {c.code for c in all_codes()}
    finally:
        new.unlink()
        REGISTRY.pop("NT099", None)
        sys.modules.pop("numatune.analysis.zz_test_only_rules", None)


def _rule_modules() -> list:
    import importlib
    import pkgutil

    import numatune.analysis as pkg
    from numatune.analysis.codes import module_codes

    mods = [importlib.import_module(f"numatune.analysis.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    return [m for m in mods if module_codes(m)]


@pytest.mark.parametrize("path", [*DOCS, *(str(p.relative_to(PROJECT)) for p in (PROJECT / "numatune").rglob("*.py"))])
def test_a_range_that_names_a_rule_modules_codes_ends_where_its_codes_do(path):
    """A document or docstring that names a rule module's codes as a range ("NT540-NT544") names them all: the
    range that starts at the module's first code ends at its last, as analysis.codes.code_range derives it
    (check --help said NT540-NT544 where the DRA codes run further). CHANGELOG.md tells history: left out."""
    from numatune.analysis.codes import code_range, module_codes

    if path == "CHANGELOG.md":
        return
    text = (PROJECT / path).read_text()
    for module in _rule_modules():
        first, want = module_codes(module)[0].code, code_range(module)
        for lo, hi in RANGE.findall(text):
            if f"NT{lo}" == first:
                assert f"NT{lo}-NT{hi}" == want, f"{path}: NT{lo}-NT{hi}, but {module.__name__} registers {want}"
