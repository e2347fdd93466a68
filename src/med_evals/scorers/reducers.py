"""Epoch reducers that keep labels intact.

Inspect's default reducer averages numbers; a predicted label is a string and must survive
epoch reduction as a label. :func:`majority_label` reduces a dict-valued score key by key: the
most common value across epochs, ties going to the value seen first (epoch order); float values
(ROUGE-L, BERTScore, ratings) take the mean instead. It adds ``agreement``: the share of epochs
whose ``prediction`` equals the reduced one.
"""

from __future__ import annotations

from collections import Counter

from inspect_ai.scorer import Score, ScoreReducer, score_reducer


def _mode(values: list) -> object:
    if values and all(isinstance(v, float) for v in values):
        return sum(values) / len(values)
    counts = Counter(values)
    best = max(counts.values())
    return next(v for v in values if counts[v] == best)  # first seen among the most common


@score_reducer(name="majority_label")
def majority_label() -> ScoreReducer:
    """Majority vote per key of a dict-valued score (ties: first epoch's value; floats: mean)."""

    def reduce(scores: list[Score]) -> Score:
        if not scores:
            raise ValueError("no scores to reduce")
        if len(scores) == 1:  # one epoch: nothing to reduce (Inspect reduces on every refresh)
            return scores[0]
        first = scores[0]
        if not isinstance(first.value, dict):
            return Score(value=_mode([s.value for s in scores]), answer=first.answer)
        keys = list(first.value.keys())
        value = {k: _mode([s.value.get(k) for s in scores]) for k in keys}
        if "prediction" in value:
            preds = [s.value.get("prediction") for s in scores]
            value["agreement"] = sum(p == value["prediction"] for p in preds) / len(preds)
        chosen = next(
            (s for s in scores if s.value.get("prediction") == value.get("prediction")), first
        )
        return Score(
            value=value,
            answer=chosen.answer,
            explanation=chosen.explanation,
            metadata={"epochs": len(scores), **(chosen.metadata or {})},
        )

    return reduce
