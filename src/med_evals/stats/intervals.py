"""Intervals and paired tests: the statistics behind every interval, report test and gate.

- 95% intervals of a proportion: the normal-approximation (Wald) interval the oncology study
  used, clipped to [0, 1], with n = valid predictions for accuracy and F1, n = TP + FN for
  sensitivity and n = TN + FP for specificity
  (:func:`med_evals.scorers.oncology_rct.binary_summary`); a Wilson score interval with the
  same p and n beside it.
- McNemar's exact test on paired correctness, and a paired percentile bootstrap of any function
  of per-sample values (the report's comparisons and ``med-evals regress``), with the standard
  error of its resamples; the bootstrap standard error of one run's numbers
  (:mod:`med_evals.stats.power` turns either into a detectable difference), and the percentile
  bootstrap interval of one run's numbers, plain or resampling whole clusters
  (:func:`bootstrap_interval`: a macro-F1's 95% interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

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
    """95% Wilson score interval for a proportion p observed over n trials."""
    if n == 0 or p is None or math.isnan(p):
        return (math.nan, math.nan)
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
    res = mcnemar(table, exact=True)
    return {
        "n": int(a.size),
        "a_only": table[0][1],
        "b_only": table[1][0],
        "p_value": float(res.pvalue),
    }


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
    values at those positions, so the interval is of the very function that made the numbers.
    Resamples where a number is undefined (NaN, e.g. no valid prediction drawn) are left out.
    ``se`` is the standard deviation (ddof=1) of the resampled differences: the bootstrap
    standard error of the difference (NaN with fewer than two defined resamples). With
    ``one_sided`` (a level, 0.05), also ``lower``: the one-sided ``1 - one_sided`` lower bound
    of the difference, the ``100 * one_sided`` percentile of the same resampled differences
    (the gate's ``--margin``).
    """
    if len(a) != len(b):
        raise ValueError("paired value lists differ in length")
    fa, fb = fn(list(a)), fn(list(b))
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
    rng = np.random.default_rng(seed)
    boots: dict[str, list[float]] = {k: [] for k in fa}
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        ra, rb = fn([a[i] for i in idx]), fn([b[i] for i in idx])
        for k in boots:
            boots[k].append(float(ra[k]) - float(rb[k]))
    for k, d in out.items():
        xs = np.asarray(boots[k])
        xs = xs[~np.isnan(xs)]
        lo, hi = np.percentile(xs, [2.5, 97.5]) if xs.size else (math.nan, math.nan)
        d.update(lo=float(lo), hi=float(hi), se=_sd(xs), n=n)
        if one_sided is not None:
            d["lower"] = float(np.percentile(xs, 100 * one_sided)) if xs.size else math.nan
    return out


def _sd(xs: np.ndarray) -> float:
    return float(np.std(xs, ddof=1)) if xs.size > 1 else math.nan


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
    members: list[list[int]] = []
    if clusters is not None:
        by_cluster: dict[Any, list[int]] = {}
        for i, c in enumerate(clusters):
            by_cluster.setdefault(c, []).append(i)
        members = list(by_cluster.values())
    rng = np.random.default_rng(seed)
    boots: dict[str, list[float]] = {k: [] for k in fn(list(values))}
    for _ in range(n_boot):
        if clusters is None:
            idx = list(rng.integers(0, n, n))
        else:
            idx = [i for c in rng.integers(0, len(members), len(members)) for i in members[c]]
        r = fn([values[i] for i in idx])
        for k in boots:
            boots[k].append(float(r[k]))
    out = {}
    for k, xs in boots.items():
        arr = np.asarray(xs)
        out[k] = arr[~np.isnan(arr)]
    return out


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
    out = {}
    for k, arr in _resampled(fn, values, n_boot, seed, clusters).items():
        lo, hi = np.percentile(arr, [2.5, 97.5]) if arr.size else (math.nan, math.nan)
        out[k] = (float(lo), float(hi))
    return out
