"""Every custom metric and epoch reducer of the package through the field's gates
(``pytest_inspect_evals.metrics``): a real eval on mockllm whose scorer replays per-epoch score
values, reduced by the reducer the task pins, then the metrics as Inspect runs them.

Two checks per metric set, each set the one its task logs (``Study.metric_set(full=True)``, a
scorer's declared metrics), its score values made by the studies' own value functions
(``outcome_value``, ``effect_value``, ``verdict_value`` and the generation scores,
``rewrite._value``) or shaped as the judges write them:

- ``assert_agreeing_epochs_change_nothing``: three equal epochs, under the task's reducer, give
  the values of one epoch with no reduction at all (the scorer's own values);
- ``run_metrics`` over disagreeing epochs: each metric's values computed here by hand from what
  the reducer must keep (:func:`~med_evals.scorers.reducers.majority_label`: one epoch's whole
  label record, the most common prediction's first epoch; its floats averaged over the epochs
  that have one; a record without a prediction, a judge's, is its first epoch's;
  :func:`~med_evals.scorers.rewrite.first_accepted`: the first accepted epoch, else the first).

The replies are chosen so that a reducer taking the first epoch, the last, or mixing fields of
several would give other numbers (each case's comment says where).
"""

from __future__ import annotations

import ast
import functools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from inspect_ai.model import ModelAPI
from inspect_ai.scorer import accuracy, mean
from pytest_inspect_evals.metrics import assert_agreeing_epochs_change_nothing, run_metrics

from med_evals.inspect_internals.compat import (
    registry_unqualified_name,
)
from med_evals.scorers.classification import accuracy_all, macro_f1_all, valid_rate
from med_evals.scorers.generation import NO_SCORES, evidence_mentions_in
from med_evals.scorers.judges import (
    JUDGE_FAILURE,
    NO_REPLY,
    TIE,
    agreement_shares,
    detectability,
    plausibility_summary,
)
from med_evals.scorers.medevidence import effect_value
from med_evals.scorers.medreqal import NEI, REFUTED, SUPPORTED, VERDICT, verdict_value
from med_evals.scorers.oncology_rct import outcome_value
from med_evals.scorers.reducers import majority_label
from med_evals.scorers.rewrite import (
    ACCEPTED,
    ERROR,
    REJECTED,
    _value,
    build_summary,
    first_accepted,
)
from med_evals.tasks import STUDIES

from ..conftest import REPO

Z = statistics.NormalDist().inv_cdf(0.975)

#: each check runs real evals (about 0.3 s each on a quiet 2-core machine; 10 s the file)
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _offline_token_counts(monkeypatch):
    """The helper's eval calls mockllm/model's default output, whose usage Inspect counts with
    tiktoken's o200k_base, downloaded on first use: offline, a count of characters instead."""

    async def count_text_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    monkeypatch.setattr(ModelAPI, "count_text_tokens", count_text_tokens)


def wald(p: float, n: int) -> tuple[float, float]:
    se = math.sqrt(p * (1 - p) / n)
    return max(0.0, p - 1.96 * se), min(1.0, p + 1.96 * se)


def wilson(count: int, n: int) -> tuple[float, float]:
    p = count / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return centre - half, centre + half


@dataclass(frozen=True)
class Case:
    """A metric set, per-sample epochs of score values, and the reducer its task pins."""

    metrics: Callable[[], list[Any]]
    epochs: Sequence[Sequence[Mapping[str, Any] | Any]]
    reducer: Callable[[], Any] = majority_label


# --- the oncology study: two conditions (flip rates), four trials ------------------------------

TA, CF = "title_abstract", "counterfactual"


