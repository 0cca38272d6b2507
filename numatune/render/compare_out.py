"""compare output: text (hyperfine-like), Markdown for tickets, and the `numatune.compare/1` document."""

from __future__ import annotations

from numatune.analysis.compare import PROOF_WORDS
from numatune.render.envelope import envelope


def _unit(doc: dict) -> str:
    return doc["metric"]["unit"]


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _split(row: dict) -> str:
    split = row["achieved_split"]
    if not split:
        return "no own memory seen"
    return ", ".join(f"node {n} {v * 100:.0f}%" for n, v in split.items())


def render_text(doc: dict) -> str:
    unit = _unit(doc)
    out = [f"numatune compare: {' '.join(doc['command'])}",
           f"  {doc['runs']} run(s) per placement after {doc['warmup']} warm-up, interleaved in shuffled order; "
           f"compared: {doc['metric']['what']} ({'higher' if doc['metric']['higher_is_better'] else 'lower'} is "
           "better)", ""]
    if doc.get("skipped"):
        out += ["Not run here:"] + [f"  {s}" for s in doc["skipped"]] + [""]
    for row in doc["placements"]:
        out.append(f"{row['placement']}: {row['plan']}")
        out.append(f"  {row['mean']:.4g} {unit} ± {row['stdev']:.3g}   median {row['median']:.4g}   "
                   f"range {row['min']:.4g} … {row['max']:.4g}   (n = {row['n']})")
        if "slowdown" in row:
            ci = row["ratio_ci95"]
            ci_txt = f", 95% bootstrap {ci[0]:.3f} … {ci[1]:.3f}" if ci else ""
            p = row["p_value"]
            out.append(f"  {row['ratio']:.3f} ± {row['ratio_stdev']:.3f} × {doc['baseline']}{ci_txt}; Welch t-test "
                       + (f"p = {p:.3g}" if p is not None else "n/a"))
        out.append(f"  pages: {_split(row)} — {row['placement_proof']}: {PROOF_WORDS[row['placement_proof']]}")
        out.append("")
    if doc["warnings"]:
        out.append("Warnings:")
        out += [f"  {w}" for w in doc["warnings"]]
        out.append("")
    out.append("Verdict:")
    out += [f"  {v}" for v in doc["verdict"]] or ["  one placement: nothing to compare"]
    return "\n".join(out) + "\n"


def render_markdown(doc: dict) -> str:
    unit = _unit(doc)
    out = [f"**numatune compare** `{' '.join(doc['command'])}` — {doc['runs']} interleaved run(s) per placement, "
           f"{doc['warmup']} warm-up; {doc['metric']['what']}", "",
           f"| placement | mean ± σ ({unit}) | median | min … max | vs {doc['baseline']} | p (Welch) | pages |",
           "|---|---|---|---|---|---|---|"]
    for row in doc["placements"]:
        rel = f"{row['ratio']:.3f} ± {row['ratio_stdev']:.3f}" if "ratio" in row else "1"
        p = f"{row['p_value']:.3g}" if row.get("p_value") is not None else "—"
        proof = row["placement_proof"]
        out.append(f"| {row['placement']} | {_fmt(row['mean'])} ± {row['stdev']:.3g} | {_fmt(row['median'])} | "
                   f"{_fmt(row['min'])} … {_fmt(row['max'])} | {rel} | {p} | {_split(row)} ({proof}) |")
    out += ["", "**Verdict**", ""] + ([f"- {v}" for v in doc["verdict"]] or ["- one placement: nothing to compare"])
    if doc.get("skipped"):
        out += ["", "**Not run here**", ""] + [f"- {s}" for s in doc["skipped"]]
    if doc["warnings"]:
        out += ["", "**Warnings**", ""] + [f"- {w}" for w in doc["warnings"]]
    return "\n".join(out) + "\n"


def compare_document(host: str, command: list[str], runs: int, warmup: int, metric: dict, analysis: dict,
                     plans: dict[str, str], seed: int | None, skipped: list[str] | None = None) -> dict:
    rows = []
    for row in analysis["placements"]:
        r = {k: v for k, v in row.items()}
        r["plan"] = plans[row["placement"]]
        rows.append(r)
    return {**envelope("compare"), "host": host, "command": command, "runs": runs, "warmup": warmup, "seed": seed,
            "metric": metric, "baseline": analysis["baseline"], "placements": rows,
            "skipped": list(skipped or []), "warnings": analysis["warnings"], "verdict": analysis["verdict"]}
