"""Scoring of the oncology study: POSITIVE / NEGATIVE, the study's strict validity rule.

Each sample's score value keeps everything the metrics need, so it survives epoch reduction
(with :func:`~med_evals.scorers.reducers.majority_label`) and re-scoring from a log:

``prediction``  strict parse (the study's rule): POSITIVE, NEGATIVE, INVALID or ERROR
``valid``       prediction is POSITIVE or NEGATIVE
``target``      expected label (inverted for counterfactual conditions)
``correct``     1 if valid and equal to the target, else 0
``condition``   the input condition
``trial``       the trial's row index in the dataset (pairs conditions for flip rates)
``exact_case``  the stripped reply is exactly ``POSITIVE`` or ``NEGATIVE`` (case as instructed)
``lenient``     lenient parse: the one label word the reply contains, else INVALID / ERROR

Metrics are computed per condition; a run with one condition shows plain numbers, a run with
several shows one value per condition under each metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    metric,
    scorer,
)
from inspect_ai.solver import TaskState

from med_evals.scorers.classification import (
    accuracy_valid,
    binary_estimates,
    binary_summary,
    macro_f1_valid,
    per_condition,
    valid_rate,
    valid_rate_of,
)
from med_evals.scorers.headline import headline
from med_evals.scorers.labels import (
    ERROR,
    TRIAL_OUTCOME,
    is_exact_case,
    parse_outcome_lenient,
    parse_outcome_strict,
)
from med_evals.scorers.oncology_flips import flip_rates
from med_evals.scorers.score_table import rows_of
from med_evals.scorers.values import OutcomeValue, score_value
from med_evals.solvers.generate import GENERATE_ERROR
from med_evals.study import Study


def outcome_value(
    reply: str | None, target: str, condition: str, trial: int, error: str | None = None
) -> OutcomeValue:
    """The score value for one reply (``error`` set: a provider failure, scored ERROR)."""
    if error is not None:
        reply = None
    prediction = parse_outcome_strict(reply)
    valid = TRIAL_OUTCOME.is_label(prediction)
    return {
        "prediction": prediction,
        "valid": valid,
        "target": target,
        "correct": int(valid and prediction == target),
        "condition": condition,
        "trial": trial,
        "exact_case": is_exact_case(reply),
        "lenient": parse_outcome_lenient(reply),
    }


def valid_values(values: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [v for v in values if v["valid"]]


def headline_numbers(
    values: Sequence[Mapping[str, Any]], labels: Sequence[str] = TRIAL_OUTCOME.labels
) -> dict[str, float]:
    """The study's headline: macro-F1 and accuracy over valid predictions
    (:func:`~med_evals.scorers.classification.binary_estimates`, the numbers
    :func:`summarize_condition` puts intervals on); the valid rate over all samples."""
    valid = valid_values(values)
    e = binary_estimates([v["target"] for v in valid], [v["prediction"] for v in valid])
    return {
        "valid_rate": valid_rate_of(values),
        "accuracy_valid": e["accuracy"],
        "macro_f1_valid": e["macro_f1"],
    }


def summarize_condition(values: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every number of one condition, from its score values."""
    n_total = len(values)
    valid = valid_values(values)
    lenient = [v for v in values if TRIAL_OUTCOME.is_label(v["lenient"])]
    strict = binary_summary([v["target"] for v in valid], [v["prediction"] for v in valid])
    loose = binary_summary([v["target"] for v in lenient], [v["lenient"] for v in lenient])
    n_error = sum(v["prediction"] == ERROR for v in values)
    return {
        "n_total": n_total,
        "n_valid": len(valid),
        "n_invalid": n_total - len(valid) - n_error,
        "n_error": n_error,
        "valid_rate": valid_rate_of(values),
        "n_exact_case": sum(bool(v["exact_case"]) for v in values),
        "exact_case_rate": (
            sum(bool(v["exact_case"]) for v in values) / n_total if n_total else math.nan
        ),
        "strict": strict,
        "lenient": {
            "n_valid": len(lenient),
            "valid_rate": len(lenient) / n_total if n_total else math.nan,
            **loose,
        },
    }