def oncology_epochs() -> list[list[dict[str, Any]]]:
    # title_abstract: t2's majority is its 2nd epoch (the 1st, "positive", is POSITIVE but not
    # exact case); t3's is INVALID (1st epoch: lenient NEGATIVE); t1's and t4's last epoch
    # differs from the majority. counterfactual: t4's majority is ERROR (no reply twice).
    replies = {
        (TA, 1, "POSITIVE"): ["POSITIVE", "POSITIVE", "NEGATIVE"],
        (TA, 2, "NEGATIVE"): ["positive", "NEGATIVE", "NEGATIVE"],
        (TA, 3, "NEGATIVE"): ["The trial was NEGATIVE.", "NEGATIVE", "The trial was NEGATIVE."],
        (TA, 4, "POSITIVE"): ["NEGATIVE", "NEGATIVE", "POSITIVE"],
        (CF, 1, "NEGATIVE"): ["POSITIVE", "POSITIVE", "POSITIVE"],
        (CF, 2, "POSITIVE"): ["POSITIVE", "NEGATIVE", "POSITIVE"],
        (CF, 3, "POSITIVE"): ["NEGATIVE", None, "NEGATIVE"],
        (CF, 4, "NEGATIVE"): [None, None, "NEGATIVE"],
    }
    return [[dict(outcome_value(r, target, cond, trial)) for r in rs]
            for (cond, trial, target), rs in replies.items()]


def oncology_expected() -> dict[str, dict[str, float]]:
    # reduced (prediction, target): TA t1 P/P, t2 N/N, t3 INVALID/N, t4 N/P;
    #                               CF t1 P/N, t2 P/P, t3 N/P, t4 ERROR/N
    # TA valid: tp 1 (t1), fn 1 (t4), fp 0, tn 1 (t2); CF valid: tp 1 (t2), fn 1 (t3), fp 1 (t1)
    ta_acc_lo, ta_acc_hi = wald(2 / 3, 3)
    return {
        "headline": {
            f"{TA}/macro_f1_valid": 2 / 3, f"{TA}/accuracy_valid": 2 / 3, f"{TA}/valid_rate": 3 / 4,
            f"{CF}/macro_f1_valid": 1 / 4, f"{CF}/accuracy_valid": 1 / 3, f"{CF}/valid_rate": 3 / 4,
        },
        "f1_positive_valid": {f"{TA}/f1_positive_valid": 2 / 3, f"{CF}/f1_positive_valid": 1 / 2},
        "sensitivity_valid": {f"{TA}/sensitivity_valid": 1 / 2, f"{CF}/sensitivity_valid": 1 / 2},
        "specificity_valid": {f"{TA}/specificity_valid": 1.0, f"{CF}/specificity_valid": 0.0},
        "counts": {
            # exact case of the chosen epochs: t2's is its 2nd ("NEGATIVE"), t3's and CF t4's not
            f"{TA}/n_total": 4, f"{TA}/n_valid": 3, f"{TA}/n_invalid": 1, f"{TA}/n_error": 0,
            f"{TA}/n_exact_case": 3, f"{TA}/n_valid_lenient": 4,
            f"{CF}/n_valid": 3, f"{CF}/n_invalid": 0, f"{CF}/n_error": 1,
            f"{CF}/n_exact_case": 3, f"{CF}/n_valid_lenient": 3,
        },
        "confusion": {f"{TA}/tp": 1, f"{TA}/fn": 1, f"{TA}/fp": 0, f"{TA}/tn": 1,
                      f"{CF}/tp": 1, f"{CF}/fn": 1, f"{CF}/fp": 1, f"{CF}/tn": 0},
        "intervals_95": {
            f"{TA}/accuracy_wald_lo": ta_acc_lo, f"{TA}/accuracy_wald_hi": ta_acc_hi,
            f"{TA}/sensitivity_wilson_lo": wilson(1, 2)[0],
            f"{TA}/sensitivity_wilson_hi": wilson(1, 2)[1],
            f"{TA}/specificity_wald_lo": 1.0, f"{TA}/specificity_wilson_lo": wilson(1, 1)[0],
            f"{CF}/specificity_wilson_hi": wilson(0, 1)[1],
        },
        "lenient_parse": {
            # TA lenient: P, N, N (t3's 1st epoch), N against P, N, N, P
            f"{TA}/accuracy_lenient": 3 / 4, f"{TA}/macro_f1_lenient": (2 / 3 + 4 / 5) / 2,
            f"{TA}/valid_rate_lenient": 1.0,
            f"{CF}/accuracy_lenient": 1 / 3, f"{CF}/valid_rate_lenient": 3 / 4,
        },
        "flip_rates": {
            # valid in both: t1 (P, P), t2 (N, P); all paired (no ERROR): t1, t2, t3 (INVALID, N)
            f"{TA}~{CF}": 1 / 2, f"{TA}~{CF}/n": 2,
            f"{TA}~{CF}/wilson_lo": wilson(1, 2)[0], f"{TA}~{CF}/wald_hi": 1.0,
            f"{TA}~{CF}/all_paired": 2 / 3, f"{TA}~{CF}/all_paired_n": 3,
        },
    }


