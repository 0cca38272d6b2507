"""`numatune plan-memory` output: the latency-first plan as text and as `numatune.plan-memory/1` JSON."""

from __future__ import annotations

from typing import Any

from numatune.plan.memory import CLASS_NAMES, MemoryPlan
from numatune.render.envelope import envelope

GIB = 1 << 30


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def _rows(plan: MemoryPlan) -> list[dict[str, Any]]:
    unplaced = dict(plan.unplaced)
    rows = []
    for it in plan.items:
        parts = plan.parts_of(it.name)
        rows.append({
            "item": it.name,
            "class": it.cls,
            "class_name": CLASS_NAMES[it.cls],
            "bytes": it.nbytes,
            "dram_bytes": sum(p.nbytes for p in parts if p.tier == "dram"),
            "cxl_bytes": sum(p.nbytes for p in parts if p.tier == "cxl"),
            "unplaced_bytes": unplaced.get(it.name, 0),
            "interleaved": any(p.interleaved for p in parts),
            "nodes": list(plan.nodes_of(it.name)),
            "offset": parts[0].offset if parts else None,
        })
    return rows


def plan_document(plan: MemoryPlan, source: str, model: dict[str, Any]) -> dict[str, Any]:
    return envelope(
        "plan-memory",
        source=source,
        model=model,
        dram={"node": plan.dram_node, "budget_bytes": plan.dram_budget, "budget_source": plan.dram_source,
              "used_bytes": plan.dram_bytes},
        cxl={"nodes": [{"node": n, "share": round(s, 6), "bytes": b}
                       for (n, s), b in zip(plan.cxl_shares, plan.cxl_by_node().values(), strict=True)],
             "budget_bytes": plan.cxl_budget, "budget_source": plan.cxl_source, "used_bytes": plan.cxl_bytes},
        items=_rows(plan),
        fits=plan.fits,
        unplaced_bytes=sum(n for _, n in plan.unplaced),
        reasons=list(plan.reasons),
        warnings=list(plan.warnings),
    )


def render_text(plan: MemoryPlan, source: str, model_line: str) -> str:
    cxl_nodes = ",".join(str(n) for n, _ in plan.cxl_shares) or "-"
    lines = [
        f"Latency-first memory plan ({source}): {model_line}",
        f"local DRAM: node {plan.dram_node}, budget {_gib(plan.dram_budget)} ({plan.dram_source})",
        f"CXL: {(('node ' if len(plan.cxl_shares) == 1 else 'nodes ') + cxl_nodes) if plan.cxl_shares else 'none'}, "
        f"budget {_gib(plan.cxl_budget)} "
        f"({plan.cxl_source})",
        "",
    ]
    head = ("class", "item", "size", f"DRAM node {plan.dram_node}", f"CXL {cxl_nodes}", "does not fit")
    rows = [(f"{r['class']} {r['class_name']}", r["item"], _gib(r["bytes"]), _cell(r["dram_bytes"]),
             _cell(r["cxl_bytes"]), _cell(r["unplaced_bytes"])) for r in _rows(plan)]
    total = sum(i.nbytes for i in plan.items)
    short = sum(n for _, n in plan.unplaced)
    rows.append(("total", "", _gib(total), _cell(plan.dram_bytes), _cell(plan.cxl_bytes), _cell(short)))
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    for r in (head, *rows):
        lines.append("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip())
    if plan.cxl_bytes:
        lines.append("")
        lines.append("CXL stripe: " + ", ".join(f"node {n} {s:.0%} ({_gib(b)})" for (n, s), b in
                                                zip(plan.cxl_shares, plan.cxl_by_node().values(), strict=True)))
    notes = [r for r in plan.reasons if "straddles" in r]
    if notes:
        lines += [""] + notes
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"


def _cell(n: int) -> str:
    return _gib(n) if n else "-"
