"""Classification metrics for the S/R/NEI verdict scorer (MedREQAL Tables 2 and 3).

Accuracy and macro-F1 over all samples and over valid ones are the shared metrics of
:mod:`med_evals.scorers.classification` (one registry name each for every task). Each metric
here reads ``Score.value`` (a dict with ``prediction``, ``target``, ``valid`` and,
where the dataset has them, ``category`` and ``strength``), so it works unchanged after epoch
reduction. Names say over which samples a metric is computed:

- ``*_all``: every sample; an invalid reply (or no reply) counts as wrong. The paper's setting.
- ``*_valid``: only samples whose reply stated exactly one label.

Macro-F1 averages the F1 of the three labels (scikit-learn, ``zero_division=0``); a prediction
that is not a label is a miss for its gold label and a false positive for no label.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, metric

from med_evals.scorers.classification import accuracy_by_codes, macro_f1_by_codes
from med_evals.scorers.labels import ERROR, INVALID
from med_evals.scorers.score_table import Table, rows_of, table_of

# the three labels in the order used everywhere (kept here so metrics need no scorer import)
LABELS = ("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION")
_KEY = {
    "SUPPORTED": "supported",
    "REFUTED": "refuted",
    "NOT ENOUGH INFORMATION": "nei",
    INVALID: "invalid",
    ERROR: "error",
}


def _table_pairs(table: Table) -> tuple[list[str], list[str]]:
    """:func:`_pairs` of every value, from the scores' table."""
    gold = table.column(("str", "target"), lambda v: str(v["target"]))
    pred = table.column(("str", "prediction"), lambda v: str(v["prediction"]))
    return gold, pred


@metric
def predicted_label_counts() -> Metric:
    """How often each label was predicted, and how many replies were invalid or missing.

    Keys: ``predicted_supported``, ``predicted_refuted``, ``predicted_nei``,
    ``predicted_invalid``, ``predicted_error`` (the paper's Table 3 plus the replies it could not
    count).
    """

    def compute(scores: list[SampleScore]) -> dict[str, int]:
        table = table_of(scores)
        pred = _table_pairs(table)[1]
        counts = table.memo("predicted_counts", lambda: Counter(pred))
        return {f"predicted_{key}": counts.get(label, 0) for label, key in _KEY.items()}

    return compute


@metric
def confusion_matrix() -> Metric:
    """Counts of gold label x predicted label, flattened: ``gold_nei_pred_supported``.

    Columns include ``invalid`` and ``error``, so every sample is counted once.
    """

    def compute(scores: list[SampleScore]) -> dict[str, int]:
        counts = Counter(zip(*_table_pairs(table_of(scores)), strict=True))
        return {
            f"gold_{_KEY[g]}_pred_{_KEY[p]}": counts.get((g, p), 0) for g in LABELS for p in _KEY
        }

    return compute


def slug(text: str) -> str:
    """``'Cognitive and mental health'`` -> ``cognitive_and_mental_health``."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def by_group(values: Sequence[Mapping[str, Any]], key: str, kind: str) -> dict[str, float]:
    """``kind`` (``accuracy`` or ``macro_f1``, all samples) within each value of ``key``;
    samples without the field (HealthFC has no category or strength) are left out. The one
    function behind the logged per-category and per-strength metrics and the report's figure."""
    by_codes = _BY_CODES[kind]
    table = rows_of(values).table
    names, codes = table.group_codes(key)
    kept = table.memo(("kept", key), lambda: np.flatnonzero(codes >= 0))
    if not len(kept):
        return {}
    g = table.codes("target", LABELS, as_str=True)[kept]
    p = table.codes("prediction", LABELS, as_str=True)[kept]
    return by_codes(names, codes[kept], g, p)


def _macro_f1_by_codes(
    names: Sequence[str], group_codes: np.ndarray, g: np.ndarray, p: np.ndarray
) -> dict[str, float]:
    return macro_f1_by_codes(names, group_codes, g, p, len(LABELS))


_BY_CODES: dict[str, Callable[..., dict[str, float]]] = {
    "accuracy": accuracy_by_codes,
    "macro_f1": _macro_f1_by_codes,
}


def _by_group(key: str, kind: str) -> Metric:
    """Per value of ``key``: ``{kind}_{key}_{slug(value)}`` (Inspect flattens metric dicts)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values = by_group(table_of(scores).rows(), key, kind)
        return {f"{kind}_{key}_{slug(g)}": values[g] for g in sorted(values)}

    return compute


@metric
def accuracy_by_category() -> Metric:
    """Accuracy (all samples) within each health category."""
    return _by_group("category", "accuracy")


@metric
def macro_f1_by_category() -> Metric:
    """Macro-F1 (all samples) within each health category."""
    return _by_group("category", "macro_f1")


@metric
def accuracy_by_strength() -> Metric:
    """Accuracy (all samples) within each strength of evidence (LOW / MEDIUM / HIGH)."""
    return _by_group("strength", "accuracy")


@metric
def macro_f1_by_strength() -> Metric:
    """Macro-F1 (all samples) within each strength of evidence (LOW / MEDIUM / HIGH)."""
    return _by_group("strength", "macro_f1")