# --- MedEvidence: five classes, two evidence qualities, four questions ---------------------------

HIGH, LOW = "high", "low"


def medevidence_epochs() -> list[list[dict[str, Any]]]:
    # q2's majority is its 2nd epoch (the 1st says higher); q3's is INVALID (1st epoch, whose
    # lenient reading is "no difference"); q4's 3rd epoch (no reply) is outvoted
    replies = {
        ("higher", HIGH): ["**Answer**: higher", "**Answer**: lower", "**Answer**: higher"],
        ("lower", HIGH): ["**Answer**: higher", "**Answer**: lower", "**Answer**: lower"],
        ("no difference", LOW): ["It shows no difference", "**Answer**: uncertain effect",
                                 "Answer: no difference"],
        ("insufficient data", LOW): ["**Answer**: uncertain effect",
                                     "**Answer**: uncertain effect", None],
    }
    return [[dict(effect_value(r, target, "five", "evidence", quality)) for r in rs]
            for (target, quality), rs in replies.items()]


def medevidence_expected() -> dict[str, dict[str, float]]:
    # reduced (prediction, target): higher/higher, lower/lower, INVALID/no difference,
    # uncertain effect/insufficient data; lenient: higher, lower, no difference, uncertain effect
    return {
        "headline": {"accuracy_all": 1 / 2, "macro_f1_all": 2 / 5, "valid_rate": 3 / 4},
        "accuracy_valid": {"accuracy_valid": 2 / 3},
        "macro_f1_valid": {"macro_f1_valid": 2 / 5},
        "abstention": {"coverage": 1 / 2, "selective_accuracy": 1.0, "abstention_recall": 1.0,
                       "over_abstention": 0.0, "n_committed": 2, "n_abstained": 1},
        "label_counts": {"higher": 1, "lower": 1, "no difference": 0, "uncertain effect": 1,
                         "insufficient data": 0, "INVALID": 1, "ERROR": 0, "total": 4},
        "confusion_counts": {"higher>higher": 1, "higher>lower": 0, "lower>lower": 1,
                             "no difference>INVALID": 1,
                             "insufficient data>uncertain effect": 1},
        "by_field": {"evidence_quality=high/accuracy_all": 1.0,
                     "evidence_quality=high/macro_f1_all": 2 / 5,
                     "evidence_quality=high/n": 2,
                     "evidence_quality=low/accuracy_all": 0.0,
                     "evidence_quality=low/macro_f1_all": 0.0},
        "accuracy_by_gold": {"gold=higher/accuracy_all": 1.0, "gold=lower/accuracy_all": 1.0,
                             "gold=no difference/accuracy_all": 0.0,
                             "gold=insufficient data/accuracy_all": 0.0,
                             "gold=insufficient data/n": 1},
        "lenient_view": {"accuracy_all_lenient": 3 / 4, "accuracy_valid_lenient": 3 / 4,
                         "macro_f1_all_lenient": 3 / 5, "macro_f1_valid_lenient": 3 / 5,
                         "valid_rate_lenient": 1.0},
        "confusion_lenient": {"no difference>no difference_lenient": 1,
                              "no difference>INVALID_lenient": 0,
                              "insufficient data>uncertain effect_lenient": 1},
    }


