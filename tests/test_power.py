"""What a run or a pair can detect (med_evals.stats.power), checked against simulation and against
McNemar's exact test as the package runs it (med_evals.stats.intervals.mcnemar_exact)."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from med_evals.stats.intervals import mcnemar_exact
from med_evals.stats.power import (
    detectable_difference,
    detectable_from_se,
    exact_mcnemar_power,
    gate_drop,
    gate_drop_from_se,
    independent_discordance,
    min_paired_n,
    one_sided,
    pair_detectable,
    size_for_drop,
    too_few_differ,
    z_sum,
)

C = norm.ppf(0.975) + norm.ppf(0.8)


def asymptotic_power(n, a_only, b_only, reps=20000, seed=0):
    """Share of ``reps`` simulated pairs of runs on n samples (P(right only in A) = a_only,
    P(right only in B) = b_only) where McNemar's asymptotic test, |b - c| / sqrt(b + c) > 1.96,
    rejects."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, [a_only, b_only, 1 - a_only - b_only], size=reps)
    b, c = counts[:, 0], counts[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(b + c > 0, np.abs(b - c) / np.sqrt(b + c), 0.0)
    return float(np.mean(z > norm.ppf(0.975)))


def test_z_sum_is_2_8016():
    assert z_sum() == pytest.approx(C) and round(z_sum(), 4) == 2.8016
    assert z_sum(0.01, 0.9) == pytest.approx(norm.ppf(0.995) + norm.ppf(0.9))


@pytest.mark.parametrize("n,q", [(250, 0.2), (250, 0.32), (1000, 0.3), (2786, 0.1)])
def test_mde_solves_millers_equation(n, q):
    """n = c^2 omega^2 / delta^2 with omega^2 = q - delta^2, the variance of a -1/0/1 difference
    of mean delta and P(d != 0) = q."""
    d = detectable_difference(n, q)
    assert n == pytest.approx(C**2 * (q - d * d) / d**2)
    # ... and the variance of such a difference is q - delta^2
    values = np.array([1] * 60 + [-1] * 40 + [0] * 900)  # q = 0.1, delta = 0.02
    assert np.var(values) == pytest.approx(0.1 - 0.02**2)


@pytest.mark.parametrize("n,q", [(1000, 0.3), (400, 0.2)])
def test_power_at_the_mde_is_80_percent_by_simulation(n, q):
    d = detectable_difference(n, q)
    power = asymptotic_power(n, (q + d) / 2, (q - d) / 2)
    assert power == pytest.approx(0.80, abs=0.015)  # 20,000 draws: standard error 0.003
    # half the MDE is detected far less often
    assert asymptotic_power(n, (q + d / 2) / 2, (q - d / 2) / 2) < 0.4


def test_the_issues_sanity_figures():
    """A 20-trial gate detects drops of about 30 points and a 250-trial one about 8-10 (paired),
    at a discordance near 0.32 (2p(1-p) at p = 0.8: the baseline's error rate 0.2, errors
    independent, at no change); independent errors whose discordance grows with the drop
    (gate_drop's default) give about 40 and 11."""
    assert independent_discordance(0.8, 0) == pytest.approx(0.32)
    assert round(detectable_difference(20, 0.32), 2) == 0.30
    assert round(detectable_difference(250, 0.32), 3) == 0.099
    assert round(detectable_difference(250, 0.25), 3) == 0.087  # 2p(1-p) at p = 0.85: 0.255
    assert detectable_difference(20, 0.25) == math.inf  # 5 discordant expected < c^2 * 0.75
    assert round(gate_drop(20, 0.8), 2) == 0.40
    assert round(gate_drop(250, 0.8), 3) == 0.108
    assert gate_drop(250, 0.8, discordance=0.32) == detectable_difference(250, 0.32)


def test_gate_drop_with_independent_errors_by_simulation():
    """The default gate drop: a new run at accuracy p - delta whose errors are independent of
    the baseline's is detected with 80% power."""
    n, p = 1000, 0.8
    d = gate_drop(n, p)
    q = independent_discordance(p, d)
    assert d * d * (n + C**2) == pytest.approx(C**2 * q)
    a_only, b_only = p * (1 - (p - d)), (1 - p) * (p - d)
    assert a_only + b_only == pytest.approx(q) and a_only - b_only == pytest.approx(d)
    assert asymptotic_power(n, a_only, b_only) == pytest.approx(0.80, abs=0.015)


@pytest.mark.parametrize("drop,p,q", [(0.1, 0.8, None), (0.05, 0.6, None), (0.03, None, 0.2),
                                      (0.3, 0.85, None)])
def test_size_for_drop_is_the_gates_inverse(drop, p, q):
    n = size_for_drop(drop, p, q)
    assert gate_drop(n, p if p is not None else 0.5, q) <= drop
    assert gate_drop(n - 1, p if p is not None else 0.5, q) > drop


def test_size_for_drop_refuses_what_cannot_be():
    with pytest.raises(ValueError, match="give the baseline's accuracy or the pairs' discordance"):
        size_for_drop(0.1)
    with pytest.raises(ValueError, match="a drop of 0.3 needs a discordance of at least 0.3"):
        size_for_drop(0.3, discordance=0.2)
    with pytest.raises(ValueError, match="a drop of 0.5 from an accuracy of 0.4"):
        size_for_drop(0.5, 0.4)
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        size_for_drop(0, 0.5)
    assert size_for_drop(1.0, discordance=1.0) == min_paired_n() == 6


def test_tiny_n_and_no_discordance_detect_nothing():
    """Below 6 samples McNemar's exact test cannot reject at 0.05 even on a clean sweep; a pair
    that never disagreed detects nothing at its discordance; too few expected discordant
    samples (n q < c^2 (1 - q)): nothing either."""
    assert mcnemar_exact([1] * 5, [0] * 5)["p_value"] == 2 * 0.5**5 > 0.05
    assert mcnemar_exact([1] * 6, [0] * 6)["p_value"] == 2 * 0.5**6 < 0.05
    assert detectable_difference(5, 1.0) == math.inf
    assert detectable_difference(6, 1.0) == pytest.approx(C / math.sqrt(6 + C**2))
    assert detectable_difference(250, 0.0) == math.inf
    assert detectable_difference(250, 0.02) == math.inf  # 5 discordant expected < c^2 (0.98)
    assert detectable_difference(250, 0.04) < 0.04  # 10 expected: detectable
    assert math.isnan(detectable_difference(0, 0.3))
    assert gate_drop(5, 0.8) == math.inf and gate_drop(100, 0.0) == math.inf
    assert gate_drop(6, 1.0) == pytest.approx(C**2 / (6 + C**2))
    with pytest.raises(ValueError, match="discordance must be a share"):
        detectable_difference(10, 1.5)


def test_pair_detectable_from_two_correctness_vectors():
    a = [1] * 180 + [0] * 20 + [1] * 30 + [0] * 20
    b = [1] * 180 + [0] * 20 + [0] * 30 + [1] * 20
    out = pair_detectable(a, b)
    assert (out["n"], out["discordant"], out["discordance"]) == (250, 50, 0.2)
    assert out["difference"] == detectable_difference(250, 0.2)
    same = pair_detectable(a, a)
    assert same["discordant"] == 0 and same["difference"] == math.inf
    with pytest.raises(ValueError, match="differ in length"):
        pair_detectable(a, b[:-1])


def test_exact_power_equals_simulated_exact_mcnemar_and_is_lower_at_small_n():
    """The exact power sum against McNemar's exact test as the package runs it (seeded), and
    what the normal approximation overstates: at n = 20 the exact test's power at the MDE is
    about 0.56, at n = 250 about 0.76."""
    n, q, d = 40, 0.5, 0.3
    rng = np.random.default_rng(1)
    cells = rng.choice(3, size=(600, n), p=[(q + d) / 2, (q - d) / 2, 1 - q])
    hits = [mcnemar_exact((c == 0) * 1, (c == 1) * 1)["p_value"] <= 0.05 for c in cells]
    assert exact_mcnemar_power(n, q, d) == pytest.approx(np.mean(hits), abs=0.05)
    assert round(exact_mcnemar_power(20, 0.32, detectable_difference(20, 0.32)), 2) == 0.56
    assert round(exact_mcnemar_power(250, 0.32, detectable_difference(250, 0.32)), 2) == 0.76
    assert exact_mcnemar_power(5, 1.0, 1.0) == 0.0  # nothing can reject below 6 samples
    assert exact_mcnemar_power(6, 1.0, 1.0) == 1.0


def test_mde_from_a_bootstrap_standard_error():
    """c * se: for accuracy, the paired bootstrap's se is sqrt((q - delta^2) / n), so the two
    routes agree (tests/test_stats.py checks the se); from a baseline alone, sqrt(2) * se."""
    n, q, d = 400, 0.2, 0.05
    se = math.sqrt((q - d * d) / n)
    assert detectable_from_se(se) == pytest.approx(C * se)
    assert detectable_from_se(math.sqrt(q / n)) > detectable_difference(n, q)
    assert gate_drop_from_se(0.02) == pytest.approx(C * math.sqrt(2) * 0.02)
    # a baseline at p: sqrt(2) * sqrt(p(1-p)/n) is sqrt(2p(1-p)/n), the discordance 2p(1-p)
    p = 0.8
    assert gate_drop_from_se(math.sqrt(p * (1 - p) / n)) == pytest.approx(
        C * math.sqrt(independent_discordance(p, 0) / n))


def test_one_floor_for_every_number():
    """``too_few_differ`` is the discordance route's edge: inf exactly below it (n q <
    c^2 (1 - q), or fewer than 6 samples)."""
    for n in (5, 6, 20, 100, 250):
        for k in range(0, min(n, 12) + 1):
            below = bool(n < 6 or k < C * C * (1 - k / n))
            assert too_few_differ(n, k) is below, (n, k)
            assert math.isinf(detectable_difference(n, k / n)) is below, (n, k)
    assert too_few_differ(100, 7) and not too_few_differ(100, 8)  # 7.85 (1 - q) between
    assert too_few_differ(0, 0)


def test_one_sided_sizes_are_the_two_sided_at_twice_alpha():
    """The equivalence gate's (``--margin``) critical value: z_{0.95}, the two-sided test's
    at 0.10; c = 1.6449 + 0.8416 = 2.4865."""
    assert one_sided() == 0.10
    assert z_sum(one_sided()) == pytest.approx(norm.ppf(0.95) + norm.ppf(0.80))
    assert round(z_sum(one_sided()), 4) == 2.4865
    c1 = norm.ppf(0.95) + norm.ppf(0.80)
    q = 2 * 0.8 * 0.2 + 0.02 * 0.6  # a run 0.02 worse, errors independent
    assert size_for_drop(0.02, 0.8, alpha=one_sided()) == math.ceil(c1**2 * (q - 0.0004) / 0.0004)


@pytest.mark.parametrize("n,p", [(1000, 0.8), (400, 0.7)])
def test_a_run_as_good_as_its_baseline_passes_the_margin_it_is_sized_for(n, p):
    """Simulation: a new run with the baseline's accuracy p, its errors independent of the
    baseline's, on n samples; the gate passes when the one-sided 95% bound of the paired
    difference, d - z_{0.95} sd(d) / sqrt(n), lies above -m. At the margin ``gate_drop``
    gives for a one-sided test, it passes at least 80% of the time (the variance taken at the
    margin, not at 0: a little more, ours)."""
    m = gate_drop(n, p, alpha=one_sided())
    rng = np.random.default_rng(0)
    reps = 4000
    old = rng.random((reps, n)) < p
    new = rng.random((reps, n)) < p
    d = new.astype(float) - old.astype(float)
    bound = d.mean(axis=1) - norm.ppf(0.95) * d.std(axis=1, ddof=1) / math.sqrt(n)
    passed = float(np.mean(bound > -m))
    assert 0.80 <= passed <= 0.87, passed
    # half the margin: far less often
    assert float(np.mean(bound > -m / 2)) < 0.5
