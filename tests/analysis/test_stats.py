"""Benchmark statistics against hand computations and closed forms of Student's t."""

from __future__ import annotations

import math

import pytest

from numatune.analysis import stats

A = [1.0, 2.0, 3.0, 4.0, 5.0]
B = [2.0, 4.0, 6.0, 8.0, 10.0]


def test_summary_by_hand():
    s = stats.summarize(A)
    # mean 3, sample variance (4+1+0+1+4)/4 = 2.5
    assert s == stats.Summary(5, 3.0, math.sqrt(2.5), 3.0, 1.0, 5.0)
    assert stats.summarize([7.0]).stdev == 0.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    with pytest.raises(ValueError):
        stats.summarize([])


def test_ratio_propagates_relative_sigma():
    r, sd = stats.ratio(stats.summarize(B), stats.summarize(A))
    # 6/3 = 2; relative σ: sqrt(10)/6 and sqrt(2.5)/3, both 0.527046 → 2 * 0.527046 * sqrt(2)
    assert r == 2.0
    assert sd == pytest.approx(2 * math.hypot(math.sqrt(10) / 6, math.sqrt(2.5) / 3))
    assert sd == pytest.approx(1.490712, rel=1e-6)


def test_welch_by_hand():
    w = stats.welch(A, B)
    # se² = 2.5/5 + 10/5 = 2.5; t = 3 / sqrt(2.5); df = 2.5² / (0.5²/4 + 2²/4) = 6.25 / 1.0625
    assert w.t == pytest.approx(3 / math.sqrt(2.5))
    assert w.df == pytest.approx(6.25 / 1.0625)
    assert 0.10 < w.p < 0.115  # between the df=5 and df=6 table values for t = 1.897
    assert stats.welch(B, A).t == pytest.approx(-w.t)
    assert stats.welch([1.0], B) is None


def test_welch_identical_and_constant_samples():
    assert stats.welch(A, A).p == pytest.approx(1.0)
    same = stats.welch([2.0, 2.0], [2.0, 2.0])
    assert same.p == 1.0
    apart = stats.welch([1.0, 1.0], [2.0, 2.0])
    assert apart.p == 0.0 and apart.t == math.inf


@pytest.mark.parametrize("t", [0.1, 0.7, 1.0, 2.5, 10.0])
def test_t_distribution_closed_forms(t):
    # df = 1 is the Cauchy distribution; df = 2 has F(t) = 1/2 + t / (2 sqrt(2 + t²))
    assert stats.t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-9)
    assert stats.t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-9)


@pytest.mark.parametrize(("t", "df"), [(2.776, 4), (2.228, 10), (2.042, 30), (12.706, 1)])
def test_t_table_critical_values(t, df):
    assert stats.t_two_sided_p(t, df) == pytest.approx(0.05, abs=2e-4)


def test_bootstrap_is_seeded_and_brackets_the_ratio():
    lo, hi = stats.bootstrap_ratio(A, B)
    assert (lo, hi) == stats.bootstrap_ratio(A, B)
    assert lo < 2.0 < hi
    assert stats.bootstrap_ratio([3.0, 3.0, 3.0], [6.0, 6.0]) == (2.0, 2.0)
    assert stats.bootstrap_ratio([1.0], B) is None


def test_outliers_and_slow_first_run():
    xs = [10.0, 10.1, 9.9, 10.05, 9.95, 30.0]
    assert stats.outliers(xs) == [5]
    assert stats.outliers(A) == []


def test_outliers_follow_hyperfines_rule():
    """hyperfine (src/outlier_detection.rs): score |x - median| / MAD, bar 1.4826 x 10 = 14.826, MAD 0 taken as
    the smallest float. Median 10.05 and MAD 0.1 here, so 11.8 scores 17.5: an outlier by hyperfine's bar (the
    0.6745-scaled score 11.8 would pass a bar of 14), while 11.5 (14.5) is not."""
    base = [10.0, 10.1, 9.9, 10.1, 9.9]
    assert stats.outliers([*base, 11.8]) == [5]
    assert stats.outliers([*base, 11.5]) == []
    assert stats.outliers([*base, 8.3]) == [5]  # both sides count
    # hyperfine's own cases: no outlier in tiny samples; a MAD of 0 makes any differing value one
    assert stats.outliers([]) == [] and stats.outliers([50.0]) == [] and stats.outliers([1000.0, 0.0]) == []
    assert stats.outliers([5.0, 5.0, 5.0, 5.0, 6.0]) == [4]
    assert stats.slow_first([20.0, 10.0, 10.2, 9.9])
    assert not stats.slow_first([10.5, 10.0, 10.2, 9.9])
