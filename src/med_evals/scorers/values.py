"""Typed score values: what each label family's ``Score.value`` holds.

Every metric, the epoch reducer, the report and the regression gate read these dicts; the
reducer keeps one epoch's whole record (:mod:`med_evals.scorers.reducers`), so the fields of a
value always agree: ``valid`` iff ``prediction`` is a label, ``correct`` iff valid and equal to
``target``.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class LabelValue(TypedDict):
    """Shared by every labelled task."""

    #: a label of the family, ``INVALID`` (no single label) or ``ERROR`` (no reply)
    prediction: str
    target: str
    valid: bool
    #: set by the epoch reducer: share of epochs agreeing with the reduced prediction
    agreement: NotRequired[float]


class OutcomeValue(LabelValue):
    """Oncology: POSITIVE / NEGATIVE under the study's strict rule."""

    correct: int
    condition: str
    #: the trial's row in the dataset (pairs conditions for flip rates)
    trial: int
    exact_case: bool
    #: the lenient parse: the one label word the reply contains
    lenient: str


class EffectValue(LabelValue):
    """MedEvidence: the authors' grading of the Answer field (lenient reading beside it)."""

    correct: int
    condition: str
    evidence_quality: str
    lenient: str


class GenerationScores(TypedDict, total=False):
    """ROUGE-L and BERTScore of a reply; None: missing (no reply, or no reference), never 0."""

    rouge_l: float | None
    bertscore_f1: float | None
    bertscore_precision: float | None
    bertscore_recall: float | None


class Mentions(TypedDict, total=False):
    """MedREQAL Table 5: does the reply mention Cochrane, a review, a meta-analysis?"""

    cochrane: bool
    review: bool
    meta_analysis: bool


class VerdictValue(LabelValue, GenerationScores, Mentions, total=False):
    """MedREQAL / HealthFC: S/R/NEI, generation scores and Table 5's mention flags."""

    category: str
    strength: str
    #: the prompt variant, in a run of several (``-T prompt=all``); absent in a run of one
    condition: str
    no_reply: bool
    no_reference: bool


def score_value(value: LabelValue) -> dict[str, Any]:
    """A typed value as the plain dict ``Score(value=...)`` takes."""
    return dict(value)
