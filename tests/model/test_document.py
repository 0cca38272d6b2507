"""model.document: the typed view every document reader reads through (issue 41). Each wrong type or range is
InputError whose one line names the file and the field; absent and null read as empty or the default."""

from __future__ import annotations

import pytest

from numatune.errors import InputError
from numatune.model.document import Doc, shown

DOC = {"reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}], "evictionHard": {"memory.available": 5},
       "flag": True, "ratio": 1.5, "cpus": [0, 1, 2], "names": ["a", "b"], "nothing": None}


def fails(read, message: str) -> None:
    with pytest.raises(InputError) as info:
        read(Doc(DOC, "kubelet.yaml"))
    assert info.value.message == message


def test_a_field_is_named_by_its_path_in_the_file():
    doc = Doc(DOC, "kubelet.yaml")
    assert doc.list("reservedMemory")[0].int("numaNode", 0, 7) == 0
    assert doc.list("reservedMemory")[0].mapping("limits").text("memory") == "1Gi"
    fails(lambda d: d.list("reservedMemory")[0].mapping("numaNode"),
          "kubelet.yaml: reservedMemory[0].numaNode: expected a mapping, got an integer")
    fails(lambda d: d.mapping("evictionHard").str("memory.available"),
          "kubelet.yaml: evictionHard['memory.available']: expected a string, got an integer")
    fails(lambda d: d.list("flag"), "kubelet.yaml: flag: expected a list, got true or false")
    with pytest.raises(InputError, match=r"^f: expected a mapping, got a list$"):
        Doc([1], "f").at("a")


def test_absent_and_null_are_empty_or_the_default_unless_required():
    doc = Doc(DOC, "f")
    assert doc.list("gone") == [] and doc.mapping("nothing").value == {} and doc.int("nothing", default=7) == 7
    assert doc.text("gone") == "" and doc.str("gone") is None and doc.length("gone") == 0
    for read in (lambda d: d.int("nothing", required=True), lambda d: d.str("gone", required=True)):
        with pytest.raises(InputError, match="is missing"):
            read(doc)
    fails(lambda d: d.list("gone", required=True), "kubelet.yaml: gone: expected a list, got null")


@pytest.mark.parametrize(("value", "read", "message"), [
    (True, lambda d: d.int(), "expected an integer, got true or false"),
    (1.0, lambda d: d.int(), "expected an integer, got a number"),
    (10**400, lambda d: d.int(), "an integer of 401 digits is out of range (expected 0 to 4294967296)"),
    (-1, lambda d: d.int(lo=0, hi=3), "-1 is out of range (expected 0 to 3)"),
    (float("nan"), lambda d: d.number(), "nan is out of range (expected 0 to 4.61169e+18)"),
    (float("inf"), lambda d: d.number(), "inf is out of range (expected 0 to 4.61169e+18)"),
    (10**400, lambda d: d.number(hi=1e6), "an integer of 401 digits is out of range (expected 0 to 1e+06)"),
    ("1", lambda d: d.number(), "expected a number, got a string"),
    (1, lambda d: d.bool(), "expected true or false, got an integer"),
    ([1], lambda d: d.scalar(), "expected a string or a number, got a list"),
    (10**45, lambda d: d.text(), "an integer of 46 digits, more than any value numatune reads"),
    ([0, "1"], lambda d: d.ints(), "x[1]: expected an integer, got a string"),
    ([0, None], lambda d: d.ints(), "x[1]: expected an integer, got null"),
    ([0, 70000], lambda d: d.ints(hi=65535), "x[1]: 70000 is out of range (expected 0 to 65535)"),
    (["a", 1], lambda d: d.strs(), "x[1]: expected a string, got an integer"),
    ([{}, None], lambda d: d.records(), "x[1]: expected a mapping, got null"),
    ([1, 2, 3], lambda d: d.list(most=2), "holds 3 items, more than the 2 numatune reads"),
    ("abc", lambda d: d.str(most=2), "a string of 3 characters, more than the 2 numatune reads"),
])
def test_types_and_ranges(value, read, message):
    """Checked before any arithmetic: a 400-digit integer never reaches a float division, NaN never a sum."""
    with pytest.raises(InputError) as info:
        read(Doc(value, "f.json", "x"))
    assert info.value.message.startswith("f.json: ") and info.value.message.endswith(message), info.value.message
    assert "\n" not in info.value.message and len(info.value.message) < 200


def test_values_that_pass_are_returned_as_they_are():
    doc = Doc(DOC, "f")
    assert doc.ints("cpus", 0, 2) is DOC["cpus"] and doc.strs("names") == ["a", "b"]
    assert doc.number("ratio") == 1.5 and doc.number("ratio", 0, 2) == 1.5 and doc.bool("flag") is True
    assert doc.text("flag") == "true" and [k for k, _ in doc.items("evictionHard")] == ["memory.available"]
    assert shown("x" * 100).endswith("'...") and shown(10**400) == "an integer of 401 digits"