# --- MedREQAL and HealthFC: the verdict, the generation scores, the mentions -------------------


def verdict_epoch(reply: str | None, target: str, record: Mapping[str, str],
                  rouge: float | None, bert: float | None) -> dict[str, Any]:
    """One epoch's score value as the verdict scorer makes it (``scorers.medreqal.verdict``)."""
    value: dict[str, Any] = dict(verdict_value(reply, target, record))
    if value["prediction"] == "ERROR":
        value.update(NO_SCORES)
        value["no_reply"] = True
    else:
        value.update(rouge_l=rouge, bertscore_f1=bert, bertscore_precision=bert,
                     bertscore_recall=bert)
    value.update(evidence_mentions_in(reply or ""))
    return value


def verdict_epochs(strata: bool = True) -> list[list[dict[str, Any]]]:
    # m1: majority the 1st epoch (which mentions a Cochrane review); m2: its 2nd (its 3rd, not
    # chosen, mentions a meta-analysis); m3: ERROR (no reply twice), its 3rd epoch's scores the
    # only floats; m4: INVALID. Floats are the mean over the epochs that have one.
    samples = [
        (SUPPORTED, "Cancer", "HIGH",
         ["SUPPORTED. A Cochrane review found it works.", REFUTED, SUPPORTED],
         [0.3, 0.1, 0.5], [0.8, 0.6, 0.7]),
        (REFUTED, "Cancer", "LOW", [SUPPORTED, REFUTED, "REFUTED, per a meta-analysis."],
         [0.2, 0.4, 0.6], [0.5, 0.5, 0.8]),
        (NEI, "Heart", "LOW", [None, None, "Not enough information."],
         [None, None, 0.9], [None, None, 0.9]),
        (SUPPORTED, "Heart", "HIGH", ["SUPPORTED or REFUTED", "SUPPORTED or REFUTED", SUPPORTED],
         [0.2, 0.2, 0.8], [0.4, 0.4, 0.4]),
    ]
    return [
        [verdict_epoch(r, target, {"category": cat, "strength": s} if strata else {}, x, b)
         for r, x, b in zip(replies, rouge, bert, strict=True)]
        for target, cat, s, replies, rouge, bert in samples
    ]


def verdict_expected() -> dict[str, dict[str, float]]:
    # reduced (prediction, target): m1 S/S (Cancer, HIGH), m2 R/R (Cancer, LOW),
    # m3 ERROR/NEI (Heart, LOW), m4 INVALID/S (Heart, HIGH); ROUGE-L 0.3, 0.4, 0.9, 0.4;
    # BERTScore 0.7, 0.6, 0.9, 0.4. Macro-F1 over S, R, NEI (all samples): S 2/3, R 1, NEI 0.
    return {
        "headline": {"accuracy_all": 1 / 2, "macro_f1_all": 5 / 9, "valid_rate": 1 / 2},
        "accuracy_valid": {"accuracy_valid": 1.0},
        "macro_f1_valid": {"macro_f1_valid": 2 / 3},
        "abstention": {"coverage": 1 / 2, "selective_accuracy": 1.0, "abstention_recall": 0.0,
                       "over_abstention": 0.0, "n_committed": 2, "n_abstained": 0},
        "predicted_label_counts": {"predicted_supported": 1, "predicted_refuted": 1,
                                   "predicted_nei": 0, "predicted_invalid": 1,
                                   "predicted_error": 1},
        "confusion_matrix": {"gold_supported_pred_supported": 1, "gold_refuted_pred_refuted": 1,
                             "gold_nei_pred_error": 1, "gold_supported_pred_invalid": 1,
                             "gold_supported_pred_refuted": 0},
        "accuracy_by_category": {"accuracy_category_cancer": 1.0,
                                 "accuracy_category_heart": 0.0},
        "macro_f1_by_category": {"macro_f1_category_cancer": 2 / 3,
                                 "macro_f1_category_heart": 0.0},
        "accuracy_by_strength": {"accuracy_strength_high": 1 / 2, "accuracy_strength_low": 1 / 2},
        "macro_f1_by_strength": {"macro_f1_strength_high": 2 / 9,
                                 "macro_f1_strength_low": 1 / 3},
        "rouge_l_mean": {"rouge_l_mean": (0.3 + 0.4 + 0.9 + 0.4) / 4},
        "bertscore_f1_mean": {"bertscore_f1_mean": (0.7 + 0.6 + 0.9 + 0.4) / 4},
        # m3 has a ROUGE-L (its 3rd epoch's) and no reply (its chosen 1st): counted in both
        "generation_counts": {"generation_scored": 4, "generation_no_reply": 1,
                              "generation_no_reference": 0},
        "evidence_mention_counts": {"mentions_cochrane": 1, "mentions_review": 1,
                                    "mentions_meta_analysis": 0},
    }


