"""Classification statistics with the oncology study's definitions.

- Metrics are computed on valid predictions only (the study's rule); the valid rate is over
  all samples (invalid and errors in the denominator).
- F1 is macro-F1 over [POSITIVE, NEGATIVE] (scikit-learn ``average="macro"``), as in the study's
  analysis code; the F1 of the positive class is reported beside it.
- Sensitivity = TP / (TP + FN) and specificity = TN / (TN + FP), POSITIVE being the positive
  class.
- 95% intervals: the normal-approximation (Wald) interval the study used, clipped to [0, 1],
  with n = valid predictions for accuracy and F1, n = TP + FN for sensitivity and n = TN + FP
  for specificity; a Wilson score interval with the same p and n beside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support
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


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def binary_estimates(
    y_true: Sequence[str],
    y_pred: Sequence[str],
    labels: tuple[str, str] = ("POSITIVE", "NEGATIVE"),
) -> dict[str, Any]:
    """Point values over valid predictions: accuracy, macro-F1, F1 of ``labels[0]``,
    sensitivity, specificity and the confusion counts (NaN for no predictions).

    The one computation of these numbers: the logged metrics, their intervals
    (:func:`binary_summary`), the report and the regression gate all come from here.
    """
    n = len(y_true)
    if n == 0:
        cm = np.zeros((2, 2), dtype=int)
        acc = f1m = f1p = math.nan
    else:
        # integer codes (0: labels[0], 1: labels[1], 2: anything else): the same values as on
        # the strings, without scikit-learn's slow checks of string arrays
        codes = {labels[0]: 0, labels[1]: 1}
        t = np.fromiter((codes.get(x, 2) for x in y_true), dtype=np.int64, count=n)
        p = np.fromiter((codes.get(x, 2) for x in y_pred), dtype=np.int64, count=n)
        if (t == 2).any() or (p == 2).any():
            raise ValueError(f"binary_estimates takes only {labels[0]} / {labels[1]} labels")
        cm = confusion_matrix(t, p, labels=[0, 1])
        acc = float(accuracy_score(t, p))
        # per-class F1 in one call: macro-F1 is their mean (f1_score(average="macro")), the F1
        # of labels[0] is its entry (f1_score(pos_label=labels[0]))
        f1 = precision_recall_fscore_support(t, p, labels=[0, 1], average=None, zero_division=0)[2]
        f1m, f1p = float(np.mean(f1)), float(f1[0])
    tp, fn, fp, tn = (int(x) for x in (cm[0, 0], cm[0, 1], cm[1, 0], cm[1, 1]))
    return {
        "n": n,
        "tp": tp,
        "fn": fn,
        "fp": fp,
        "tn": tn,
        "accuracy": acc,
        "macro_f1": f1m,
        "f1_positive": f1p,
        "sensitivity": _ratio(tp, tp + fn),
        "specificity": _ratio(tn, tn + fp),
    }


#: each estimate and the n of its interval
_INTERVAL_N = {
    "accuracy": lambda e: e["n"],
    "macro_f1": lambda e: e["n"],
    "f1_positive": lambda e: e["n"],
    "sensitivity": lambda e: e["tp"] + e["fn"],
    "specificity": lambda e: e["tn"] + e["fp"],
}


def binary_summary(
    y_true: Sequence[str],
    y_pred: Sequence[str],
    labels: tuple[str, str] = ("POSITIVE", "NEGATIVE"),
) -> dict[str, Any]:
    """:func:`binary_estimates` with 95% Wald (``<name>_wald``) and Wilson intervals.

    ``y_true`` and ``y_pred`` hold valid predictions only (labels from ``labels``).
    """
    out = binary_estimates(y_true, y_pred, labels)
    for name, size in _INTERVAL_N.items():
        out[f"{name}_wald"] = wald_interval(out[name], size(out))
        out[f"{name}_wilson"] = wilson_interval(out[name], size(out))
    return out


def proportion_with_intervals(count: int, n: int) -> dict[str, Any]:
    p = _ratio(count, n)
    return {
        "p": p,
        "count": count,
        "n": n,
        "wald": wald_interval(p, n),
        "wilson": wilson_interval(p, n),
    }
