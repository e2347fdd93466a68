"""Classification metrics, checked against values worked out by hand."""

from __future__ import annotations

import math

import pytest
from inspect_ai.scorer import SampleScore, Score

from med_evals.scorers.classification import (
    accuracy_all,
    accuracy_valid,
    macro_f1_all,
    macro_f1_valid,
)
from med_evals.scorers.medreqal import (
    VERDICT,
    accuracy_by_category,
    accuracy_by_strength,
    confusion_matrix,
    macro_f1_by_category,
    macro_f1_by_strength,
    predicted_label_counts,
    slug,
)

S, R, N = "SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"

# gold, prediction, category, strength
ROWS = [
    (S, S, "Cancer", "LOW"),
    (S, N, "Cancer", "LOW"),
    (R, R, "Cancer", "LOW"),
    (R, "INVALID", "Cancer", "LOW"),
    (N, N, "Cognitive and mental health", "LOW"),
    (N, "ERROR", "Cognitive and mental health", "LOW"),
    (N, S, "Cognitive and mental health", "HIGH"),
]


def scores(rows=ROWS) -> list[SampleScore]:
    return [
        SampleScore(
            sample_id=i,
            score=Score(
                value={
                    "prediction": pred,
                    "target": gold,
                    "valid": pred in (S, R, N),
                    "category": cat,
                    "strength": strength,
                }
            ),
        )
        for i, (gold, pred, cat, strength) in enumerate(rows)
    ]


def test_accuracy_all_counts_invalid_and_error_as_wrong() -> None:
    assert accuracy_all()(scores())["accuracy_all"] == pytest.approx(3 / 7)


def test_accuracy_valid_leaves_out_invalid_and_error() -> None:
    assert accuracy_valid()(scores())["accuracy_valid"] == pytest.approx(3 / 5)


def test_macro_f1_all() -> None:
    # S: P 1/2 R 1/2 -> 1/2; R: P 1 R 1/2 -> 2/3; NEI: P 1/2 R 1/3 -> 2/5
    value = macro_f1_all(list(VERDICT.labels))(scores())["macro_f1_all"]
    assert value == pytest.approx((1 / 2 + 2 / 3 + 2 / 5) / 3)


def test_macro_f1_valid() -> None:
    # valid rows 0,1,2,4,6 -> S: 1/2; R: 1; NEI: P 1/2 R 1/2 -> 1/2
    value = macro_f1_valid(list(VERDICT.labels))(scores())["macro_f1_valid"]
    assert value == pytest.approx((1 / 2 + 1 + 1 / 2) / 3)


def test_predicted_label_counts_include_invalid_and_error() -> None:
    assert predicted_label_counts()(scores()) == {
        "predicted_supported": 2,
        "predicted_refuted": 1,
        "predicted_nei": 2,
        "predicted_invalid": 1,
        "predicted_error": 1,
    }


def test_confusion_matrix() -> None:
    cm = confusion_matrix()(scores())
    assert len(cm) == 3 * 5
    nonzero = {k: v for k, v in cm.items() if v}
    assert nonzero == {
        "gold_supported_pred_supported": 1,
        "gold_supported_pred_nei": 1,
        "gold_refuted_pred_refuted": 1,
        "gold_refuted_pred_invalid": 1,
        "gold_nei_pred_nei": 1,
        "gold_nei_pred_error": 1,
        "gold_nei_pred_supported": 1,
    }
    assert sum(cm.values()) == len(ROWS)


def test_per_category() -> None:
    assert accuracy_by_category()(scores()) == pytest.approx(
        {"accuracy_category_cancer": 2 / 4, "accuracy_category_cognitive_and_mental_health": 1 / 3}
    )
    # cancer: S 2/3, R 2/3, NEI 0; cognitive: S 0, R 0, NEI P 1 R 1/3 -> 1/2
    assert macro_f1_by_category()(scores()) == pytest.approx(
        {
            "macro_f1_category_cancer": (2 / 3 + 2 / 3) / 3,
            "macro_f1_category_cognitive_and_mental_health": (1 / 2) / 3,
        }
    )