# --- the judges: a record without a prediction keeps its first epoch ---------------------------


def agreement_epochs(jury: bool = False) -> list[list[dict[str, Any]]]:
    verdicts = [["agrees", "contradicts", "contradicts"], ["partly agrees"] * 3,
                [JUDGE_FAILURE, "agrees", "agrees"], [NO_REPLY] * 3]
    if jury:
        return [[{"agreement": TIE, "grader/agreement": "agrees",
                  "grader_2/agreement": "contradicts"}],
                [{"agreement": "agrees", "grader/agreement": "agrees",
                  "grader_2/agreement": "agrees"}]]
    return [[{"agreement": v} for v in vs] for vs in verdicts]


def plausibility_epochs(jury: bool = False) -> list[list[dict[str, Any]]]:
    if jury:  # an even jury's median rating is a float
        return [[{"cf_rating": 3.5, "orig_rating": 4, "judge_failures": 0,
                  "grader/cf_rating": 3, "grader/orig_rating": 4, "grader/judge_failures": 0,
                  "grader_2/cf_rating": 4, "grader_2/orig_rating": 4,
                  "grader_2/judge_failures": 0}]]
    ratings = [[(4, 5, 0), (2, 5, 0), (2, 5, 0)], [(3, 3, 0), (5, 3, 0), (5, 3, 0)],
               [(0, 4, 1), (5, 4, 0), (5, 4, 0)]]
    return [[{"cf_rating": c, "orig_rating": o, "judge_failures": f} for c, o, f in sample]
            for sample in ratings]


def detectability_epochs(jury: bool = False) -> list[list[dict[str, Any]]]:
    if jury:
        return [[{"picked": TIE, "edited": "A", "correct": 0, "grader/picked": "A",
                  "grader_2/picked": "B"}],
                [{"picked": "B", "edited": "B", "correct": 1, "grader/picked": "B",
                  "grader_2/picked": "B"}]]
    picks = [[("A", "A"), ("B", "A"), ("B", "A")], [("B", "A"), ("A", "A"), ("A", "A")],
             [(JUDGE_FAILURE, "B"), ("B", "B"), ("B", "B")], [("B", "B")] * 3]
    return [[{"picked": p, "edited": e, "correct": int(p == e)} for p, e in sample]
            for sample in picks]


# --- the builder: first accepted epoch ---------------------------------------------------------

C1 = {"title": 0.0, "introduction": 0.0, "methods": 0.01, "results": 0.2, "conclusions": 0.1,
      "outcome": 0.15}
C3 = {"title": 0.1, "introduction": 0.0, "methods": 0.0, "results": 0.4, "conclusions": 0.3,
      "outcome": 0.35}


