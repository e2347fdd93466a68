"""Classification metrics shared by every labelled task, computed with scikit-learn.

They read dict score values with ``prediction`` (a label, ``INVALID`` or ``ERROR``), ``target``
and ``valid``, plus an optional ``condition``: a run holding several conditions gets one value
per condition (keys ``<condition>/<metric>``), a run with one condition plain numbers. Names say
over which samples a metric is computed:

- ``*_all``: every sample; an invalid or errored reply counts as wrong (a miss for its gold
  label in macro-F1, a false positive for no label);
- ``*_valid``: only samples whose reply parsed to a label.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, metric
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

from med_evals.scorers.labels import ERROR, INVALID

Value = Mapping[str, Any]


def score_dicts(scores: Sequence[SampleScore]) -> list[Value]:
    out = []
    for s in scores:
        if not isinstance(s.score.value, Mapping):
            raise ValueError(
                f"classification metrics need dict score values, got {s.score.value!r}"
            )
        out.append(s.score.value)
    return out


def by_group(values: Sequence[Value], key: str = "condition") -> dict[str, list[Value]]:
    groups: dict[str, list[Value]] = defaultdict(list)
    for v in values:
        groups[str(v.get(key, ""))].append(v)
    return dict(groups)


def per_condition(
    scores: Sequence[SampleScore], fn: Callable[[list[Value]], Any], name: str
) -> float | dict[str, float]:
    """``fn`` per condition: plain for one condition, keyed ``<condition>/<name|key>`` else."""
    groups = by_group(score_dicts(scores))
    results = {g: fn(vals) for g, vals in groups.items()}
    if len(results) == 1:
        return next(iter(results.values()))
    flat: dict[str, float] = {}
    for g, res in results.items():
        if isinstance(res, Mapping):
            flat.update({f"{g}/{k}": v for k, v in res.items()})
        else:
            flat[f"{g}/{name}"] = res
    return flat


def accuracy_of(values: Sequence[Value], valid_only: bool) -> float:
    vals = [v for v in values if v["valid"]] if valid_only else list(values)
    if not vals:
        return math.nan
    return float(accuracy_score([v["target"] for v in vals], [v["prediction"] for v in vals]))


def macro_f1_of(values: Sequence[Value], labels: Sequence[str], valid_only: bool) -> float:
    vals = [v for v in values if v["valid"]] if valid_only else list(values)
    if not vals:
        return math.nan
    return float(
        f1_score(
            [v["target"] for v in vals],
            [v["prediction"] for v in vals],
            labels=list(labels),
            average="macro",
            zero_division=0,
        )
    )


def counts_of(values: Sequence[Value], labels: Sequence[str]) -> dict[str, int]:
    """Predicted-label counts, then invalid and error counts, then the total."""
    c = Counter(v["prediction"] for v in values)
    out = {label: c.get(label, 0) for label in labels}
    out[INVALID] = c.get(INVALID, 0)
    out[ERROR] = c.get(ERROR, 0)
    out["total"] = len(values)
    return out


def confusion_of(values: Sequence[Value], labels: Sequence[str]) -> dict[str, int]:
    """``gold>predicted`` counts over all samples; INVALID and ERROR are predicted columns."""
    cols = [*labels, INVALID, ERROR]
    if not values:
        return {}
    cm = confusion_matrix(
        [v["target"] for v in values], [v["prediction"] for v in values], labels=cols
    )
    return {f"{g}>{p}": int(cm[i, j]) for i, g in enumerate(labels) for j, p in enumerate(cols)}


@metric
def accuracy_all() -> Metric:
    """Accuracy over all samples; an invalid or errored reply is wrong."""

    def compute(scores: list[SampleScore]) -> float | dict[str, float]:
        return per_condition(scores, lambda v: accuracy_of(v, False), "accuracy_all")

    return compute


@metric
def accuracy_valid() -> Metric:
    """Accuracy over samples whose reply parsed to a label."""

    def compute(scores: list[SampleScore]) -> float | dict[str, float]:
        return per_condition(scores, lambda v: accuracy_of(v, True), "accuracy_valid")

    return compute


@metric
def macro_f1_all(labels: list[str]) -> Metric:
    """Macro-F1 over ``labels``, all samples (invalid replies are misses)."""

    def compute(scores: list[SampleScore]) -> float | dict[str, float]:
        return per_condition(scores, lambda v: macro_f1_of(v, labels, False), "macro_f1_all")

    return compute


@metric
def macro_f1_valid(labels: list[str]) -> Metric:
    """Macro-F1 over ``labels``, samples whose reply parsed to a label."""

    def compute(scores: list[SampleScore]) -> float | dict[str, float]:
        return per_condition(scores, lambda v: macro_f1_of(v, labels, True), "macro_f1_valid")

    return compute


@metric
def valid_rate() -> Metric:
    """Share of all samples whose reply parsed to a label."""

    def compute(scores: list[SampleScore]) -> float | dict[str, float]:
        return per_condition(
            scores, lambda v: sum(bool(x["valid"]) for x in v) / len(v), "valid_rate"
        )

    return compute


@metric
def label_counts(labels: list[str]) -> Metric:
    """How often each label was predicted, and how many replies were invalid or errors."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, lambda v: counts_of(v, labels), "label_counts")

    return compute


@metric
def confusion_counts(labels: list[str]) -> Metric:
    """The confusion matrix as ``gold>predicted`` counts (INVALID / ERROR columns included)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, lambda v: confusion_of(v, labels), "confusion")

    return compute


@metric
def by_field(field: str, labels: list[str]) -> Metric:
    """Accuracy (all samples) and macro-F1 (all samples) for each value of ``field``."""

    def fn(values: list[Value]) -> dict[str, float]:
        out: dict[str, float] = {}
        for value, group in sorted(by_group(values, field).items()):
            out[f"{field}={value}/accuracy_all"] = accuracy_of(group, False)
            out[f"{field}={value}/macro_f1_all"] = macro_f1_of(group, labels, False)
            out[f"{field}={value}/n"] = len(group)
        return out

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, fn, f"by_{field}")

    return compute


def classification_metrics(labels: Sequence[str], fields: Sequence[str] = ()) -> list[Metric]:
    """The standard set: accuracy and macro-F1 over all and over valid, counts, confusion."""
    labels = list(labels)
    return [
        accuracy_all(),
        accuracy_valid(),
        macro_f1_all(labels),
        macro_f1_valid(labels),
        valid_rate(),
        label_counts(labels),
        confusion_counts(labels),
        *(by_field(f, labels) for f in fields),
    ]
