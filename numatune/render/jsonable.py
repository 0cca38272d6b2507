"""Model records (NamedTuples, dataclasses) -> JSON-ready values: lists, string keys, enum values."""

from __future__ import annotations

from _collections_abc import Mapping  # collections.abc itself: its import loads `collections` (~5% of a check)

TYPE_CHECKING = False  # typing costs ~15 ms to import; the JSON paths start without it
if TYPE_CHECKING:
    from typing import Any


def to_jsonable(value: Any) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a model record (NamedTuple)
        return {name: to_jsonable(getattr(value, name)) for name in value._fields}
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        import dataclasses  # only the few dataclass results (analysis) need it; keep it off the fast path

        fields = dataclasses.fields(value)
        return {f.name: to_jsonable(getattr(value, f.name)) for f in fields if not f.name.startswith("_")}
    if isinstance(value, str):  # Severity and other str subclasses: the plain value
        return str.__str__(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    return value