def build_epochs() -> list[list[dict[str, Any]]]:
    g = "mockllm/grader"
    return [
        # accepted in its 2nd epoch (C1), again in its 3rd (another rewrite, not taken)
        [_value(REJECTED, "background", {}, g), _value(ACCEPTED, "", C1, g),
         _value(ACCEPTED, "", C3, g)],
        [_value(ACCEPTED, "", C3, g), _value(REJECTED, "edit_too_large", C1, g),
         _value(ERROR, "provider", {}, g)],
        [_value(REJECTED, "outcome_unchanged", {}, g), _value(REJECTED, "background", {}, g),
         _value(ERROR, "provider", {}, g)],
        [_value(ERROR, "provider", {}, g)] * 3,
    ]


def build_expected() -> dict[str, dict[str, float]]:
    return {"build_summary": {
        "accepted": 2, "rejected": 1, "errors": 1, "accept_rate": 2 / 3,
        "rejected_outcome_unchanged": 1, "error_provider": 1,
        "modified_title": 1, "modified_introduction": 0, "modified_methods": 1,
        "modified_results": 2,
        "change_outcome_median": 0.25, "change_outcome_p90": 0.15 + 0.9 * 0.2,
        "change_outcome_max": 0.35,
    }}


# --- the cases ---------------------------------------------------------------------------------

VERDICT_LABELS = list(VERDICT.labels)

CASES: dict[str, Case] = {
    "oncology_rct": Case(lambda: STUDIES["oncology_rct"].metric_set(full=True), oncology_epochs()),
    "medevidence": Case(lambda: STUDIES["medevidence"].metric_set(full=True,
                                                                  task_args={"labels": "five"}),
                        medevidence_epochs()),
    "medreqal": Case(lambda: STUDIES["medreqal"].metric_set(full=True), verdict_epochs()),
    "healthfc": Case(lambda: STUDIES["healthfc"].metric_set(full=True), verdict_epochs(False)),
    # the metrics the label scorers declare (verdict, effect_direction) and a label study's set
    "classification": Case(lambda: [accuracy_all(), macro_f1_all(VERDICT_LABELS), valid_rate()],
                           verdict_epochs()),
    "agreement": Case(lambda: [agreement_shares()], agreement_epochs()),
    "plausibility": Case(lambda: [plausibility_summary()], plausibility_epochs()),
    "detectability": Case(lambda: [detectability()], detectability_epochs()),
    "build": Case(lambda: [build_summary()], build_epochs(), first_accepted),
}

#: a jury's values (roles' own fields, the graders' agreement): the equal-epochs check only
JURY_CASES: dict[str, Case] = {
    "agreement_jury": Case(lambda: [agreement_shares()], agreement_epochs(jury=True)),
    "plausibility_jury": Case(lambda: [plausibility_summary()], plausibility_epochs(jury=True)),
    "detectability_jury": Case(lambda: [detectability()], detectability_epochs(jury=True)),
}

#: (case, metric) -> the metric's values under the case's disagreeing epochs
EXPECTED: dict[tuple[str, str], dict[str, float]] = {
    **{("oncology_rct", m): v for m, v in oncology_expected().items()},
    **{("medevidence", m): v for m, v in medevidence_expected().items()},
    **{("medreqal", m): v for m, v in verdict_expected().items()},
    ("healthfc", "headline"): verdict_expected()["headline"],
    ("healthfc", "rouge_l_mean"): verdict_expected()["rouge_l_mean"],
    ("healthfc", "accuracy_by_category"): {},  # HealthFC has no categories: nothing logged
    **{("classification", m): {m: verdict_expected()["headline"][m]}
       for m in ("accuracy_all", "macro_f1_all", "valid_rate")},
    ("agreement", "agreement_shares"): {
        # first epochs: agrees, partly agrees, JUDGE_FAILURE, NO_REPLY
        "agrees": 1 / 2, "partly_agrees": 1 / 2, "contradicts": 0.0, "judge_failures": 1,
        "not_judged_no_reply": 1, "not_judged_no_reference": 0, "n": 4},
    ("plausibility", "plausibility_summary"): {
        # first epochs: (4, 5), (3, 3), (failure, 4)
        "cf_rating_mean": 3.5, "orig_rating_mean": 4.0, "paired_difference_mean": -0.5,
        "judge_failures": 1, "n": 3, "cf_rating_3": 1, "cf_rating_4": 1, "cf_rating_5": 0},
    ("detectability", "detectability"): {
        # first epochs: A (right), B (wrong), failure, B (right)
        "detect_rate": 2 / 3, "detect_wilson_lo": wilson(2, 3)[0],
        "detect_wilson_hi": wilson(2, 3)[1], "p_value_vs_chance": 1.0, "judge_failures": 1,
        "n": 4},
    **{("build", m): v for m, v in build_expected().items()},
}


