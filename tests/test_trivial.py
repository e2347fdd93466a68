"""Trivial baselines (med_evals.stats.trivial): the study's own headline function over the run's own
samples, each prediction replaced."""

import csv
import math

import pytest

from med_evals.stats.trivial import (
    beats_trivial,
    best_trivial,
    constant_values,
    majority_label,
    trivial_rows,
)
from med_evals.tasks import MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT

NEI = "NOT ENOUGH INFORMATION"


def medreqal_values():
    """MedREQAL's published gold counts (543 SUPPORTED, 186 REFUTED, 2,057 NEI), every reply
    made up as invalid: the trivial rows must not depend on the run's own predictions."""
    golds = ["SUPPORTED"] * 543 + ["REFUTED"] * 186 + [NEI] * 2057
    return [{"prediction": "INVALID", "target": g, "valid": False} for g in golds]


def test_medreqal_always_nei_is_the_issues_figures():
    rows = {r.name: r for r in trivial_rows(MEDREQAL, medreqal_values(), draws=5)}
    nei = rows[f"always {NEI}"].numbers
    assert nei["accuracy_all"] == 2057 / 2786
    assert round(nei["accuracy_all"], 3) == 0.738
    # macro-F1: NEI's F1 is 2 * 2057 / (2057 + 2786) (precision 2057/2786, recall 1); 0 for S, R
    assert nei["macro_f1_all"] == pytest.approx(2 * 2057 / (2057 + 2786) / 3, abs=1e-12)
    assert round(nei["macro_f1_all"], 3) == 0.283
    assert nei["valid_rate"] == 1.0
    majority = rows[f"majority class ({NEI})"]
    assert majority.kind == "majority" and majority.numbers == rows[f"always {NEI}"].numbers
    assert rows["always SUPPORTED"].numbers["accuracy_all"] == 543 / 2786
    assert rows["always REFUTED"].numbers["accuracy_all"] == 186 / 2786
    assert [r.name for r in trivial_rows(MEDREQAL, medreqal_values(), draws=5)] == [
        f"majority class ({NEI})", "always SUPPORTED", "always REFUTED", f"always {NEI}",
        "uniform random (mean of 5 draws)",
    ]


def oncology_values(golds, condition="title_abstract"):
    return [
        {"prediction": "INVALID", "target": g, "valid": False, "correct": 0,
         "condition": condition, "lenient": "INVALID", "trial": i}
        for i, g in enumerate(golds)
    ]


def test_oncology_majority_class_is_0584_over_valid_predictions():
    """146 POSITIVE / 104 NEGATIVE trials: always POSITIVE is right on 146 of 250 (the study's
    accuracy and F1 are over valid predictions: a trivial predictor's are all valid)."""
    values = oncology_values(["POSITIVE"] * 146 + ["NEGATIVE"] * 104)
    rows = trivial_rows(ONCOLOGY_RCT, values, draws=5)
    best = best_trivial(ONCOLOGY_RCT, rows)
    assert best is not None and best.name == "majority class (POSITIVE)"
    assert best.numbers["accuracy_valid"] == 0.584
    assert best.numbers["macro_f1_valid"] == pytest.approx((2 * 146 / (146 + 250)) / 2)
    assert best.numbers["valid_rate"] == 1.0


def test_oncology_0584_is_the_shared_datasets_majority_share(shared_datasets):
    """The figure from the data: the 250 trials' gold (Annotation_accept) is 146 POSITIVE, and the
    counterfactual abstracts' gold (target_label, the inverse) 146 NEGATIVE."""
    for folder, file, column, majority in [
        ("oncology-rct-250", "trials_with_predictions.csv", "Annotation_accept", "POSITIVE"),
        ("oncology-rct-250-counterfactual", "trials.csv", "target_label", "NEGATIVE"),
    ]:
        with open(shared_datasets / folder / file, newline="", encoding="utf-8") as f:
            golds = [row[column] for row in csv.DictReader(f)]
        rows = trivial_rows(ONCOLOGY_RCT, oncology_values(golds), draws=2)
        best = best_trivial(ONCOLOGY_RCT, rows)
        assert best is not None and best.name == f"majority class ({majority})"
        assert best.numbers["accuracy_valid"] == 0.584


def test_constant_values_replace_the_prediction_and_keep_the_rest():
    values = oncology_values(["POSITIVE", "NEGATIVE"])
    out = constant_values(values, "NEGATIVE")
    assert out == [
        {**values[0], "prediction": "NEGATIVE", "valid": True, "correct": 0, "lenient": "NEGATIVE"},
        {**values[1], "prediction": "NEGATIVE", "valid": True, "correct": 1, "lenient": "NEGATIVE"},
    ]
    assert values[0]["prediction"] == "INVALID"  # the run's values are not changed


def test_majority_tie_goes_to_the_label_first_in_the_label_set():
    values = [{"target": t} for t in ["REFUTED", "SUPPORTED", "SUPPORTED", "REFUTED"]]
    assert majority_label(values, ["SUPPORTED", "REFUTED", NEI]) == "SUPPORTED"
    assert majority_label(values, [NEI, "REFUTED", "SUPPORTED"]) == "REFUTED"
    assert majority_label([], ["SUPPORTED"]) is None


