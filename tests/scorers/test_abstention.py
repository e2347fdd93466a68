"""Abstention numbers (coverage, selective accuracy, abstention recall, over-abstention) counted
by hand on small lists of score values, per label scheme, and per condition as logged."""

from __future__ import annotations

import math

import pytest
from inspect_ai.scorer import SampleScore, Score
from sklearn.metrics import accuracy_score

from med_evals.scorers.abstention import abstention, abstention_of
from med_evals.scorers.medevidence import ABSTAINING as EFFECT_ABSTAINING
from med_evals.scorers.medevidence import FIVE, THREE
from med_evals.scorers.medreqal import ABSTAINING, VERDICT
from med_evals.tasks import HEALTHFC, MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT

S, R, N = "SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"

#: (gold, predicted): what each is, by hand
VERDICTS = [
    (S, S),  # committed, right
    (S, R),  # committed, wrong
    (S, N),  # abstained where the review answers: over-abstention
    (R, R),  # committed, right
    (R, "INVALID"),  # neither: not covered, no abstention
    (N, N),  # abstained where the gold is NEI
    (N, S),  # committed, wrong
    (N, "ERROR"),  # neither
    (N, N),  # abstained where the gold is NEI
    (R, N),  # over-abstention
]


def values(pairs, condition: str | None = None) -> list[dict]:
    out = []
    for gold, pred in pairs:
        v = {"target": gold, "prediction": pred, "valid": pred not in ("INVALID", "ERROR")}
        if condition is not None:
            v["condition"] = condition
        out.append(v)
    return out


def test_counted_by_hand() -> None:
    got = abstention_of(values(VERDICTS), VERDICT.labels, ABSTAINING)
    # committed: rows 1, 2, 4, 7 of 10; right: 1 and 4
    assert got["coverage"] == pytest.approx(4 / 10)
    assert got["selective_accuracy"] == pytest.approx(2 / 4)
    # gold NEI: rows 6-9; abstained: 6 and 9 (the ERROR of row 8 is no abstention)
    assert got["abstention_recall"] == pytest.approx(2 / 4)
    # gold S or R: rows 1-5 and 10; abstained: 3 and 10 (the INVALID of row 5 is none)
    assert got["over_abstention"] == pytest.approx(2 / 6)
    assert (got["n_committed"], got["n_abstained"]) == (4, 4)


def test_selective_accuracy_is_accuracy_over_committed_replies() -> None:
    committed = [(g, p) for g, p in VERDICTS if p in (S, R)]
    got = abstention_of(values(VERDICTS), VERDICT.labels, ABSTAINING)
    assert got["selective_accuracy"] == accuracy_score(*zip(*committed, strict=True))


def test_empty_denominators_are_nan_not_zero() -> None:
    all_nei = values([(S, N), (R, N)])
    got = abstention_of(all_nei, VERDICT.labels, ABSTAINING)
    assert got["coverage"] == 0.0 and math.isnan(got["selective_accuracy"])
    assert math.isnan(got["abstention_recall"])  # no gold NEI
    assert got["over_abstention"] == 1.0
    assert all(math.isnan(x) for k, x in abstention_of([], VERDICT.labels, ABSTAINING).items()
               if not k.startswith("n_"))


def test_medevidence_five_and_three_classes() -> None:
    five = [
        ("higher", "higher"),  # committed, right
        ("no difference", "no difference"),  # committed (a finding), right
        ("lower", "uncertain effect"),  # over-abstention
        ("insufficient data", "uncertain effect"),  # an abstention where the gold abstains
        ("uncertain effect", "insufficient data"),  # likewise, though the wrong class
        ("uncertain effect", "INVALID"),  # neither
    ]
    got = abstention_of(values(five), FIVE.labels, EFFECT_ABSTAINING["five"])
    assert got["coverage"] == pytest.approx(2 / 6)
    assert got["selective_accuracy"] == 1.0
    assert got["abstention_recall"] == pytest.approx(2 / 3)
    assert got["over_abstention"] == pytest.approx(1 / 3)
    # the same questions under three labels: "no difference" is gold uncertain there
    three = [("higher", "higher"), ("uncertain", "lower"), ("lower", "uncertain"),
             ("uncertain", "uncertain"), ("uncertain", "uncertain"), ("uncertain", "INVALID")]
    got = abstention_of(values(three), THREE.labels, EFFECT_ABSTAINING["three"])
    assert got["coverage"] == pytest.approx(2 / 6)
    assert got["selective_accuracy"] == pytest.approx(1 / 2)
    assert got["abstention_recall"] == pytest.approx(2 / 4)
    assert got["over_abstention"] == pytest.approx(1 / 2)


def test_each_study_names_its_abstentions() -> None:
    assert MEDREQAL.abstaining_of() == HEALTHFC.abstaining_of() == (N,)
    assert MEDEVIDENCE.abstaining_of() == ("uncertain effect", "insufficient data")
    assert MEDEVIDENCE.abstaining_of(MEDEVIDENCE.label_set_name({"labels": "three"})) == (
        "uncertain",)
    assert ONCOLOGY_RCT.abstaining_of() == ()


def test_metric_per_condition() -> None:
    scores = [SampleScore(score=Score(value=v), sample_id=str(i)) for i, v in enumerate(
        values(VERDICTS, "chat") + values([(S, S), (N, S)], "alpaca"))]
    got = abstention(list(VERDICT.labels), [N])(scores)
    assert got["chat/coverage"] == pytest.approx(4 / 10)
    assert got["alpaca/coverage"] == 1.0 and got["alpaca/selective_accuracy"] == 0.5
    assert got["alpaca/over_abstention"] == 0.0 and got["alpaca/abstention_recall"] == 0.0
    plain = abstention(list(VERDICT.labels), [N])(scores[:10])
    assert set(plain) == {"coverage", "selective_accuracy", "abstention_recall",
                          "over_abstention", "n_committed", "n_abstained"}
