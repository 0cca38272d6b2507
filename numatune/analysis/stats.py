"""Benchmark statistics for `numatune compare` (and probe's samples): stdlib only, deterministic.

Summaries as hyperfine reports them (mean ± σ, median, min…max), ratios with propagated σ, Welch's
unequal-variance t-test (p from the regularized incomplete beta function) and a seeded bootstrap
interval for the ratio of means, plus the outlier and slow-first-run warnings.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Sequence
from typing import NamedTuple


class Summary(NamedTuple):
    n: int
    mean: float
    stdev: float  # sample standard deviation (n - 1); 0 for one sample
    median: float
    min: float
    max: float


class Welch(NamedTuple):
    t: float
    df: float
    p: float  # two-sided


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if not n:
        raise ValueError("median of no samples")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def summarize(xs: Sequence[float]) -> Summary:
    n = len(xs)
    if not n:
        raise ValueError("no samples")
    mean = math.fsum(xs) / n
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return Summary(n, mean, math.sqrt(var), median(xs), min(xs), max(xs))


def ratio(num: Summary, den: Summary) -> tuple[float, float]:
    """(num.mean / den.mean, σ by first-order propagation of both relative σ)."""
    r = num.mean / den.mean
    rel = math.hypot(num.stdev / num.mean if num.mean else 0.0, den.stdev / den.mean if den.mean else 0.0)
    return r, abs(r) * rel


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom (df may be fractional)."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def welch(a: Sequence[float], b: Sequence[float]) -> Welch | None:
    """Welch's t-test of mean(b) - mean(a); None when either side has fewer than two samples."""
    if len(a) < 2 or len(b) < 2:
        return None
    sa, sb = summarize(a), summarize(b)
    va, vb = sa.stdev ** 2 / sa.n, sb.stdev ** 2 / sb.n
    se2 = va + vb
    diff = sb.mean - sa.mean
    if se2 == 0.0:
        return Welch(0.0 if diff == 0 else math.copysign(math.inf, diff), float(sa.n + sb.n - 2),
                     1.0 if diff == 0 else 0.0)
    t = diff / math.sqrt(se2)
    df = se2 ** 2 / (va ** 2 / (sa.n - 1) + vb ** 2 / (sb.n - 1))
    return Welch(t, df, t_two_sided_p(t, df))


def bootstrap_ratio(a: Sequence[float], b: Sequence[float], *, iterations: int = 2000, level: float = 0.95,
                    seed: int = 0) -> tuple[float, float] | None:
    """Percentile interval of mean(b) / mean(a) by resampling both (seeded: the same samples, the same
    interval); None below two samples each."""
    if len(a) < 2 or len(b) < 2:
        return None
    rng = random.Random(seed)
    na, nb = len(a), len(b)
    out = []
    for _ in range(iterations):
        ma = math.fsum(a[rng.randrange(na)] for _ in range(na)) / na
        mb = math.fsum(b[rng.randrange(nb)] for _ in range(nb)) / nb
        if ma:
            out.append(mb / ma)
    if not out:
        return None
    out.sort()
    lo = out[int((1.0 - level) / 2 * (len(out) - 1))]
    hi = out[int(math.ceil((1.0 + level) / 2 * (len(out) - 1)))]
    return lo, hi


OUTLIER_MAD = 1.4826 * 10.0  # hyperfine's bar: 1.4826 turns the MAD into a standard deviation; ten of them


def outliers(xs: Sequence[float], threshold: float = OUTLIER_MAD) -> list[int]:
    """Indices whose modified z-score |x − median| / MAD exceeds `threshold`: hyperfine's rule (its
    outlier_detection module: the score has no 0.6745 factor, the bar is 1.4826 × 10, and a MAD of 0 is
    taken as the smallest positive float, so with most runs equal every differing run is an outlier)."""
    if not xs:
        return []
    med = median(xs)
    mad = median([abs(x - med) for x in xs]) or sys.float_info.epsilon
    return [i for i, x in enumerate(xs) if abs(x - med) / mad > threshold]


def slow_first(xs: Sequence[float], factor: float = 1.5) -> bool:
    """The first run took more than `factor` × the median of the rest (a cold cache, page faults): warm up."""
    return len(xs) >= 3 and xs[0] > factor * median(xs[1:])
