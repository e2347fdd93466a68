"""Abstention: a reply that declines to commit to an answer, counted as such.

MedREQAL and HealthFC offer NOT ENOUGH INFORMATION beside SUPPORTED and REFUTED; MedEvidence
offers "uncertain effect" and "insufficient data" (five classes) or "uncertain" (three) beside a
direction. Each study names its abstaining labels per label set in its spec
(:attr:`med_evals.study.spec.Study.abstaining`). Every reply is then one of three things:

- **committed**: a label of the label set that is not an abstention (S or R; higher, lower, no
  difference);
- **abstained**: an abstaining label;
- **neither**: no label (``INVALID``) or no reply (``ERROR``). Such a reply neither answers nor
  declines (ours): it is not covered, it is no abstention, and it stays in every denominator
  over all samples.

From these, over one condition's values (:func:`abstention_of`):

- ``coverage``: committed replies / all samples (selective prediction's coverage);
- ``selective_accuracy``: correct committed replies / committed replies (accuracy on the
  answers the model stood by; NaN when it committed to none);
- ``abstention_recall``: abstained replies / samples whose gold label is an abstaining one
  (AbstentionBench's recall: the share of questions where abstaining is right on which the model
  abstained; a five-class MedEvidence reply "insufficient data" to a gold "uncertain effect" is
  an abstention there, though the wrong class);
- ``over_abstention``: abstained replies / samples whose gold label is a committed one (the
  share of questions the review answered on which the model declined);
- ``n_committed``, ``n_abstained``: the counts behind them.

Definitions and sources: docs/numbers.md, "Abstention".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, metric

from med_evals.scorers.classification import Value, accuracy_codes, per_condition
from med_evals.scorers.score_table import rows_of

#: the logged keys, in the order the report and ``med-evals diff`` show them
RATES = ("coverage", "selective_accuracy", "abstention_recall", "over_abstention")
COUNTS = ("n_committed", "n_abstained")
#: how the report and ``diff`` name each rate
DISPLAY = {
    "coverage": "coverage",
    "selective_accuracy": "selective accuracy",
    "abstention_recall": "abstention recall",
    "over_abstention": "over-abstention",
}


def _share(part: int, whole: int) -> float:
    return part / whole if whole else math.nan


def abstention_of(
    values: Sequence[Value], labels: Sequence[str], abstaining: Sequence[str]
) -> dict[str, float]:
    """Coverage, selective accuracy, abstention recall and over-abstention of one condition's
    values (see the module's docstring), and the committed and abstained counts; the rates are
    NaN where their denominator is empty."""
    table = rows_of(values).table
    k = len(labels)
    gold = table.codes("target", labels)
    pred = table.codes("prediction", labels)
    abstain_codes = [list(labels).index(a) for a in abstaining]
    abstained = np.isin(pred, abstain_codes)
    committed = (pred < k) & ~abstained
    gold_abstains = np.isin(gold, abstain_codes)
    return {
        "coverage": _share(int(committed.sum()), len(pred)),
        "selective_accuracy": accuracy_codes(gold[committed], pred[committed]),
        "abstention_recall": _share(int((abstained & gold_abstains).sum()),
                                    int(gold_abstains.sum())),
        "over_abstention": _share(int((abstained & ~gold_abstains).sum()),
                                  int((~gold_abstains).sum())),
        "n_committed": int(committed.sum()),
        "n_abstained": int(abstained.sum()),
    }


@metric
def abstention(labels: list[str], abstaining: list[str]) -> Metric:
    """:func:`abstention_of` per condition: ``labels`` the run's label set, ``abstaining`` those
    of them that are an abstention."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, lambda v: abstention_of(v, labels, abstaining),
                             "abstention")

    return compute
