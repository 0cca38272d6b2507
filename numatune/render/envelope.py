"""The JSON envelope every report shares, and the one writer of JSON text.

Every document starts with `schema` (its name and version, from SCHEMAS: the one list of them,
each documented in docs/json-schemas.md) and `numatune_version`. Indented documents are written
without importing json (`_indented`, byte-identical to json.dumps(indent=2)); only documents with
row lists (irq) import it, for its C encoder (see `dumps`).
"""

from __future__ import annotations

from numatune import __version__
from numatune.model.schemas import SCHEMAS  # the one list; here for the writers that name it

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    from typing import Any


def envelope(kind: str, **fields: Any) -> dict[str, Any]:
    """A report document: the schema and numatune's version, then the fields in the order given."""
    return {"schema": SCHEMAS[kind], "numatune_version": __version__, **fields}


def is_document(doc: Any, kind: str) -> bool:
    return isinstance(doc, dict) and doc.get("schema") == SCHEMAS[kind]


def dumps(doc: dict[str, Any], row_keys: tuple[str, ...] = ()) -> str:
    """Indented JSON (no trailing newline). Lists under `row_keys` are written one element per line through
    the C encoder: json's indent mode is pure Python and, for the thousands of IRQ rows of a big node,
    costs more than parsing /proc/interrupts."""
    if not row_keys:  # inspect, check, diff, audit: no `json` import (it loads `re`, `enum`, `collections`)
        return _indented(doc)
    import json

    rows: list[str] = []

    def mark(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ([_slot(rows, json.dumps(x)) for x in v] if k in row_keys and isinstance(v, list)
                        else mark(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    text = json.dumps(mark(doc) if row_keys else doc, indent=2)
    if not rows:
        return text
    parts = text.split('"\\u0000row:')
    out = [parts[0]]
    for part in parts[1:]:
        index, _, rest = part.partition('"')
        out.append(rows[int(index)] + rest)
    return "".join(out)


def _slot(rows: list[str], encoded: str) -> str:
    rows.append(encoded)
    return f"\x00row:{len(rows) - 1}"


CHUNK = 1 << 14
ONLY_INT, ONLY_STR = {int}, {str}  # the types of a row written in one join (bool is not int here: `type`)


def _indented(doc: Any) -> str:
    """`json.dumps(doc, indent=2)`, byte for byte (tested), without importing json: its pure-Python indent
    mode written out, on the C string escaper json itself uses."""
    try:
        from _json import encode_basestring_ascii as quote
    except ImportError:  # an interpreter without the C accelerator
        from json.encoder import encode_basestring_ascii as quote
    out: list[str] = []
    put = out.append
    done: list[str] = []  # `out` joined every CHUNK pieces: a million small strings held 4x the text (352 MB
    # for the 19 MB report of a 1,000-node tree)

    def scalar(value: Any) -> str:
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, int):
            return int.__repr__(value)
        if isinstance(value, float):
            if value != value:
                return "NaN"
            if value in (float("inf"), float("-inf")):
                return "Infinity" if value > 0 else "-Infinity"
            return float.__repr__(value)
        raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")

    def write(value: Any, level: int) -> None:
        if isinstance(value, str):
            put(quote(value))
        elif isinstance(value, dict):
            if not value:
                put("{}")
                return
            inner = "\n" + "  " * (level + 1)
            if {*map(type, value.values())} == ONLY_INT and {*map(type, value)} == ONLY_STR:
                # a row of numbers by name (a node's distances: 1,000 nodes are a million of them), one join
                put("{" + inner + ("," + inner).join([quote(k) + ": " + int.__repr__(v) for k, v in value.items()])
                    + "\n" + "  " * level + "}")
                return
            sep = "{" + inner
            for key, item in value.items():
                put(sep)
                sep = "," + inner if sep[0] == "{" else sep
                put(quote(key if isinstance(key, str) else scalar(key)))
                put(": ")
                write(item, level + 1)
            put("\n" + "  " * level + "}")
            if len(out) > CHUNK:
                done.append("".join(out))
                out.clear()
        elif isinstance(value, (list, tuple)):
            if not value:
                put("[]")
                return
            inner = "\n" + "  " * (level + 1)
            if {*map(type, value)} == ONLY_INT:  # a list of ids (a node's CPUs), one join
                put("[" + inner + ("," + inner).join(map(int.__repr__, value)) + "\n" + "  " * level + "]")
                return
            sep = "[" + inner
            for item in value:
                put(sep)
                sep = "," + inner if sep[0] == "[" else sep
                write(item, level + 1)
            put("\n" + "  " * level + "]")
            if len(out) > CHUNK:
                done.append("".join(out))
                out.clear()
        else:
            put(scalar(value))

    write(doc, 0)
    return "".join(done + out)
