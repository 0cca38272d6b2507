"""Turn model dataclasses into JSON-ready values: tuples become lists, dict keys strings, enums values."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return {f.name: to_jsonable(getattr(value, f.name)) for f in fields if not f.name.startswith("_")}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    return value