def test_per_strength() -> None:
    assert accuracy_by_strength()(scores()) == pytest.approx(
        {"accuracy_strength_high": 0.0, "accuracy_strength_low": 3 / 6}
    )
    assert macro_f1_by_strength()(scores())["macro_f1_strength_high"] == 0.0


def test_groups_absent_give_no_entries() -> None:
    plain = [
        SampleScore(sample_id=1, score=Score(value={"prediction": S, "target": S, "valid": True}))
    ]
    assert accuracy_by_category()(plain) == {}
    assert macro_f1_by_strength()(plain) == {}
    assert accuracy_all()(plain)["accuracy_all"] == 1.0


def test_no_valid_samples() -> None:
    rows = [(S, "INVALID", "x", "LOW")]
    # undefined over no valid reply: NaN, never a made-up 0
    assert math.isnan(accuracy_valid()(scores(rows))["accuracy_valid"])
    assert math.isnan(macro_f1_valid(list(VERDICT.labels))(scores(rows))["macro_f1_valid"])
    assert accuracy_all()(scores(rows))["accuracy_all"] == 0.0


def test_slug() -> None:
    assert slug("Sexual and reproductive health") == "sexual_and_reproductive_health"


def test_coded_metrics_equal_scikit_learn_on_strings() -> None:
    """Integer-coded labels (the speed-up) give scikit-learn's values on the raw strings."""
    import random

    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    from med_evals.scorers.classification import (
        accuracy_codes,
        confusion_of,
        encode,
        macro_f1_codes,
    )

    def accuracy_score_of(gold, pred):
        return accuracy_codes(*encode(gold, pred))

    def macro_f1_score_of(gold, pred, labels):
        return macro_f1_codes(*encode(gold, pred, labels), len(labels))

    labels = ["SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"]
    predictions = [*labels, "INVALID", "ERROR", "MAYBE"]
    rng = random.Random(3)
    for n in (1, 2, 7, 50, 400):
        gold = [rng.choice(labels[: rng.randint(1, 3)]) for _ in range(n)]
        pred = [rng.choice(predictions) for _ in range(n)]
        assert accuracy_score_of(gold, pred) == accuracy_score(gold, pred)
        assert macro_f1_score_of(gold, pred, labels) == f1_score(
            gold, pred, labels=labels, average="macro", zero_division=0
        )
        values = [{"target": g, "prediction": p} for g, p in zip(gold, pred, strict=True)]
        cols = [*labels, "INVALID", "ERROR"]
        cm = confusion_matrix(gold, pred, labels=cols)
        assert confusion_of(values, labels) == {
            f"{g}>{p}": int(cm[i, j]) for i, g in enumerate(labels) for j, p in enumerate(cols)
        }
    assert math.isnan(accuracy_score_of([], [])) and math.isnan(macro_f1_score_of([], [], labels))


def test_grouped_metrics_equal_scikit_learn_per_group() -> None:
    """One joint-label call gives each group's own scikit-learn macro-F1."""
    import random

    from sklearn.metrics import accuracy_score, f1_score

    from med_evals.scorers.classification import accuracy_by_group, macro_f1_by_group

    labels = ["SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"]
    rng = random.Random(5)
    for n in (1, 3, 30, 500):
        groups = [rng.choice(["Cancer", "Heart", "Pregnancy", "x y"]) for _ in range(n)]
        gold = [rng.choice(labels) for _ in range(n)]
        pred = [rng.choice([*labels, "INVALID", "ERROR"]) for _ in range(n)]
        got = macro_f1_by_group(groups, gold, pred, labels)
        acc = accuracy_by_group(groups, gold, pred)
        assert set(got) == set(acc) == set(groups)
        for group in set(groups):
            idx = [i for i, g in enumerate(groups) if g == group]
            expected = f1_score(
                [gold[i] for i in idx],
                [pred[i] for i in idx],
                labels=labels,
                average="macro",
                zero_division=0,
            )
            assert got[group] == pytest.approx(expected, abs=1e-15)
            group_gold, group_pred = [gold[i] for i in idx], [pred[i] for i in idx]
            assert acc[group] == pytest.approx(accuracy_score(group_gold, group_pred), abs=1e-15)
    assert macro_f1_by_group([], [], [], labels) == {} == accuracy_by_group([], [], [])
