"""The interval of a proportion clustered by source (Inspect's ``ci_wilson(cluster=)``, through
med_evals.stats.intervals.clustered_wilson_interval), against a hand computation."""

import math

import pytest
from scipy.stats import t as student_t

from med_evals.stats.intervals import clustered_wilson_interval, wilson_interval

#: 10 samples from 4 sources: A (1, 1, 0), B (0, 0), C (1, 1, 1, 1), D (0)
CORRECT = [1, 1, 0, 0, 0, 1, 1, 1, 1, 0]
SOURCES = list("AAABBCCCCD")


def wilson(p, n, z):
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def test_clustered_interval_by_hand():
    """Mean 0.6. Deviations summed per source: A 0.4 + 0.4 - 0.6 = 0.2, B -1.2, C 1.6, D -0.6;
    squares 0.04 + 1.44 + 2.56 + 0.36 = 4.4; times C / (C - 1) = 4/3, over n^2 = 100: the
    clustered variance of the mean 0.058667 (Miller 2024, appendix A, Inspect's
    ``stderr(cluster=)`` squared). Korn-Graubard: n_eff = p(1-p) / 0.058667 = 4.09 (of 10);
    Wilson's interval at n_eff with t on C - 1 = 3 degrees of freedom."""
    n_eff = 0.24 / (4.4 * 4 / 3 / 100)
    lo, hi = clustered_wilson_interval(CORRECT, SOURCES)
    assert (lo, hi) == pytest.approx(wilson(0.6, n_eff, student_t.ppf(0.975, 3)), abs=1e-12)
    plain = wilson_interval(0.6, 10)
    assert lo < plain[0] and hi > plain[1]  # sources that go together: wider


def test_sources_that_vary_less_than_samples_cap_the_size_at_n():
    """Negative intra-source correlation (each source half right): the effective size would
    exceed n, so it is capped at n; the interval is Wilson's at n with t on C - 1 df."""
    correct = [1, 0] * 5
    sources = [i // 2 for i in range(10)]  # 5 sources, each (1, 0): clustered variance 0
    # zero clustered variance: Inspect uses the unadjusted n
    lo, hi = clustered_wilson_interval(correct, sources)
    assert (lo, hi) == pytest.approx(wilson(0.5, 10, student_t.ppf(0.975, 4)), abs=1e-12)


def test_degenerate_input():
    """One source or none gives no clustered interval; a sample without a source is refused
    (Inspect's message), and so are lists of different lengths."""
    assert all(map(math.isnan, clustered_wilson_interval(CORRECT, ["A"] * 10)))
    assert all(map(math.isnan, clustered_wilson_interval([], [])))
    with pytest.raises(ValueError, match="has no cluster metadata"):
        clustered_wilson_interval(CORRECT, [*SOURCES[:-1], None])
    with pytest.raises(ValueError, match="differ in length"):
        clustered_wilson_interval(CORRECT, SOURCES[:-1])
