"""Intervals and paired tests: the statistics behind every interval, report test and gate.

- 95% intervals of a proportion: the normal-approximation (Wald) interval the oncology study
  used, clipped to [0, 1], with n = valid predictions for accuracy and F1, n = TP + FN for
  sensitivity and n = TN + FP for specificity
  (:func:`med_evals.scorers.oncology_rct.binary_summary`); a Wilson score interval with the
  same p and n beside it; where samples share a source (a MedEvidence review), Inspect's
  clustered Wilson interval (:func:`clustered_wilson_interval`).
- McNemar's exact test on paired correctness, and a paired percentile bootstrap of any function
  of per-sample values (the report's comparisons and ``med-evals regress``), with the standard
  error of its resamples; the bootstrap standard error of one run's numbers
  (:mod:`med_evals.stats.power` turns either into a detectable difference), and the percentile
  bootstrap interval of one run's numbers, plain or resampling whole clusters
  (:func:`bootstrap_interval`: a macro-F1's 95% interval). The resamples are
  ``scipy.stats.bootstrap``'s; the interval and standard error over them are ours (why: the
  comment above :data:`BATCH_DRAWS`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from inspect_ai.scorer import MetricProtocol, SampleScore, Score, ci_wilson

#: Paired bootstrap resamples of the report and of ``diff``: enough for a 95% interval's first
#: decimal, quick on CI.
N_BOOT = 200

ALPHA_95 = 0.05
#: The study's z (its ``_normal_approx_ci`` uses 1.96, not 1.959964...).
STUDY_Z = 1.96


def wald_interval(p: float, n: int, z: float = STUDY_Z) -> tuple[float, float]:
    """95% normal-approximation interval, clipped to [0, 1] (the study's ``_normal_approx_ci``).

    ``p +- z * sqrt(p (1 - p) / n)`` with z = 1.96 as in the study's code.
    """
    if n == 0 or p is None or math.isnan(p):
        return (math.nan, math.nan)
    se = math.sqrt(p * (1 - p) / n)
    return (max(0.0, p - z * se), min(1.0, p + z * se))


def wilson_interval(p: float, n: int) -> tuple[float, float]:
    """95% Wilson score interval for a proportion p observed over n trials (statsmodels).

    Not Inspect's ``ci_wilson()``: the same formula, computed in another order, it differs in
    the last digits (measured: 5,451 of the 7,259 (k, n) with n < 120, at most 4.4e-16), and
    the oncology study's logged intervals (``accuracy_wilson_lo``, ...) are this function's.
    """
    if n == 0 or p is None or math.isnan(p):
        return (math.nan, math.nan)
    # SciPy and statsmodels are imported where used, so that importing a task stays light
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(p * n, n, alpha=ALPHA_95, method="wilson")
    return (float(lo), float(hi))


def ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def proportion_with_intervals(count: int, n: int) -> dict[str, Any]:
    p = ratio(count, n)
    return {
        "p": p,
        "count": count,
        "n": n,
        "wald": wald_interval(p, n),
        "wilson": wilson_interval(p, n),
    }


def mcnemar_exact(correct_a: Sequence[int], correct_b: Sequence[int]) -> dict[str, Any]:
    """McNemar's exact (binomial) test on paired correctness.

    ``b`` counts samples right under A and wrong under B, ``c`` the reverse.
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError("paired correctness vectors differ in length")
    table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    from statsmodels.stats.contingency_tables import mcnemar

    res = mcnemar(table, exact=True)
    return {
        "n": int(a.size),
        "a_only": table[0][1],
        "b_only": table[1][0],
        "p_value": float(res.pvalue),
    }


def clustered_wilson_interval(
    correct: Sequence[int], clusters: Sequence[Hashable]
) -> tuple[float, float]:
    """The 95% Wilson interval of a proportion (``correct`` per sample, 1 or 0) whose samples
    share sources (``clusters``: one per sample, the review a question came from): Inspect's
    ``ci_wilson(cluster=)`` over ``SampleScore``s carrying each sample's source in their
    metadata. Wilson's interval at the Korn-Graubard effective sample size
    ``p(1-p) / se_clustered^2`` (capped at n), ``se_clustered`` Inspect's ``stderr(cluster=)``
    (Miller 2024, "Adding error bars to evals", arXiv 2411.00640, appendix A, with a
    finite-cluster correction), with a Student-t critical value on C - 1 degrees of freedom
    over C sources (Franco et al. 2019). (NaN, NaN) with fewer than two sources (Inspect
    refuses one: the clustered variance is unestimable); a sample without a source (None) is
    refused with Inspect's message."""
    if len(correct) != len(clusters):
        raise ValueError("values and clusters differ in length")
    if len(set(clusters)) < 2:
        return (math.nan, math.nan)
    scores = [
        SampleScore(score=Score(value=float(x)), sample_id=i, sample_metadata={"source": c})
        for i, (x, c) in enumerate(zip(correct, clusters, strict=True))
    ]
    bounds = cast(Mapping[str, float], cast(MetricProtocol, ci_wilson(cluster="source"))(scores))
    return (float(bounds["lower"]), float(bounds["upper"]))


# --- the bootstrap --------------------------------------------------------------------------
#
# The resamples are scipy's (``scipy.stats.bootstrap``, ``method="percentile"``): positions
# drawn with replacement by ``numpy.random.default_rng(seed)``, ``integers(0, n, (batch, n))``
# per batch, which are row after row the draws of one ``integers(0, n, n)`` call per resample
# (``tests/test_stats.py`` checks them against that loop, number for number, over several
# batches); the statistic is ours (the headline function of the resampled values), paired
# across two runs with ``paired=True`` (the same positions in both), and clustered by drawing
# source positions, each bringing all its samples.
#
# The interval and the standard error are ours, from scipy's ``bootstrap_distribution``: the
# percentiles 2.5 and 97.5 (``np.percentile``, linear) and the standard deviation (ddof=1) of the
# resamples on which the number is defined. scipy's own ``confidence_interval`` is the quantile
# at (1 - 0.95) / 2 = 0.025000000000000022 (``scipy.stats.quantile``), NaN when any resample is
# (oncology's accuracy over valid predictions on a resample that drew no valid reply), and its
# ``standard_error`` sums the resamples along a strided axis of the distribution (another
# order of the same additions). Measured (scipy 1.17.1) on the MedEvidence and oncology
# headline numbers of one run (3 to 1,000 samples, plain and clustered, 1,000 resamples, seeds
# 0 and 1): of 96 intervals, 8 were NaN where ours are defined and 23 of the other 88 differed
# in the last digits (at most 1.8e-15), as did 74 of the 88 standard errors (at most 1.9e-15);
# of 60 paired differences, 58 differed (interval or standard error). Those would change the
# report's, the gate's and ``diff``'s digits, so they are not used.

#: positions drawn in one batch at most: scipy holds a batch's draws, the values at them and a
#: copy at once (3 x 2 MiB here, twice that for a pair; bench/bench_bootstrap.py)
BATCH_DRAWS = 2**18


def _distribution(
    stat: Callable[..., np.ndarray], units: int, n_boot: int, seed: int, width: int,
    paired: bool = False,
) -> np.ndarray:
    """``stat`` of ``n_boot`` resamples of ``units`` positions (two runs' with ``paired``:
    ``stat(positions_a, positions_b)``, the same positions), ``width`` numbers each, as a
    (width, n_boot) array."""
    samples = 2 if paired else 1
    if n_boot < 1 or not width:
        return np.empty((width, 0))
    if units == 1:
        # scipy needs two observations; every resample of one is that one
        one = stat(*[np.zeros(1, dtype=np.int64)] * samples)
        return np.repeat(np.asarray(one, dtype=float)[:, None], n_boot, axis=1)
    from scipy.stats import DegenerateDataWarning, bootstrap

    positions = np.arange(units)
    with warnings.catch_warnings():
        # scipy warns when its own interval is NaN (a number undefined on some resample), and
        # numpy when scipy's own standard error is of one resample: neither is computed here
        warnings.simplefilter("ignore", DegenerateDataWarning)
        if n_boot < 2:
            warnings.simplefilter("ignore", RuntimeWarning)
        res = bootstrap(
            (positions,) * samples, stat, n_resamples=n_boot, batch=max(1, BATCH_DRAWS // units),
            vectorized=False, paired=paired, method="percentile",
            rng=np.random.default_rng(seed),
        )
    return np.asarray(res.bootstrap_distribution, dtype=float).reshape(width, n_boot)


def _whole(values: Sequence[Any]) -> list[Any]:
    """``values`` as a list: a list as it is (the rows of a score table keep their table, whose
    columns the resamples then read: :func:`_taker`), any other sequence copied."""
    return values if isinstance(values, list) else list(values)


def _taker(values: Sequence[Any]) -> Callable[[Any], list[Any]]:
    """The values at given positions: the values' own ``take`` where they have one (the rows
    of a score table: :meth:`med_evals.scorers.score_table.Rows.take`, whose resample reads
    each value once, not once per resample), else a list of them."""
    take = getattr(values, "take", None)
    if callable(take):
        return take  # type: ignore[no-any-return]
    return lambda idx: [values[i] for i in idx]


def _defined(xs: np.ndarray) -> np.ndarray:
    return xs[~np.isnan(xs)]


def _percentiles(xs: np.ndarray) -> tuple[float, float]:
    if not xs.size:
        return (math.nan, math.nan)
    lo, hi = np.percentile(xs, [2.5, 97.5])
    return (float(lo), float(hi))


def _sd(xs: np.ndarray) -> float:
    return float(np.std(xs, ddof=1)) if xs.size > 1 else math.nan


def bootstrap_difference(
    fn: Callable[[list[Any]], Mapping[str, float]],
    a: Sequence[Any],
    b: Sequence[Any],
    n_boot: int = 1000,
    seed: int = 0,
    one_sided: float | None = None,
) -> dict[str, dict[str, float]]:
    """``fn(a) - fn(b)`` for every number ``fn`` returns, with a 95% paired percentile bootstrap.

    ``a`` and ``b`` are per-sample values paired by position (the same samples in two runs);
    each resample draws sample positions with replacement and applies ``fn`` to both runs'
    values at those positions (scipy's ``paired=True``), so the interval is of the very
    function that made the numbers. Resamples where a number is undefined (NaN, e.g. no valid
    prediction drawn) are left out. ``se`` is the standard deviation (ddof=1) of the resampled
    differences: the bootstrap standard error of the difference (NaN with fewer than two
    defined resamples). With ``one_sided`` (a level, 0.05), also ``lower``: the one-sided
    ``1 - one_sided`` lower bound of the difference, the ``100 * one_sided`` percentile of the
    same resampled differences (the gate's ``--margin``).
    """
    if len(a) != len(b):
        raise ValueError("paired value lists differ in length")
    fa, fb = fn(_whole(a)), fn(_whole(b))
    out = {
        k: {"a": float(fa[k]), "b": float(fb[k]), "difference": float(fa[k] - fb[k])} for k in fa
    }
    n = len(a)
    if n == 0:
        for d in out.values():
            d.update(lo=math.nan, hi=math.nan, se=math.nan, n=0)
            if one_sided is not None:
                d["lower"] = math.nan
        return out
    keys = list(fa)

    take_a, take_b = _taker(a), _taker(b)

    def stat(ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        ra, rb = fn(take_a(ia)), fn(take_b(ib))
        return np.array([float(ra[k]) - float(rb[k]) for k in keys])

    dist = _distribution(stat, n, n_boot, seed, len(keys), paired=True)
    for k, row in zip(keys, dist, strict=True):
        xs = _defined(row)
        lo, hi = _percentiles(xs)
        out[k].update(lo=lo, hi=hi, se=_sd(xs), n=n)
        if one_sided is not None:
            out[k]["lower"] = float(np.percentile(xs, 100 * one_sided)) if xs.size else math.nan
    return out


def _resampled(
    fn: Callable[[list[Any]], Mapping[str, float]],
    values: Sequence[Any],
    n_boot: int,
    seed: int,
    clusters: Sequence[Any] | None = None,
) -> dict[str, np.ndarray]:
    """``fn`` over ``n_boot`` resamples of ``values`` with replacement (seeded; with
    ``clusters``, whole clusters resampled, each bringing all its samples): each number's
    defined resamples (NaN left out)."""
    n = len(values)
    if clusters is not None and len(clusters) != n:
        raise ValueError("values and clusters differ in length")
    keys = list(fn(_whole(values)))
    if clusters is None:
        units = n
        pick = _taker(values)
    else:
        by_cluster: dict[Any, list[int]] = {}
        for i, c in enumerate(clusters):
            by_cluster.setdefault(c, []).append(i)
        members = list(by_cluster.values())
        units = len(members)

        take = _taker(values)

        def pick(idx: np.ndarray) -> list[Any]:
            return take([i for c in idx for i in members[c]])

    def stat(idx: np.ndarray) -> np.ndarray:
        r = fn(pick(idx))
        return np.array([float(r[k]) for k in keys])

    dist = _distribution(stat, units, n_boot, seed, len(keys))
    return {k: _defined(row) for k, row in zip(keys, dist, strict=True)}


def bootstrap_se(
    fn: Callable[[list[Any]], Mapping[str, float]],
    values: Sequence[Any],
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, float]:
    """The bootstrap standard error of every number ``fn`` returns over one run's ``values``:
    the standard deviation (ddof=1) of ``fn`` over ``n_boot`` resamples of the samples with
    replacement (Efron and Tibshirani 1993, ch. 6), undefined resamples left out as in
    :func:`bootstrap_difference`; NaN with fewer than two samples or defined resamples."""
    if len(values) < 2:
        return dict.fromkeys(fn(list(values)), math.nan)
    return {k: _sd(arr) for k, arr in _resampled(fn, values, n_boot, seed).items()}


def bootstrap_interval(
    fn: Callable[[list[Any]], Mapping[str, float]],
    values: Sequence[Any],
    n_boot: int = 1000,
    seed: int = 0,
    clusters: Sequence[Any] | None = None,
) -> dict[str, tuple[float, float]]:
    """The 95% percentile bootstrap interval of every number ``fn`` returns over one run's
    ``values`` (Efron and Tibshirani 1993, ch. 13): ``fn`` over ``n_boot`` resamples of the
    samples with replacement, seeded, undefined resamples left out as in
    :func:`bootstrap_difference`. With ``clusters`` (one source per value: the review a question
    came from) whole clusters are resampled, each drawn cluster bringing all its samples (the
    cluster bootstrap, Davison and Hinkley 1997, section 3.8): the interval then allows for
    samples of one source erring together. (NaN, NaN) with no samples or no defined resample."""
    if not len(values):
        return dict.fromkeys(fn(list(values)), (math.nan, math.nan))
    resampled = _resampled(fn, values, n_boot, seed, clusters)
    return {k: _percentiles(arr) for k, arr in resampled.items()}
