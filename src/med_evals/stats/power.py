"""What a run, or a pair of runs, can detect: minimum detectable differences and sample sizes.

The formula (Miller 2024, "Adding error bars to evals", arXiv 2411.00640, section 5, power
analysis): two runs scored on the same n samples detect a true difference delta of their means
with power ``1 - beta`` by a two-sided test at level alpha when

    n = (z_{1-alpha/2} + z_{1-beta})^2 * omega^2 / delta^2,

omega^2 the variance of the per-sample paired difference (one epoch per sample: Miller's K = 1).
We write ``c = z_{1-alpha/2} + z_{1-beta}`` (2.8016 at alpha = 0.05, 80% power).

**Paired correctness** (accuracy): the per-sample difference ``d = a - b`` is -1, 0 or 1; with
the discordance ``q`` (the share of samples exactly one run got right) and mean delta, its
variance is exactly ``q - delta^2``. Solving Miller's equation for delta gives the minimum
detectable difference (MDE)

    delta = c * sqrt(q / (n + c^2))

and the sample size for a chosen delta ``n = c^2 (q - delta^2) / delta^2``. This is the power
of McNemar's asymptotic test (``(b - c) / sqrt(b + c)``, no continuity correction): checked in
tests/test_power.py by simulation. Ours: where delta exceeds q (fewer than about
``c^2 (1 - q)`` ~ 8 discordant samples expected: ``n q < c^2 (1 - q)``), no difference of that
discordance is detectable at that power and the MDE is ``inf``; so is it below
:func:`min_paired_n` samples, where even a clean sweep cannot reach p < alpha under McNemar's
exact test (two-sided p >= 2 * 0.5^n). A pair that never disagreed (q = 0) detects nothing at
its discordance: ``inf``. The normal approximation overstates the power of the exact test at
small n (Bowyer et al., ICML 2025): :func:`exact_mcnemar_power` gives the exact figure.

**A gate from a baseline run alone** (no new run yet): ours, the new run's errors taken as
independent of the baseline's, so that a new run at accuracy ``p - delta`` disagrees with a
baseline at p on ``q = 2p(1-p) + delta (2p - 1)`` of the samples (``2p(1-p)`` at no change);
a caller who knows the discordance of such pairs (two runs of one model usually err on the
same samples, so disagree less, and detect smaller drops) passes it instead.

**Any other number** (macro-F1): ``delta = c * se``, se the standard error of the paired
difference, e.g. the paired bootstrap's (:func:`med_evals.stats.intervals.bootstrap_difference`'s
``se``); from a baseline alone, ours: ``se = sqrt(2) * se_baseline`` (the new run's number as
variable as the baseline's and independent of it), se_baseline from
:func:`med_evals.stats.intervals.bootstrap_se`.

**One floor for every number** (:func:`too_few_differ`, ours): a pair whose samples differ on
fewer than about ``c^2 (1 - q)`` ~ 8 of them (or that has fewer than :func:`min_paired_n`)
detects no difference of any size, whichever number: the discordance route's floor above, and
the bootstrap route's too (a number's paired difference lives on the samples whose values
differ; a bootstrap of a handful of them, none on an identical rerun, shows nothing of how the
number varies).

**No worse than a margin** (non-inferiority; the ``--margin`` of ``med-evals regress``): a run
is shown no worse than its baseline by more than a margin m when the one-sided 95% lower bound
of new - old lies above -m (the lower half of a TOST against the margin, at alpha = 0.05). The
items that do so with 80% power for a run as good as its baseline, and the smallest margin
that n items rule out, are the sizes above with the one-sided critical value
``z_{1-alpha}`` for ``z_{1-alpha/2}`` (:func:`one_sided`: the two-sided formulas at 2 alpha;
``c = 1.6449 + 0.8416 = 2.4865``), the variance of the paired difference taken at the margin
(a run m worse whose errors are independent of the baseline's, ours: the variance under the
null hypothesis the test rejects, as score tests take it, which stays above 0 for a baseline at
an accuracy or valid rate of 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

ALPHA = 0.05
POWER = 0.80


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """``c = z_{1-alpha/2} + z_{power}``: 1.9600 + 0.8416 = 2.8016 by default."""
    from scipy.stats import norm  # SciPy where used: importing the CLI stays light

    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


def one_sided(alpha: float = ALPHA) -> float:
    """The two-sided level whose critical value is the one-sided test's at ``alpha``
    (``z_{1-(2 alpha)/2} = z_{1-alpha}``): 0.10 for a one-sided test at 0.05. Every size here
    is of a two-sided test at its ``alpha``; ``one_sided(alpha)`` gives the one-sided test's
    (the gate's ``--margin``)."""
    return 2 * alpha


def min_paired_n(alpha: float = ALPHA) -> int:
    """The fewest paired samples on which McNemar's exact test can reject at level ``alpha``:
    the smallest n with ``2 * 0.5^n <= alpha`` (6 at alpha = 0.05: 2 * 0.5^5 = 0.0625)."""
    return math.ceil(math.log2(2 / alpha))


def detectable_difference(
    n: int, discordance: float, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The MDE of paired correctness on ``n`` samples at ``discordance`` q:
    ``c * sqrt(q / (n + c^2))``; ``inf`` where none is detectable (see the module), NaN for
    no samples."""
    if n <= 0:
        return math.nan
    if not 0 <= discordance <= 1:
        raise ValueError(f"discordance must be a share in [0, 1], not {discordance}")
    c = z_sum(alpha, power)
    if too_few_differ(n, n * discordance, alpha, power):
        return math.inf
    return c * math.sqrt(discordance / (n + c * c))


def too_few_differ(
    n: int, differ: float, alpha: float = ALPHA, power: float = POWER
) -> bool:
    """Whether a pair on ``n`` samples that differ on ``differ`` of them is below the floor:
    fewer than :func:`min_paired_n` samples, or ``differ < c^2 (1 - differ / n)`` (about 8
    samples at alpha = 0.05, 80% power), where no difference of that discordance is
    detectable. The one floor of every number a pair detects: the discordance route's
    (:func:`detectable_difference`) and the bootstrap route's
    (:func:`med_evals.stats.standing.detectable`)."""
    if n <= 0:
        return True
    c = z_sum(alpha, power)
    return n < min_paired_n(alpha) or differ < c * c * (1 - differ / n)


def pair_detectable(
    correct_a: Sequence[int], correct_b: Sequence[int], alpha: float = ALPHA, power: float = POWER
) -> dict[str, float]:
    """What a pair of runs on the same samples can detect, from their correctness vectors:
    n, the discordant count and share (observed), and the MDE at that discordance."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError("paired correctness vectors differ in length")
    n, discordant = int(a.size), int(np.sum(a != b))
    q = discordant / n if n else math.nan
    return {
        "n": n,
        "discordant": discordant,
        "discordance": q,
        "difference": detectable_difference(n, q, alpha, power) if n else math.nan,
    }


def independent_discordance(baseline_accuracy: float, drop: float) -> float:
    """``2p(1-p) + drop (2p - 1)``: the share of samples on which a baseline at accuracy p and a
    run at ``p - drop`` whose errors are independent of the baseline's disagree."""
    p = baseline_accuracy
    return 2 * p * (1 - p) + drop * (2 * p - 1)


def gate_drop(
    n: int,
    baseline_accuracy: float,
    discordance: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
) -> float:
    """The smallest accuracy drop a gate on ``n`` samples detects from a baseline at
    ``baseline_accuracy`` p: with ``discordance`` given, :func:`detectable_difference`;
    else errors independent of the baseline's (:func:`independent_discordance`), solving
    ``delta^2 (n + c^2) = c^2 q(delta)``:
    ``delta = (c^2 (2p-1) + sqrt(c^4 (2p-1)^2 + 8 c^2 (n + c^2) p (1-p))) / (2 (n + c^2))``.
    ``inf`` when no drop is detectable (fewer than :func:`min_paired_n` samples, a drop larger
    than p, a baseline at 0)."""
    if discordance is not None:
        return detectable_difference(n, discordance, alpha, power)
    if n <= 0 or math.isnan(baseline_accuracy):
        return math.nan
    p = baseline_accuracy
    if not 0 <= p <= 1:
        raise ValueError(f"baseline accuracy must be a share in [0, 1], not {p}")
    c2 = z_sum(alpha, power) ** 2
    lin, m = c2 * (2 * p - 1), n + c2
    delta = (lin + math.sqrt(lin * lin + 8 * c2 * m * p * (1 - p))) / (2 * m)
    if n < min_paired_n(alpha) or p == 0 or delta > p:
        return math.inf
    return delta


def size_for_drop(
    drop: float,
    baseline_accuracy: float | None = None,
    discordance: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
) -> int:
    """The fewest samples on which a gate detects an accuracy ``drop`` at ``power``:
    ``ceil(c^2 (q - drop^2) / drop^2)``, at least :func:`min_paired_n`; q the ``discordance``
    given, else :func:`independent_discordance` of ``baseline_accuracy`` and the drop."""
    if not 0 < drop <= 1:
        raise ValueError(f"the drop must be in (0, 1], not {drop}")
    if discordance is None:
        if baseline_accuracy is None:
            raise ValueError("give the baseline's accuracy or the pairs' discordance")
        if drop > baseline_accuracy:
            raise ValueError(f"a drop of {drop} from an accuracy of {baseline_accuracy}")
        discordance = independent_discordance(baseline_accuracy, drop)
    if drop > discordance:
        raise ValueError(f"a drop of {drop} needs a discordance of at least {drop}, "
                         f"not {discordance:.3f}")
    n = z_sum(alpha, power) ** 2 * (discordance - drop * drop) / (drop * drop)
    return max(math.ceil(n - 1e-9), min_paired_n(alpha))


def detectable_from_se(se: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDE of any number from the standard error of its paired difference: ``c * se``."""
    return z_sum(alpha, power) * se


def gate_drop_from_se(
    baseline_se: float, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The drop of any number (macro-F1) a gate detects from a baseline alone:
    ``c * sqrt(2) * baseline_se`` (ours: the new run as variable as the baseline, independent
    of it)."""
    return detectable_from_se(math.sqrt(2) * baseline_se, alpha, power)


def exact_mcnemar_power(
    n: int, discordance: float, difference: float, alpha: float = ALPHA
) -> float:
    """The exact power of McNemar's exact test (:func:`med_evals.stats.intervals.mcnemar_exact`:
    two-sided
    p = min(1, 2 P(Bin(b + c, 1/2) <= min(b, c)))) at level ``alpha`` on ``n`` samples, when a
    share ``discordance`` q of them is discordant and ``difference`` delta = P(a only) -
    P(b only): the discordant count is Bin(n, q), and given D of them the "a only" count is
    Bin(D, (q + delta) / 2q). Summed exactly; no approximation."""
    if not 0 <= abs(difference) <= discordance <= 1:
        raise ValueError("need |difference| <= discordance <= 1")
    if discordance == 0 or n <= 0:
        return 0.0
    from scipy.stats import binom

    share = (discordance + difference) / (2 * discordance)
    total = 0.0
    for d in range(1, n + 1):
        k = np.arange(d + 1)
        pvals = np.minimum(1.0, 2 * binom.cdf(np.minimum(k, d - k), d, 0.5))
        reject = k[pvals <= alpha]
        if reject.size:
            total += float(binom.pmf(d, n, discordance) * binom.pmf(reject, d, share).sum())
    return total
