"""The JSON envelope every report shares, and the one writer of JSON text.

Every document starts with `schema` (its name and version, from SCHEMAS: the one list of them,
each documented in docs/json-schemas.md) and `numatune_version`. No json import until text is
written, and json's pure-Python indent mode only where it is cheap (see `dumps`).
"""

from __future__ import annotations

from numatune import __version__

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    from typing import Any

# document kind -> schema name/version. Bump the version on any incompatible change.
SCHEMAS = {
    "inspect": "numatune.inspect/2",
    "audit": "numatune.audit/1",
    "launch": "numatune.launch/1",
    "irq": "numatune.irq/1",
    "irq-plan": "numatune.irq-plan/1",
    "irq-apply": "numatune.irq-apply/1",
    "irq-state": "numatune.irq-state/1",
    "check": "numatune.check/1",
    "diff": "numatune.diff/1",
    "fleet": "numatune.fleet/1",
}


def envelope(kind: str, **fields: Any) -> dict[str, Any]:
    """A report document: the schema and numatune's version, then the fields in the order given."""
    return {"schema": SCHEMAS[kind], "numatune_version": __version__, **fields}


def is_document(doc: Any, kind: str) -> bool:
    return isinstance(doc, dict) and doc.get("schema") == SCHEMAS[kind]


def dumps(doc: dict[str, Any], row_keys: tuple[str, ...] = ()) -> str:
    """Indented JSON (no trailing newline). Lists under `row_keys` are written one element per line through
    the C encoder: json's indent mode is pure Python and, for the thousands of IRQ rows of a big node,
    costs more than parsing /proc/interrupts."""
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