def test_uniform_random_accuracy_is_one_over_k():
    """MedEvidence's five labels and its three: the mean accuracy over 100 seeded draws is 1/k
    within four Monte Carlo standard errors (sqrt((1/k)(1 - 1/k) / n / draws))."""
    golds = ["higher", "lower", "no difference", "uncertain effect", "insufficient data"]
    values = [{"prediction": "ERROR", "target": golds[i % 5], "valid": False, "correct": 0,
               "condition": "evidence", "evidence_quality": "high", "lenient": "ERROR"}
              for i in range(300)]
    for args, k in [(None, 5), ({"labels": "five"}, 5)]:
        row = trivial_rows(MEDEVIDENCE, values, args, draws=100)[-1]
        assert row.kind == "random" and row.prediction is None and row.draws == 100
        mc_se = math.sqrt((1 / k) * (1 - 1 / k) / 300 / 100)
        assert abs(row.numbers["accuracy_all"] - 1 / k) < 4 * mc_se
        assert row.numbers["valid_rate"] == 1.0
    three = [dict(v, target=["higher", "lower", "uncertain"][i % 3]) for i, v in enumerate(values)]
    row = trivial_rows(MEDEVIDENCE, three, {"labels": "three"}, draws=100)[-1]
    assert abs(row.numbers["accuracy_all"] - 1 / 3) < 4 * math.sqrt(2 / 9 / 300 / 100)
    again = trivial_rows(MEDEVIDENCE, three, {"labels": "three"}, draws=100)[-1]
    assert again.numbers == row.numbers  # seeded
    other = trivial_rows(MEDEVIDENCE, three, {"labels": "three"}, draws=100, seed=1)[-1]
    assert other.numbers != row.numbers


def _run(values, right_share, wrong="SUPPORTED"):
    """A run right on the first ``right_share`` of the samples of each gold label."""
    out, seen = [], {}
    totals = {g: sum(v["target"] == g for v in values) for g in {v["target"] for v in values}}
    for v in values:
        g = v["target"]
        seen[g] = seen.get(g, 0) + 1
        pred = g if seen[g] <= right_share * totals[g] else (wrong if g != wrong else "REFUTED")
        out.append(dict(v, prediction=pred, valid=True))
    return out


def test_beats_trivial_is_the_paired_bootstrap_above_zero():
    values = medreqal_values()
    best = best_trivial(MEDREQAL, trivial_rows(MEDREQAL, values, draws=2))
    assert best is not None
    good = beats_trivial(MEDREQAL, _run(values, 0.9), best, n_boot=60)
    assert good["metric"] == "accuracy_all" and good["trivial"] == f"majority class ({NEI})"
    assert good["run"] == pytest.approx(sum(
        math.floor(0.9 * c) for c in (543, 186, 2057)) / 2786)
    assert good["trivial_value"] == 2057 / 2786
    assert good["difference"] == pytest.approx(good["run"] - good["trivial_value"])
    assert 0 < good["lo"] < good["difference"] < good["hi"] and good["beats"] is True
    assert good["n"] == 2786
    # the trivial predictor itself: difference 0 in every resample, not better
    same = beats_trivial(MEDREQAL, constant_values(values, NEI), best, n_boot=20)
    assert (same["difference"], same["lo"], same["hi"], same["beats"]) == (0.0, 0.0, 0.0, False)
    # worse than always-NEI: the interval lies below zero
    bad = beats_trivial(MEDREQAL, _run(values, 0.6), best, n_boot=60)
    assert bad["hi"] < 0 and bad["beats"] is False


def test_beats_trivial_within_noise_is_not_better():
    """70 of 100 right against a majority class at 65 (right on 10 samples it misses, wrong on
    5 it gets): the interval holds zero."""
    golds = [NEI] * 65 + ["SUPPORTED"] * 35
    values = [{"prediction": "INVALID", "target": g, "valid": False} for g in golds]
    preds = [NEI] * 60 + ["SUPPORTED"] * 5 + ["SUPPORTED"] * 10 + [NEI] * 25
    run = [dict(v, prediction=p, valid=True) for v, p in zip(values, preds, strict=True)]
    best = best_trivial(MEDREQAL, trivial_rows(MEDREQAL, values, draws=2))
    assert best is not None
    result = beats_trivial(MEDREQAL, run, best, n_boot=300)
    assert (result["run"], result["trivial_value"]) == (0.70, 0.65)
    assert result["lo"] < 0 < result["hi"] and result["beats"] is False


def test_beats_trivial_undefined_and_the_random_row():
    """No valid reply: the oncology run's macro-F1 is undefined, so is the test; the random
    row is an expectation, not a predictor to pair with."""
    values = oncology_values(["POSITIVE"] * 6 + ["NEGATIVE"] * 4)
    rows = trivial_rows(ONCOLOGY_RCT, values, draws=3)
    result = beats_trivial(ONCOLOGY_RCT, values, best_trivial(ONCOLOGY_RCT, rows), n_boot=20)
    assert math.isnan(result["run"]) and result["beats"] is None
    with pytest.raises(ValueError, match="expectation"):
        beats_trivial(ONCOLOGY_RCT, values, rows[-1])
    empty = trivial_rows(ONCOLOGY_RCT, [], draws=3)
    assert [r.name for r in empty] == ["always POSITIVE", "always NEGATIVE"]
    assert all(math.isnan(r.numbers["accuracy_valid"]) for r in empty)
    assert best_trivial(ONCOLOGY_RCT, empty) is None
