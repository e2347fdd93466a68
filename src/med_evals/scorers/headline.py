"""The headline metric: a study's chosen numbers, from its spec, under plain names.

One function per number: :meth:`med_evals.studies.Study.headline_values` computes every headline
number from the per-sample score values; this metric logs them, ``med-evals report`` prints
them and ``med-evals regress`` gates them, all through that one method.
"""

from __future__ import annotations

from inspect_ai.scorer import Metric, SampleScore, metric

from med_evals.scorers.classification import per_condition
from med_evals.studies import spec


@metric
def headline(task: str, label_set: str | None = None) -> Metric:
    """The study's headline numbers (per condition when a run holds several).

    Args:
        task: The study (``oncology_rct``, ``medevidence``, ``medreqal``, ``healthfc``).
        label_set: The label set in use where the study has several (MedEvidence ``labels``).
    """
    study = spec(task)
    args = {study.label_arg: label_set} if study.label_arg and label_set else {}

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        out = per_condition(scores, lambda v: study.headline_values(v, args), "headline")
        assert isinstance(out, dict)
        return out

    return compute
