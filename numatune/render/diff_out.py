"""`numatune diff` as text and as the `numatune.diff/1` JSON document."""

from __future__ import annotations

from numatune.analysis.diff import CATEGORIES, Difference
from numatune.render.envelope import envelope

TYPE_CHECKING = False  # typing costs ~8 ms to import; diff starts without it
if TYPE_CHECKING:
    from typing import Any


def _v(value: str | None) -> str:
    return "(absent)" if value is None else value


def render_diff_text(a: str, b: str, diffs: list[Difference]) -> str:
    lines = [f"--- {a}", f"+++ {b}"]
    if not diffs:
        lines.append("no differences")
        return "\n".join(lines) + "\n"
    width = max(len(d.key) for d in diffs)
    category = None
    order = {c: i for i, c in enumerate(CATEGORIES)}
    for d in sorted(diffs, key=lambda d: order.get(d.category, len(order))):
        if d.category != category:
            category = d.category
            lines.append(f"[{category}]")
        lines.append(f"  {d.key:<{width}}  {_v(d.a)}  ->  {_v(d.b)}")
    lines.append(f"{len(diffs)} difference{'s' if len(diffs) != 1 else ''}")
    return "\n".join(lines) + "\n"


def diff_document(
    a: tuple[str, str], b: tuple[str, str], diffs: list[Difference], ignore: tuple[str, ...] = ()
) -> dict[str, Any]:
    return envelope(
        "diff",
        a={"source": a[0], "kind": a[1]},
        b={"source": b[0], "kind": b[1]},
        ignored=list(ignore),
        equal=not diffs,
        differences=[{"key": d.key, "category": d.category, "a": d.a, "b": d.b} for d in diffs],
    )
