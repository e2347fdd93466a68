"""Intervals clustered by source (med_evals.stats.clustered), against a hand computation."""

import math

import pytest
from scipy.stats import t as student_t

from med_evals.stats.clustered import clustered_proportion, clustered_se
from med_evals.stats.intervals import wilson_interval

#: 10 samples from 4 sources: A (1, 1, 0), B (0, 0), C (1, 1, 1, 1), D (0)
CORRECT = [1, 1, 0, 0, 0, 1, 1, 1, 1, 0]
SOURCES = list("AAABBCCCCD")


def wilson(p, n, z):
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def test_clustered_standard_error_and_interval_by_hand():
    """Mean 0.6. Deviations summed per source: A 0.4 + 0.4 - 0.6 = 0.2, B -1.2, C 1.6, D -0.6;
    squares 0.04 + 1.44 + 2.56 + 0.36 = 4.4; times C / (C - 1) = 4/3; root over n = 10:
    sqrt(5.8667) / 10 = 0.24221. Plain: sqrt(s^2 / n), s^2 = (6 * 0.16 + 4 * 0.36) / 9."""
    out = clustered_proportion(CORRECT, SOURCES)
    assert (out["p"], out["n"], out["clusters"]) == (0.6, 10, 4)
    assert out["se_clustered"] == pytest.approx(math.sqrt(4.4 * 4 / 3) / 10)
    assert out["se"] == pytest.approx(math.sqrt((6 * 0.16 + 4 * 0.36) / 9 / 10))
    assert out["design_effect"] == pytest.approx(2.2)  # 0.058667 / 0.026667
    assert out["wilson"] == pytest.approx(wilson_interval(0.6, 10))
    # Korn-Graubard: n_eff = p(1-p) / se_c^2 = 0.24 / 0.058667; t on C - 1 = 3 df
    n_eff = 0.24 / (4.4 * 4 / 3 / 100)
    assert out["wilson_clustered"] == pytest.approx(wilson(0.6, n_eff, student_t.ppf(0.975, 3)))
    lo, hi = out["wilson_clustered"]
    assert lo < out["wilson"][0] and hi > out["wilson"][1]  # sources that go together: wider


def test_one_sample_per_source_is_the_plain_standard_error():
    out = clustered_se(CORRECT, list(range(10)))
    assert out["se_clustered"] == pytest.approx(out["se"])
    assert out["design_effect"] == pytest.approx(1.0)


def test_any_numbers_and_degenerate_input():
    """A paired difference (-1/0/1) has a clustered standard error too; one source gives no
    clustered interval; a sample without a source is refused (Inspect's message)."""
    diff = [1, 0, -1, 1, 1, 0, 0, 0, 1, -1]
    out = clustered_se(diff, SOURCES)
    mean = 0.2
    sums = [sum(d - mean for d, s in zip(diff, SOURCES, strict=True) if s == c) for c in "ABCD"]
    assert out["se_clustered"] == pytest.approx(math.sqrt(sum(x * x for x in sums) * 4 / 3) / 10)
    single = clustered_proportion(CORRECT, ["A"] * 10)
    assert single["se_clustered"] == 0.0 and all(map(math.isnan, single["wilson_clustered"]))
    assert all(map(math.isnan, clustered_proportion([], [])["wilson"]))
    with pytest.raises(ValueError, match="has no cluster metadata"):
        clustered_proportion(CORRECT, [*SOURCES[:-1], None])
    with pytest.raises(ValueError, match="differ in length"):
        clustered_se(CORRECT, SOURCES[:-1])
