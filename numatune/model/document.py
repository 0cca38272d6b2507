"""Typed access to the documents a user (or a saved root) gives numatune: every value read from one is checked
for its type and range where it is read, and anything else is one line and exit 3 naming the file and the
field, never a Python error deep in a comparison (exit 70).

system.infile.load_document bounds a document's size and nesting before it is parsed; what comes out is plain
JSON/TOML/YAML values of any type. A `Doc` is one of those values with where it is: the file and the path to
it. `Doc(doc, "kubelet.yaml").list("reservedMemory")[0].int("numaNode", 0, MAX_ID)` is the node id, or:

    kubelet.yaml: reservedMemory[0].numaNode: expected an integer, got a list

Absent and null are the same (a key left out, `key:` in YAML, `null` in JSON): a container reads as an empty
one, a scalar as its `default` (None), unless `required`. Integers are bounded by the caller's range before
any arithmetic (a 400-digit JSON integer overflowed a float division); numbers are finite (JSON's 1e400 and
NaN, TOML's inf and nan) and bounded. A leaf of the model: stdlib only, no `typing` at run time (diff and
check start without it), so every layer above may read through it.
"""

from __future__ import annotations

from numatune.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

#: Bounds most readers need: a CPU or NUMA node id (cpulist's), a count of things, a size in bytes or KiB.
MAX_ID = 65535
MAX_COUNT = 1 << 32
MAX_SIZE = 1 << 62  # 4 EiB: no memory, device or region is larger, and a float holds it
_REQUIRED = object()


def describe(value: Any) -> str:
    """What VALUE is, in a document's words: "a list", "a mapping", "a string", "an integer", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"  # YAML's dates and binary values


def shown(value: Any) -> str:
    """A scalar as an error line shows it: short (a 400-digit integer is named by its length, not printed)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if -(10**20) < value < 10**20 else f"an integer of {_digits(value)} digits"
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if isinstance(value, float):
        return repr(value)
    return describe(value)


def _digits(value: int) -> str:
    try:
        return f"{len(str(abs(value))):,}"
    except ValueError:  # past Python's 4,300 digits (no parser hands numatune one)
        return "thousands of"


def _key_path(path: str, key: Any) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    text = str(key)
    if text and all(c.isalnum() or c in "_-/" for c in text):
        return f"{path}.{text}" if path else text
    return f"{path}[{shown(text)}]"


