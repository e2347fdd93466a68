"""Epoch reduction that keeps each label record whole.

Inspect's default reducer averages numbers; a predicted label is a string, and a score value
here is a *record* whose fields must agree with each other (``valid`` iff ``prediction`` is a
label, ``correct`` iff valid and equal to ``target``). :func:`majority_label` therefore never
mixes fields from different epochs:

- the reduced label fields are **one epoch's whole record**: the epoch whose ``prediction`` is
  the most common across epochs; a tie goes to the tied prediction seen first (epoch order), and
  the record is that prediction's first epoch;
- float fields (ROUGE-L, BERTScore, ratings) are averaged over the epochs that produced them
  (``None`` in an epoch — no reply, no reference — is left out; all ``None`` stays ``None``);
- ``agreement`` is added: the share of epochs whose prediction equals the reduced one.

A score value without ``prediction`` (a judge's rating) keeps the first epoch's record with its
floats averaged the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from inspect_ai.scorer import Score, ScoreReducer, score_reducer


def _is_float(value: object) -> bool:
    return isinstance(value, float)


def majority_index(predictions: Sequence[object]) -> int:
    """The epoch whose prediction wins: most common, ties to the one seen first."""
    counts = Counter(predictions)
    best = max(counts.values())
    return next(i for i, p in enumerate(predictions) if counts[p] == best)


def _mean_floats(values: Sequence[Mapping[str, Any]], record: dict[str, Any]) -> None:
    """Replace each float field of ``record`` with its mean over the epochs that have one."""
    keys = {k for v in values for k, x in v.items() if _is_float(x)}
    for key in keys:
        xs = [v[key] for v in values if _is_float(v.get(key))]
        record[key] = sum(xs) / len(xs) if xs else None


def reduce_values(values: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], int]:
    """The reduced record of several epochs' dict values, and the epoch it was taken from."""
    if not values:
        raise ValueError("no score values to reduce")
    if "prediction" in values[0]:
        preds = [v.get("prediction") for v in values]
        chosen = majority_index(preds)
        record = dict(values[chosen])
        _mean_floats(values, record)
        record["agreement"] = sum(p == preds[chosen] for p in preds) / len(preds)
    else:
        chosen = 0
        record = dict(values[0])
        _mean_floats(values, record)
    return record, chosen


@score_reducer(name="majority_label")
def majority_label() -> ScoreReducer:
    """Majority label per sample: one epoch's whole record (ties: first seen); floats: mean."""

    def reduce(scores: list[Score]) -> Score:
        if not scores:
            raise ValueError("no scores to reduce")
        if len(scores) == 1:  # one epoch: nothing to reduce (Inspect reduces on every refresh)
            return scores[0]
        if not all(isinstance(s.value, Mapping) for s in scores):
            plain = [s.value for s in scores]
            if all(_is_float(v) for v in plain):
                return Score(value=sum(plain) / len(plain), answer=scores[0].answer)  # type: ignore[arg-type]
            i = majority_index(plain)
            return Score(value=plain[i], answer=scores[i].answer)
        record, i = reduce_values([s.value for s in scores])  # type: ignore[misc]
        chosen = scores[i]
        return Score(
            value=record,
            answer=chosen.answer,
            explanation=chosen.explanation,
            metadata={"epochs": len(scores), "epoch_chosen": i + 1, **(chosen.metadata or {})},
        )

    return reduce
