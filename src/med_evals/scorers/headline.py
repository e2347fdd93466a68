"""The headline metric: a study's chosen numbers, from its spec, under plain names.

One function per number: :meth:`med_evals.spec.Study.headline_values` computes every headline
number from the per-sample score values; this metric logs them, ``med-evals report`` prints
them and ``med-evals regress`` gates them, all through that one method. The task hands its
spec to the metric (:meth:`~med_evals.spec.Study.metric_set`): nothing here imports a study.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, cast

from inspect_ai.scorer import Metric, SampleScore, Score, metric

from med_evals._compat import registry_unqualified_name
from med_evals.scorers.classification import per_condition
from med_evals.spec import Study


@metric
def headline(study: Study | str, label_set: str | None = None) -> Metric:
    """The study's headline numbers (per condition when a run holds several).

    Args:
        study: The study's spec (logged as its task name; Inspect passes that name when it
            recreates the metric from a log, e.g. ``inspect score``).
        label_set: The label set in use where the study has several (MedEvidence ``labels``).
    """
    if isinstance(study, str):
        study = Study.named(study)
    args = {study.label_arg: label_set} if study.label_arg and label_set else {}

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, lambda v: study.headline_values(v, args), "headline")

    return compute


def metric_values(
    metrics: Sequence[Metric | dict[str, list[Metric]]], values: Mapping[str, Mapping[str, Any]],
    counts: bool = False,
) -> dict[str, float]:
    """``metrics`` computed over per-sample score values (sample id -> value), named as Inspect
    names them in a log: a metric returning a dict gives one entry per key.

    The report calls a scorer's full metric set through this, so it shows those numbers whether
    the run logged them (``-T metrics=full``) or only its headline. Every number is a float, as
    Inspect logs it; with ``counts``, a number the metric gave as an integer (a count: ``n``,
    ``judge_failures``) stays one, so a table prints ``12``, not ``12.000``.
    """
    scores = [SampleScore(score=Score(value=dict(v)), sample_id=sid) for sid, v in values.items()]
    out: dict[str, float] = {}

    def number(v: Any) -> float:
        return int(v) if counts and is_count(v) else float(v)

    for m in metrics:
        if not callable(m):
            raise TypeError("metric_values: per-key metric dicts are not supported")
        value = cast(Any, m)(scores)  # a Metric of SampleScores (ours all are)
        if isinstance(value, Mapping):
            out.update({str(k): number(v) for k, v in value.items() if v is not None})
        elif isinstance(value, int | float):
            out[registry_unqualified_name(m)] = number(value)
    return out


def is_count(value: Any) -> bool:
    """An integer (Python's or numpy's), not a boolean: a metric's count."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
