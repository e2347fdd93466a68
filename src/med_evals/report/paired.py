"""Paired comparisons on the same samples: McNemar's exact test and a paired bootstrap."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.metrics import f1_score
from statsmodels.stats.contingency_tables import mcnemar


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


def bootstrap_macro_f1_difference(
    gold: Sequence[str],
    pred_a: Sequence[str],
    pred_b: Sequence[str],
    labels: Sequence[str],
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """Macro-F1(A) - macro-F1(B) over all samples, with a 95% paired percentile bootstrap."""
    gold_a, pa, pb = np.asarray(gold), np.asarray(pred_a), np.asarray(pred_b)
    n = gold_a.size
    if n == 0:
        return {"difference": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}

    def f1(g, p):
        return f1_score(g, p, labels=list(labels), average="macro", zero_division=0)

    f1_a, f1_b = f1(gold_a, pa), f1(gold_a, pb)
    diff = f1_a - f1_b
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    for i in range(n_boot):
        idx = rng.integers(0, n, n)
        boots[i] = f1(gold_a[idx], pa[idx]) - f1(gold_a[idx], pb[idx])
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {
        "difference": float(diff),
        "lo": float(lo),
        "hi": float(hi),
        "n": int(n),
        "a": float(f1_a),
        "b": float(f1_b),
    }


def bootstrap_mean_difference(
    a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0
) -> dict[str, float]:
    """Mean of the paired differences ``a - b``, with a 95% percentile bootstrap interval."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0:
        return {"difference": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}
    rng = np.random.default_rng(seed)
    boots = [d[rng.integers(0, d.size, d.size)].mean() for _ in range(n_boot)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"difference": float(d.mean()), "lo": float(lo), "hi": float(hi), "n": int(d.size)}


def paired_comparison(
    a: Mapping[str, Mapping[str, Any]],
    b: Mapping[str, Mapping[str, Any]],
    labels: Sequence[str],
    n_boot: int = 2000,
) -> dict[str, Any]:
    """Compare two runs' values on the sample keys they share (targets must agree)."""
    keys = sorted(set(a) & set(b))
    for k in keys:
        if a[k]["target"] != b[k]["target"]:
            raise ValueError(f"sample {k}: targets differ between the runs being paired")
    ca = [int(a[k]["prediction"] == a[k]["target"]) for k in keys]
    cb = [int(b[k]["prediction"] == b[k]["target"]) for k in keys]
    out = mcnemar_exact(ca, cb) if keys else {"n": 0, "a_only": 0, "b_only": 0, "p_value": math.nan}
    boot = bootstrap_macro_f1_difference(
        [a[k]["target"] for k in keys],
        [a[k]["prediction"] for k in keys],
        [b[k]["prediction"] for k in keys],
        labels,
        n_boot=n_boot,
    )
    out.update(
        accuracy_a=float(np.mean(ca)) if ca else math.nan,
        accuracy_b=float(np.mean(cb)) if cb else math.nan,
        macro_f1_difference=boot["difference"],
        macro_f1_difference_lo=boot["lo"],
        macro_f1_difference_hi=boot["hi"],
    )
    return out


def bootstrap_difference(
    fn: Callable[[list[Any]], Mapping[str, float]],
    a: Sequence[Any],
    b: Sequence[Any],
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """``fn(a) - fn(b)`` for every number ``fn`` returns, with a 95% paired percentile bootstrap.

    ``a`` and ``b`` are per-sample values paired by position (the same samples in two runs);
    each resample draws sample positions with replacement and applies ``fn`` to both runs'
    values at those positions, so the interval is of the very function that made the numbers.
    Resamples where a number is undefined (NaN, e.g. no valid prediction drawn) are left out.
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
            d.update(lo=math.nan, hi=math.nan, n=0)
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
        d.update(lo=float(lo), hi=float(hi), n=n)
    return out