class Doc:
    """One value of a document (`value`), the file it came from (`file`, as the user named it) and its place
    in it (`path`: "" for the whole document, else "reservedMemory[0].numaNode"). A field's path is written
    only when an error names it: a report's thousands of fields are checked at a few dict lookups each."""

    __slots__ = ("value", "file", "_path", "_up", "_key")

    def __init__(self, value: Any, file: str, path: str | None = "", up: Doc | None = None, key: Any = None) -> None:
        self.value, self.file, self._path, self._up, self._key = value, file, path, up, key

    @property
    def path(self) -> str:
        if self._path is None:  # a child's: its parent's path and its key
            self._path = _key_path(self._up.path, self._key)  # type: ignore[union-attr]
        return self._path

    def __repr__(self) -> str:
        return f"Doc({self.file}: {self.path or '<top>'} = {describe(self.value)})"

    @property
    def present(self) -> bool:
        """Whether the value is there (not absent, not null)."""
        return self.value is not None

    def where(self, key: Any = None) -> str:
        """"FILE: PATH" of this value (of its KEY when given), as the error lines name it."""
        path = self.path if key is None else _key_path(self.path, key)
        return f"{self.file}: {path}" if path else self.file

    def fail(self, why: str, key: Any = None) -> NoReturn:
        """InputError (exit 3): "FILE: PATH: WHY"."""
        raise InputError(f"{self.where(key)}: {why}")

    def _expected(self, what: str, value: Any) -> NoReturn:
        self.fail(f"expected {what}, got {describe(value)}")

    # -- navigation --------------------------------------------------------------------------------------------
    def _value(self, key: Any) -> Any:
        """This value (KEY None) or the value at KEY of this mapping (absent: None); no Doc is made."""
        value = self.value
        if key is None or value is None:
            return value
        if type(value) is not dict and not isinstance(value, dict):  # noqa: E721 - the plain dict first: fast
            self._expected("a mapping", value)
        return value.get(key)

    def _node(self, key: Any, value: Any) -> Doc:
        """The Doc of the value just read: this one, or its KEY's."""
        return self if key is None else Doc(value, self.file, None, self, key)

    def at(self, key: Any) -> Doc:
        """The value at KEY of this mapping (absent: a Doc of None); this value must be a mapping (or absent)."""
        return Doc(self._value(key), self.file, None, self, key)

    def mapping(self, key: Any = None, *, required: bool = False) -> Doc:
        """A mapping (absent: an empty one, unless `required`)."""
        value = self._value(key)
        if value is None:
            if required:
                self._node(key, value).fail("is missing")
            return Doc({}, self.file, None, self, key) if key is not None else Doc({}, self.file, self._path,
                                                                                   self._up, self._key)
        if not isinstance(value, dict):
            self._node(key, value)._expected("a mapping", value)
        return self._node(key, value)

    def items(self, key: Any = None, *, most: int | None = None) -> list[tuple[Any, Doc]]:
        """(key, value) of a mapping, in its order; at most `most` of them."""
        node = self.mapping(key)
        value = node.value
        if most is not None and len(value) > most:
            node.fail(f"holds {len(value):,} entries, more than the {most:,} numatune reads")
        return [(k, Doc(v, node.file, None, node, k)) for k, v in value.items()]

    def _list(self, key: Any, most: int | None, required: bool) -> list:
        """The list at KEY (absent and not `required`: an empty one), at most `most` items."""
        value = self._value(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            self._node(key, value)._expected("a list", value)
        if most is not None and len(value) > most:
            self._node(key, value).fail(f"holds {len(value):,} items, more than the {most:,} numatune reads")
        return value

    def list(self, key: Any = None, *, most: int | None = None, required: bool = False) -> list[Doc]:
        """The items of a list (absent: none, unless `required`); at most `most` of them."""
        value = self._list(key, most, required)
        node, file = self._node(key, value), self.file
        return [Doc(v, file, None, node, i) for i, v in enumerate(value)]

    def records(self, key: Any = None, *, most: int | None = None) -> list[Doc]:
        """The items of a list of mappings (absent: none): each item a mapping, null refused."""
        items = self.list(key, most=most)
        for item in items:
            if not isinstance(item.value, dict):
                item._expected("a mapping", item.value)
        return items

    def ints(self, key: Any = None, lo: int = 0, hi: int = MAX_COUNT, *, most: int | None = None,
             required: bool = False) -> list:
        """A list of integers in [lo, hi] (absent: empty, unless `required`): checked in one pass, a view made
        only for the item that fails (a report's CPU lists hold thousands)."""
        value = self._list(key, most, required)
        for i, v in enumerate(value):
            if type(v) is not int or not lo <= v <= hi:  # noqa: E721 - bool is an int subclass, and not one
                item = Doc(v, self.file, None, self._node(key, value), i)
                if v is None:
                    item._expected("an integer", v)
                item.int(lo=lo, hi=hi)
        return value

    def strs(self, key: Any = None, *, most: int | None = None, required: bool = False) -> list:
        """A list of strings (absent: empty, unless `required`), checked in one pass."""
        value = self._list(key, most, required)
        for i, v in enumerate(value):
            if type(v) is not str:  # noqa: E721
                Doc(v, self.file, None, self._node(key, value), i)._expected("a string", v)
        return value

    def length(self, key: Any = None) -> int:
        """How many items a list holds (absent: 0), without a view of each: for a bound checked first."""
        return len(self._list(key, None, False))

    # -- scalars -----------------------------------------------------------------------------------------------
    def _typed(self, key: Any, types: tuple[type, ...], what: str, required: bool) -> Any:
        """The value at KEY: None when absent (InputError when `required`), InputError when it is not one of
        TYPES (true and false only where bool is one of them: YAML's `yes` is no integer)."""
        value = self._value(key)
        if value is None:
            if required:
                self._node(key, value).fail("is missing")
        elif not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            self._node(key, value)._expected(what, value)
        return value

    def int(self, key: Any = None, lo: int = 0, hi: int = MAX_COUNT, *, default: Any = None,
            required: bool = False) -> Any:
        """An integer in [lo, hi] (never true/false, never 1.0); absent: `default`."""
        value = self._typed(key, (int,), "an integer", required)
        if value is None:
            return default
        if not lo <= value <= hi:
            self._node(key, value).fail(f"{shown(value)} is out of range (expected {lo} to {hi})")
        return value

    def number(self, key: Any = None, lo: float = 0.0, hi: float = float(MAX_SIZE), *, default: Any = None,
               required: bool = False) -> Any:
        """A finite number in [lo, hi] as a float (an integer taken too, bounded before it is converted)."""
        value = self._typed(key, (int, float), "a number", required)
        if value is None:
            return default
        if value != value or not lo <= value <= hi:  # NaN compares with nothing; an int is compared exactly
            self._node(key, value).fail(f"{shown(value)} is out of range (expected {lo:g} to {hi:g})")
        return float(value)

    def str(self, key: Any = None, *, default: Any = None, required: bool = False, most: int | None = None) -> Any:
        """A string (absent: `default`), at most `most` characters."""
        value = self._typed(key, (str,), "a string", required)
        if value is None:
            return default
        if most is not None and len(value) > most:
            self._node(key, value).fail(f"a string of {len(value):,} characters, more than the {most:,} numatune "
                                        "reads")
        return value

    def bool(self, key: Any = None, *, default: Any = None, required: bool = False) -> Any:
        """true or false (absent: `default`)."""
        value = self._typed(key, (bool,), "true or false", required)
        return default if value is None else value

    def scalar(self, key: Any = None, *, default: Any = None) -> Any:
        """A string, number or true/false as it is (for a value compared or shown, never computed with);
        a list or mapping is refused. Absent: `default`."""
        value = self._typed(key, (str, int, float, bool), "a string or a number", False)
        return default if value is None else value

    def text(self, key: Any = None, *, default: str = "") -> str:
        """A scalar shown as text ("static", 4 -> "4"); a list or mapping is refused. Absent: `default`."""
        value = self.scalar(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int) and not -(10**40) < value < 10**40:
            self._node(key, value).fail(f"{shown(value)}, more than any value numatune reads")
        return str(value)