def metric_names(metrics: Sequence[Any]) -> set[str]:
    return {registry_unqualified_name(m) for m in metrics}


@pytest.mark.parametrize("case", [*CASES, *JURY_CASES])
def test_agreeing_epochs_change_nothing(case):
    c = {**CASES, **JURY_CASES}[case]
    assert_agreeing_epochs_change_nothing(
        c.metrics(), [sample[0] for sample in c.epochs], reducers=(c.reducer(),)
    )


@functools.cache
def disagreeing(case: str) -> dict[str, Any]:
    """The case's metrics over its disagreeing epochs, reduced by its task's reducer (one eval
    per case, shared by its metrics' tests)."""
    c = CASES[case]
    return run_metrics(c.metrics(), [list(sample) for sample in c.epochs], reducer=c.reducer())


@pytest.mark.parametrize(("case", "metric"), list(EXPECTED), ids=[f"{c}-{m}" for c, m in EXPECTED])
def test_the_metric_under_disagreeing_epochs(case, metric):
    assert metric in metric_names(CASES[case].metrics()), f"{case} does not log {metric}"
    values = disagreeing(case)
    for key, want in EXPECTED[(case, metric)].items():
        assert key in values, f"{metric}: no {key} in {sorted(values)}"
        assert values[key] == pytest.approx(want, abs=1e-9), (metric, key)
    if not EXPECTED[(case, metric)]:  # nothing to log: no key of the metric's
        assert not [k for k in values if "category" in k]


def test_the_reducers_plain_values():
    """majority_label on values that are not records: a float is averaged, any other value is
    the most common (ties: the first seen); first_accepted leaves a value with no status as the
    first epoch's."""
    floats = [[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]]
    assert run_metrics([mean()], floats, reducer=majority_label())["mean"] == pytest.approx(0.25)
    labels = [["C", "I", "I"], ["I", "C", "C"], ["C", "I", "P"]]  # I, C, and a tie: C
    assert run_metrics([accuracy()], labels, reducer=majority_label())["accuracy"] == (
        pytest.approx(2 / 3))
    assert run_metrics([accuracy()], labels, reducer=first_accepted())["accuracy"] == (
        pytest.approx(2 / 3))  # C, I, C: the first epochs


def decorated(decorator: str) -> set[str]:
    """The names of the package's functions decorated with ``@<decorator>`` (its registered
    ``name=`` where it gives one), read from the source as the field's lint reads them."""
    names = set()
    for path in (REPO / "src" / "med_evals").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for d in node.decorator_list:
                call = d if isinstance(d, ast.Call) else None
                target = call.func if call else d
                if isinstance(target, ast.Name) and target.id == decorator:
                    given = [k.value.value for k in (call.keywords if call else [])
                             if k.arg == "name" and isinstance(k.value, ast.Constant)]
                    names.add(given[0] if given else node.name)
    return names


def test_every_metric_and_reducer_is_gated():
    """A metric or reducer added to the package without a case here fails: each is run
    through the gates above (the reducers as the cases' reducers)."""
    assert decorated("metric") == {m for _, m in EXPECTED}
    reducers = {registry_unqualified_name(c.reducer()) for c in CASES.values()}
    assert decorated("score_reducer") == reducers == {"majority_label", "first_accepted"}