def _summary(values: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`summarize_condition`, computed once per live refresh for all the metrics below
    (memoised on the condition's score table while its values are unchanged)."""
    rows = rows_of(values)
    return rows.table.memo("summary", lambda: summarize_condition(rows))  # type: ignore[no-any-return]


def _metric(fn: Callable[[dict[str, Any]], Any], name: str = "") -> Metric:
    """A metric applying ``fn`` to each condition's summary."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, lambda values: fn(_summary(values)), name)

    return compute


def _strict(key: str, name: str) -> Metric:
    return _metric(lambda s: s["strict"][key], name)


@metric
def f1_positive_valid() -> Metric:
    """F1 of the POSITIVE class over valid predictions."""
    return _strict("f1_positive", "f1_positive_valid")


@metric
def sensitivity_valid() -> Metric:
    """TP / (TP + FN) over valid predictions, POSITIVE as the positive class."""
    return _strict("sensitivity", "sensitivity_valid")


@metric
def specificity_valid() -> Metric:
    """TN / (TN + FP) over valid predictions."""
    return _strict("specificity", "specificity_valid")


@metric
def counts() -> Metric:
    """Sample counts: total, valid, invalid, error, exact-case and lenient-valid."""
    return _metric(
        lambda s: {
            "n_total": s["n_total"],
            "n_valid": s["n_valid"],
            "n_invalid": s["n_invalid"],
            "n_error": s["n_error"],
            "n_exact_case": s["n_exact_case"],
            "n_valid_lenient": s["lenient"]["n_valid"],
        },
    )


@metric
def confusion() -> Metric:
    """The 2x2 confusion matrix of valid predictions (rows: target; POSITIVE first)."""
    return _metric(lambda s: {k: s["strict"][k] for k in ("tp", "fn", "fp", "tn")})


@metric
def intervals_95() -> Metric:
    """95% Wald (the study's) and Wilson intervals of each metric over valid predictions."""

    def fn(s: dict[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in ("accuracy", "macro_f1", "f1_positive", "sensitivity", "specificity"):
            for kind in ("wald", "wilson"):
                lo, hi = s["strict"][f"{name}_{kind}"]
                out[f"{name}_{kind}_lo"] = lo
                out[f"{name}_{kind}_hi"] = hi
        return out

    return _metric(fn)


@metric
def lenient_parse() -> Metric:
    """Accuracy and macro-F1 under the lenient parse (one label word), beside the strict."""
    return _metric(
        lambda s: {
            "accuracy_lenient": s["lenient"]["accuracy"],
            "macro_f1_lenient": s["lenient"]["macro_f1"],
            "valid_rate_lenient": s["lenient"]["valid_rate"],
        },
    )


def outcome_metrics(
    study: Study,
    full: bool = True,
    label_set: str | None = None,
    flip_pairs: Sequence[str] | None = None,
) -> list[Metric | dict[str, list[Metric]]]:
    """The metric set of the oncology tasks: ``study``'s headline first, then (``full``) the
    intervals, counts, confusion cells and lenient parse, then the flip rates of ``flip_pairs``
    (default :data:`~med_evals.scorers.oncology_flips.DEFAULT_FLIP_PAIRS`)."""
    pairs = list(flip_pairs) if flip_pairs else None
    if not full:
        return [headline(study), flip_rates(pairs, detail=False)]
    return [
        headline(study),
        f1_positive_valid(),
        sensitivity_valid(),
        specificity_valid(),
        counts(),
        confusion(),
        intervals_95(),
        lenient_parse(),
        flip_rates(pairs),
    ]


@scorer(metrics=[macro_f1_valid(list(TRIAL_OUTCOME.labels)), accuracy_valid(), valid_rate()])
def trial_outcome() -> Scorer:
    """Score a POSITIVE / NEGATIVE reply with the study's strict rule (lenient beside it).

    The study's task replaces the metrics declared here with its spec's set
    (:func:`outcome_metrics` through :meth:`~med_evals.study.Study.make_scorer`)."""

    async def score(state: TaskState, target: Target) -> Score:
        error = state.metadata.get(GENERATE_ERROR) or state.output.error
        reply = None if error else state.output.completion
        value = outcome_value(
            reply,
            target=target.text,
            condition=state.metadata["condition"],
            trial=state.metadata["trial"],
            error=error,
        )
        return Score(
            value=score_value(value),
            answer=value["prediction"],
            explanation=reply if error is None else f"provider error: {error}",
        )

    return score
