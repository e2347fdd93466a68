"""The oncology study (Windisch et al. 2026): its parser, score value and every number.

One file, read top to bottom: the labels and the study's reply parser; the score value of a
reply; the numbers over valid predictions (:func:`binary_estimates`: accuracy and macro-F1 from
:mod:`med_evals.scorers.classification`, the one place they are computed, F1 of POSITIVE,
sensitivity, specificity; :func:`binary_summary`: their intervals); the headline
(:func:`headline_numbers`) and every number of one condition (:func:`summarize_condition`);
flip rates between conditions; the metrics Inspect logs and the study's metric set
(:func:`outcome_metrics`); the scorer.

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
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
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
    accuracy_codes,
    accuracy_valid,
    condition_metric,
    confusion_codes,
    encode,
    f1_per_label_codes,
    headline,
    macro_f1_valid,
    macro_of,
    valid_rate,
    valid_rate_of,
)
from med_evals.scorers.labels import ERROR, INVALID, LabelSet
from med_evals.scorers.score_table import rows_of, table_of
from med_evals.scorers.values import OutcomeValue, score_value
from med_evals.solvers.generate import GENERATE_ERROR
from med_evals.stats.intervals import (
    proportion_with_intervals,
    ratio,
    wald_interval,
    wilson_interval,
)
from med_evals.study.spec import Study

# --- labels and the study's parser -----------------------------------------------------------

#: The oncology study: was the trial's primary endpoint met?
TRIAL_OUTCOME = LabelSet("trial_outcome", ("POSITIVE", "NEGATIVE"), positive="POSITIVE")

_INVERSE = {"POSITIVE": "NEGATIVE", "NEGATIVE": "POSITIVE"}


def invert_outcome(label: str) -> str:
    """The counterfactual target: POSITIVE <-> NEGATIVE."""
    try:
        return _INVERSE[label]
    except KeyError:
        raise ValueError(f"cannot invert {label!r}: not POSITIVE or NEGATIVE") from None


def parse_outcome_strict(reply: str | None) -> str:
    """The study's own rule (``run_evaluation.py``): the reply, stripped and upper-cased, is
    exactly a label.

    ``ERROR`` only when the API returned no text: ``None``, or an empty string (the study's
    ``... if content else None`` turns it into ``None``). A reply of whitespace only is text: the
    study strips it to ``""`` and parses it ``INVALID``, as any other text that is not a label.
    """
    if not reply:
        return ERROR
    text = reply.strip().upper()
    return text if text in TRIAL_OUTCOME.labels else INVALID


def is_exact_case(reply: str | None) -> bool:
    """The reply, stripped, is a label exactly as instructed (all caps)."""
    return reply is not None and reply.strip() in TRIAL_OUTCOME.labels


_OUTCOME_WORD = re.compile(r"\b(POSITIVE|NEGATIVE)\b", re.IGNORECASE)


def parse_outcome_lenient(reply: str | None) -> str:
    """A lenient reading: exactly one of the two label words occurs (in any case).

    ``"**POSITIVE**"``, ``"POSITIVE."`` and ``"The trial was negative"`` parse; a reply naming
    both labels, or neither (whitespace only), is ``INVALID``; no text at all is ``ERROR``, as in
    the strict parse. Reported beside the strict parse, never instead.
    """
    if not reply:
        return ERROR
    found = {m.upper() for m in _OUTCOME_WORD.findall(reply)}
    return found.pop() if len(found) == 1 else INVALID


# --- the score value of a reply -----------------------------------------------------------


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


# --- the numbers ---------------------------------------------------------------------------


def binary_estimates(
    y_true: Sequence[str],
    y_pred: Sequence[str],
    labels: tuple[str, str] = ("POSITIVE", "NEGATIVE"),
) -> dict[str, Any]:
    """The oncology study's point values over valid predictions: accuracy, macro-F1 over
    [POSITIVE, NEGATIVE] (its analysis code's F1), F1 of ``labels[0]``, sensitivity
    (TP / (TP + FN)), specificity (TN / (TN + FP)) and the confusion counts (NaN for none).

    The one computation of these numbers: the logged metrics, their intervals
    (:func:`binary_summary`), the report and the regression gate all come from here.
    """
    n = len(y_true)
    if n == 0:
        cm = np.zeros((2, 2), dtype=int)
        acc = f1m = f1p = math.nan
    else:
        # integer codes (0: labels[0], 1: labels[1], any other value 2 or more: the one label
        # encoder, classification.encode): the same values as on the strings, without
        # scikit-learn's slow checks of string arrays
        t, p = encode(y_true, y_pred, labels[:2])
        if (t >= 2).any() or (p >= 2).any():
            raise ValueError(f"binary_estimates takes only {labels[0]} / {labels[1]} labels")
        cm = confusion_codes(t, p, 2)
        # accuracy and macro-F1 as every study's (:mod:`~med_evals.scorers.classification`);
        # macro-F1 and the F1 of labels[0] from one call of the F1 computation (the
        # regression gate's bootstrap calls this function twice per resample)
        acc = accuracy_codes(t, p)
        f1 = f1_per_label_codes(t, p, 2)
        f1m, f1p = macro_of(f1), float(f1[0])
    tp, fn, fp, tn = (int(x) for x in (cm[0, 0], cm[0, 1], cm[1, 0], cm[1, 1]))
    return {
        "n": n,
        "tp": tp,
        "fn": fn,
        "fp": fp,
        "tn": tn,
        "accuracy": acc,
        "macro_f1": f1m,
        "f1_positive": f1p,
        "sensitivity": ratio(tp, tp + fn),
        "specificity": ratio(tn, tn + fp),
    }


#: each estimate and the n of its interval
_INTERVAL_N = {
    "accuracy": lambda e: e["n"],
    "macro_f1": lambda e: e["n"],
    "f1_positive": lambda e: e["n"],
    "sensitivity": lambda e: e["tp"] + e["fn"],
    "specificity": lambda e: e["tn"] + e["fp"],
}


def binary_summary(
    y_true: Sequence[str],
    y_pred: Sequence[str],
    labels: tuple[str, str] = ("POSITIVE", "NEGATIVE"),
) -> dict[str, Any]:
    """:func:`binary_estimates` with 95% Wald (``<name>_wald``) and Wilson intervals.

    ``y_true`` and ``y_pred`` hold valid predictions only (labels from ``labels``).
    """
    out = binary_estimates(y_true, y_pred, labels)
    for name, size in _INTERVAL_N.items():
        out[f"{name}_wald"] = wald_interval(out[name], size(out))
        out[f"{name}_wilson"] = wilson_interval(out[name], size(out))
    return out


def valid_values(values: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [v for v in values if v["valid"]]


def headline_numbers(
    values: Sequence[Mapping[str, Any]], labels: Sequence[str] = TRIAL_OUTCOME.labels
) -> dict[str, float]:
    """The study's headline: macro-F1 and accuracy over valid predictions
    (:func:`binary_estimates`, the numbers
    :func:`summarize_condition` puts intervals on); the valid rate over all samples."""
    valid = valid_values(values)
    e = binary_estimates([v["target"] for v in valid], [v["prediction"] for v in valid])
    # the headline's order (the primary number first), as floats: what the log records
    return {
        "macro_f1_valid": float(e["macro_f1"]),
        "accuracy_valid": float(e["accuracy"]),
        "valid_rate": float(valid_rate_of(values)),
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


# --- flip rates --------------------------------------------------------------------------

# Flip rates: how often a trial's prediction changes between two oncology conditions.
#
# The paper defines the flip rate only for baseline vs counterfactual ("the proportion of trials
# for which the predicted label differed between the baseline and counterfactual inputs") and
# does not say what happens to invalid replies. Two denominators, both ours to choose:
#
# - default, **valid in both**: trials with a valid prediction (POSITIVE / NEGATIVE) in both
#   conditions; the others are counted as ``n_excluded``;
# - **all paired**: every trial with a reply in both conditions, an INVALID reply counted as an
#   outcome of its own (POSITIVE -> INVALID is a flip, INVALID -> INVALID is not). A provider
#   failure (ERROR: no reply) is missing, not an outcome: such trials are counted apart
#   (``n_error_excluded``).

#: Pairs reported whenever both conditions are in a run: the paper's baseline vs counterfactual,
#: and (ours, not defined in the paper) counterfactual vs counterfactual with the real DOI.
DEFAULT_FLIP_PAIRS = ("title_abstract:counterfactual", "counterfactual:counterfactual_doi")


def parse_pair(pair: str) -> tuple[str, str]:
    a, sep, b = pair.partition(":")
    if not sep or not a or not b:
        raise ValueError(f"a condition pair is written 'a:b', got {pair!r}")
    return a, b


def flip_rate(values: Iterable[Mapping[str, Any]], a: str, b: str) -> dict[str, Any]:
    """Share of trials whose prediction differs between conditions ``a`` and ``b``.

    ``p``, ``count``, ``n``, ``wald``, ``wilson``: over trials valid in both conditions
    (``n_excluded``: paired trials left out for an invalid or errored prediction in either).
    ``all_paired``: the same numbers over every trial with a reply in both conditions, INVALID
    an outcome of its own (``n_error_excluded``: paired trials left out for an ERROR).
    """
    by_cond = rows_of(list(values)).table.groups("condition")
    pa = {v["trial"]: v for v in (by_cond[a].values if a in by_cond else [])}
    pb = {v["trial"]: v for v in (by_cond[b].values if b in by_cond else [])}
    common = sorted(set(pa) & set(pb), key=str)
    both_valid = [t for t in common if pa[t]["valid"] and pb[t]["valid"]]
    flips = sum(pa[t]["prediction"] != pb[t]["prediction"] for t in both_valid)
    replied = [t for t in common if ERROR not in (pa[t]["prediction"], pb[t]["prediction"])]
    flips_all = sum(pa[t]["prediction"] != pb[t]["prediction"] for t in replied)
    out = proportion_with_intervals(flips, len(both_valid))
    out.update(
        pair=f"{a}:{b}",
        n_paired=len(common),
        n_excluded=len(common) - len(both_valid),
        all_paired=proportion_with_intervals(flips_all, len(replied)),
        n_error_excluded=len(common) - len(replied),
    )
    return out


@metric
def flip_rates(pairs: list[str] | None = None, detail: bool = True) -> Metric:
    """Share of trials whose prediction differs between two conditions, with intervals: over
    trials valid in both (``<a>~<b>``), and over all paired trials with a reply, INVALID an
    outcome of its own (``<a>~<b>/all_paired``).

    Args:
        pairs: Condition pairs ``"a:b"``; a pair is reported when both are in the run.
        detail: Also the intervals, counts and the all-paired rate (False: the rate only, as
            in the short metric set a run logs by default).
    """
    wanted = [parse_pair(p) for p in (pairs or DEFAULT_FLIP_PAIRS)]

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values = table_of(scores).rows()
        present = {v["condition"] for v in values}
        out: dict[str, float] = {}
        for a, b in wanted:
            if a in present and b in present:
                fr = flip_rate(values, a, b)
                key = f"{a}~{b}"
                out[key] = fr["p"]
                if not detail:
                    continue
                out[f"{key}/wald_lo"], out[f"{key}/wald_hi"] = fr["wald"]
                out[f"{key}/wilson_lo"], out[f"{key}/wilson_hi"] = fr["wilson"]
                out[f"{key}/n"] = fr["n"]
                ap = fr["all_paired"]
                out[f"{key}/all_paired"] = ap["p"]
                out[f"{key}/all_paired_wilson_lo"], out[f"{key}/all_paired_wilson_hi"] = ap[
                    "wilson"
                ]
                out[f"{key}/all_paired_n"] = ap["n"]
        return out

    return compute


# --- the metrics Inspect logs, and the study's set ---------------------------------------


def _summary(values: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`summarize_condition`, computed once per live refresh for all the metrics below
    (memoised on the condition's score table while its values are unchanged)."""
    rows = rows_of(values)
    return rows.table.memo("summary", lambda: summarize_condition(rows))  # type: ignore[no-any-return]


def _metric(fn: Callable[[dict[str, Any]], Any], name: str = "") -> Metric:
    """A metric applying ``fn`` to each condition's summary."""
    return condition_metric(lambda values: fn(_summary(values)), name)


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
    (default :data:`DEFAULT_FLIP_PAIRS`)."""
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
    (:func:`outcome_metrics` through :func:`~med_evals.study.task.study_task`)."""

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
