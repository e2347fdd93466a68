"""Trivial baselines: what predictors that never read the question score on the same samples.

Every number is the study's own headline function (:meth:`Study.headline_values`) on the
run's own samples, with each sample's prediction replaced (and the sample marked valid, so a
trivial predictor's valid rate is 1):

- **constant answers**: one row per label of the run's label set (``always SUPPORTED``,
  ``always POSITIVE``, ``always uncertain effect``...);
- **the majority class**: the constant answer of the gold label most common among these
  samples, named ``majority class (NOT ENOUGH INFORMATION)``; ours: a tie goes to the tied
  label first in the label set's order;
- **the uniform random predictor**: each sample's prediction drawn uniformly from the label
  set; ours: its row is the mean of each headline number over ``draws`` seeded draws (numpy
  ``default_rng(seed)``) through the same headline function, an estimate of its expected value
  (exact for none of the numbers but accuracy over all samples, whose expectation is 1/k for k
  labels: tests/test_trivial.py checks the estimate against it).

:func:`best_trivial` is the constant or majority row with the highest primary number (the
study's first headline), the row :func:`beats_trivial` tests a run against: ours, the run is
better than it beyond sampling noise when the 95% paired percentile bootstrap interval
(:func:`med_evals.stats.intervals.bootstrap_difference`) of ``run - trivial`` in the primary number
lies
wholly above zero: the rule by which ``med-evals regress`` calls a change "improved".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from med_evals.stats.intervals import bootstrap_difference

if TYPE_CHECKING:
    from med_evals.study.spec import Study, Values

DRAWS = 200


@dataclass(frozen=True)
class TrivialRow:
    """One trivial predictor's headline numbers over a run's samples."""

    name: str
    #: "constant", "majority" or "random"
    kind: str
    #: the label it always answers (None: the random predictor)
    prediction: str | None
    #: every headline number, by name (the random predictor: the mean over its draws)
    numbers: Mapping[str, float]
    #: how many draws the numbers are the mean of (1 for a constant answer)
    draws: int = 1


def with_prediction(values: Values, predictions: Sequence[str]) -> list[dict[str, Any]]:
    """``values`` with each sample's prediction replaced by the next of ``predictions``, marked
    valid (and ``correct``, ``lenient`` set to agree, where the values have them)."""
    out = []
    for v, pred in zip(values, predictions, strict=True):
        w = dict(v, prediction=pred, valid=True)
        if "correct" in w:
            w["correct"] = int(pred == w["target"])
        if "lenient" in w:
            w["lenient"] = pred
        out.append(w)
    return out


def constant_values(values: Values, label: str) -> list[dict[str, Any]]:
    """``values`` as the predictor always answering ``label`` would have them."""
    return with_prediction(values, [label] * len(values))


def majority_label(values: Values, labels: Sequence[str]) -> str | None:
    """The gold label most common among ``values``; a tie goes to the one first in
    ``labels`` (then to the first seen); None for no samples."""
    counts = Counter(v["target"] for v in values)
    if not counts:
        return None
    order = {label: i for i, label in enumerate(labels)}
    return max(counts, key=lambda t: (counts[t], -order.get(t, len(order))))


def random_numbers(
    study: Study, values: Values, task_args: Mapping[str, Any] | None = None,
    draws: int = DRAWS, seed: int = 0,
) -> dict[str, float]:
    """The mean of each headline number over ``draws`` uniform random predictions."""
    labels = study.labels(task_args)
    rng = np.random.default_rng(seed)
    sums: dict[str, list[float]] = {h.name: [] for h in study.headline}
    for _ in range(draws):
        picks = rng.integers(0, len(labels), len(values))
        numbers = study.headline_values(
            with_prediction(values, [labels[i] for i in picks]), task_args
        )
        for k, xs in sums.items():
            xs.append(numbers[k])
    return {k: float(np.nanmean(xs)) if not all(map(math.isnan, xs)) else math.nan
            for k, xs in sums.items()}


def trivial_rows(
    study: Study, values: Values, task_args: Mapping[str, Any] | None = None,
    draws: int = DRAWS, seed: int = 0,
) -> list[TrivialRow]:
    """The majority class, each constant answer in the label set's order, then the uniform
    random predictor, over one condition's ``values``."""
    labels = study.labels(task_args)
    rows = []
    majority = majority_label(values, labels)
    if majority is not None:
        rows.append(TrivialRow(
            f"majority class ({majority})", "majority", majority,
            study.headline_values(constant_values(values, majority), task_args),
        ))
    for label in labels:
        rows.append(TrivialRow(
            f"always {label}", "constant", label,
            study.headline_values(constant_values(values, label), task_args),
        ))
    if values:
        rows.append(TrivialRow(
            f"uniform random (mean of {draws} draws)", "random", None,
            random_numbers(study, values, task_args, draws, seed), draws,
        ))
    return rows


def best_trivial(study: Study, rows: Sequence[TrivialRow]) -> TrivialRow | None:
    """The constant or majority row with the highest primary number (the first such row on a
    tie: the majority row comes first); None when no row has one."""
    primary = study.headline[0].name
    fixed = [r for r in rows if r.prediction is not None and not math.isnan(r.numbers[primary])]
    return max(fixed, key=lambda r: r.numbers[primary], default=None)


def beats_trivial(
    study: Study, values: Values, trivial: TrivialRow,
    task_args: Mapping[str, Any] | None = None, n_boot: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """Whether the run (its ``values``) is better than the ``trivial`` row in the primary
    number beyond sampling noise: the run's number, the row's, their difference, its 95% paired
    bootstrap interval (``lo``, ``hi``), n, and ``beats``: True when ``lo > 0``, False when not,
    None when undefined (NaN)."""
    if trivial.prediction is None:
        raise ValueError("the random predictor's row is an expectation: no paired test")
    primary = study.headline[0].name

    def headline(vals: list[Any]) -> dict[str, float]:
        return study.headline_values(vals, task_args)

    boot = bootstrap_difference(
        headline, list(values), constant_values(values, trivial.prediction), n_boot, seed
    )[primary]
    undefined = any(math.isnan(boot[k]) for k in ("difference", "lo", "hi"))
    return {
        "metric": primary,
        "trivial": trivial.name,
        "run": boot["a"],
        "trivial_value": boot["b"],
        "difference": boot["difference"],
        "lo": boot["lo"],
        "hi": boot["hi"],
        "n": boot["n"],
        "beats": None if undefined else bool(boot["lo"] > 0),
    }
