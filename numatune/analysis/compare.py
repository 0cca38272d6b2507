"""compare's judgement (pure): per-placement statistics against the baseline, warnings, the verdict."""

from __future__ import annotations

from collections.abc import Sequence

from numatune.analysis import stats
from numatune.model.compare import PENALTY, PROOF_SHARE, SPREAD_SHARE, Run

ALPHA = 0.05


def analyse(runs: Sequence[Run], names: Sequence[str], baseline: str, *, higher_is_better: bool,
            expect: dict[str, tuple[int, ...]]) -> dict[str, object]:
    """Everything the report shows, as plain values (the JSON document's body)."""
    by = {n: [r for r in runs if r.placement == n] for n in names}
    base_vals = [r.value for r in by[baseline]]
    base_sum = stats.summarize(base_vals)
    if base_sum.mean == 0:
        from numatune.errors import InputError

        raise InputError(f"the baseline ({baseline}) averaged 0: no ratio can be taken against it",
                         hint="check --metric, or put another placement first")
    rows = []
    warnings: list[str] = []
    for name in names:
        vals = [r.value for r in by[name]]
        s = stats.summarize(vals)
        row: dict[str, object] = {
            "placement": name,
            "expected_nodes": list(expect.get(name, ())),
            "n": s.n, "mean": s.mean, "stdev": s.stdev, "median": s.median, "min": s.min, "max": s.max,
            "values": vals,
            "wall_seconds": [r.seconds for r in by[name]],
        }
        if name != baseline:
            r, sd = stats.ratio(s, base_sum)
            slowdown = (1 / r if r else float("inf")) if higher_is_better else r
            sd_slow = sd / (r * r) if higher_is_better and r else sd
            w = stats.welch(base_vals, vals)
            ci = stats.bootstrap_ratio(base_vals, vals)
            row.update(ratio=r, ratio_stdev=sd, slowdown=slowdown, slowdown_stdev=sd_slow,
                       welch_t=w.t if w else None, welch_df=w.df if w else None, p_value=w.p if w else None,
                       ratio_ci95=list(ci) if ci else None,
                       significant=bool(w and w.p < ALPHA))
        proofs = [r.on_expected for r in by[name]]
        judged = [p for p in proofs if p is not None]
        row["on_expected_nodes"] = min(judged) if judged else None
        row["placement_proof"] = _proof(name, by[name], expect.get(name, ()))
        split: dict[int, int] = {}
        for r in by[name]:
            for node, b in r.by_node.items():
                split[node] = split.get(node, 0) + b
        total = sum(split.values())
        row["achieved_split"] = {str(n): round(b / total, 4) for n, b in sorted(split.items())} if total else {}
        out = stats.outliers(vals)
        if out:
            warnings.append(f"{name}: {len(out)} statistical outlier(s) (runs {', '.join(str(i + 1) for i in out)}): "
                            "another load on the machine, or caching; rerun on a quiet node or with more --runs")
        if stats.slow_first(vals):
            warnings.append(f"{name}: the first run was much slower than the rest: add --warmup 1")
        spreads = [r.spread for r in by[name] if r.spread is not None]
        row["spread"] = min(spreads) if spreads else None
        if spreads and min(spreads) < SPREAD_SHARE:
            warnings.append(f"{name}: pages not spread over node(s) {','.join(map(str, expect.get(name, ())))} in "
                            f"some runs (the least-used node held {min(spreads) * 100:.0f}% of an even share): "
                            "not interleaved as asked")
        elif row["placement_proof"] == "misplaced":
            warnings.append(f"{name}: memory not where asked in some runs (lowest {min(judged) * 100:.0f}% on "
                            f"node(s) {','.join(map(str, expect.get(name, ())))}): its figures do not measure "
                            "this placement")
        rows.append(row)
    if len(names) > 1 and min(len(v) for v in by.values()) < 5:
        warnings.append("fewer than 5 runs per placement: the bootstrap interval comes out too narrow; trust the "
                        "t-test's p, or add --runs")
    return {"baseline": baseline, "placements": rows, "warnings": warnings,
            "verdict": verdict(rows, baseline, higher_is_better)}


PROOF_WORDS = {
    "ok": f"at least {PROOF_SHARE * 100:.0f}% of its own memory on the asked node(s) in every run",
    "misplaced": "memory not where asked in some runs (interleave: or not spread over the asked nodes)",
    "unverified": "under 1 MiB of own memory seen: the command ran too briefly or used too little",
    "not-judged": "the policy names no node set",
}


def _proof(name: str, runs: Sequence[Run], expect: tuple[int, ...]) -> str:
    """ok | misplaced | unverified | not-judged (PROOF_WORDS says what each means)."""
    if not expect:
        return "not-judged"
    judged = [r.on_expected for r in runs if r.on_expected is not None]
    if not judged:
        return "unverified"
    if any(r.spread is not None and r.spread < SPREAD_SHARE for r in runs):
        return "misplaced"  # interleave asked, but (nearly) all pages on fewer nodes than asked
    return "ok" if min(judged) >= PROOF_SHARE else "misplaced"


def verdict(rows: Sequence[dict[str, object]], baseline: str, higher_is_better: bool) -> list[str]:
    """Plain words, by the rule: a penalty above 15% means placement matters; CXL within 15% can take the spill."""
    out = []
    for row in rows:
        name = str(row["placement"])
        if name == baseline:
            continue
        slow = float(row["slowdown"])  # type: ignore[arg-type]
        pct = (slow - 1) * 100
        sig = row["significant"]
        p = row["p_value"]
        ptxt = f"p = {p:.3g}" if p is not None else "too few runs for a test"
        proof = "" if row["placement_proof"] in ("ok", "not-judged") else \
            f" (placement {row['placement_proof']}: treat with care)"
        if not sig:
            out.append(f"{name}: no significant difference from {baseline} ({pct:+.1f}%, {ptxt}){proof}")
        elif name == "remote" or name.startswith("remote"):
            if slow > 1 + PENALTY:
                out.append(f"{name}: {pct:.1f}% slower than {baseline} ({ptxt}): placement matters on this node — "
                           f"bind memory to the GPU's node (numatune launch){proof}")
            else:
                out.append(f"{name}: {pct:+.1f}% against {baseline} ({ptxt}), within the {PENALTY * 100:.0f}% rule: "
                           f"placement matters little for this job{proof}")
        elif name.startswith("cxl"):
            if slow <= 1 + PENALTY:
                out.append(f"{name}: within {max(pct, 0):.1f}% of {baseline} ({ptxt}): CXL can take the spill for "
                           f"this job{proof}")
            else:
                out.append(f"{name}: {pct:.1f}% slower than {baseline} ({ptxt}): keep this job's hot memory off "
                           f"CXL{proof}")
        else:
            word = "slower" if slow > 1 else "faster"
            out.append(f"{name}: {abs(pct):.1f}% {word} than {baseline} ({ptxt}){proof}")
    return out
