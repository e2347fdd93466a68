"""Metrics read from a score table extended at every live refresh give exactly the numbers of a
table built from scratch for the same values (as for values read back from a log)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from inspect_ai.scorer import SampleScore, Score

from med_evals.scorers import classification, generation, medreqal, score_table
from med_evals.scorers.classification import (
    accuracy_all,
    accuracy_valid,
    by_field,
    confusion_counts,
    headline,
    label_counts,
    macro_f1_all,
    macro_f1_valid,
    valid_rate,
)
from med_evals.scorers.score_table import Table, table_of

S, R, N = "SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"
LABELS = [S, R, N]


def verdict_value(rng: random.Random) -> dict[str, Any]:
    prediction = rng.choice([S, R, N, S, N, "INVALID", "ERROR", "MAYBE"])
    value: dict[str, Any] = {
        "prediction": prediction,
        "target": rng.choice([S, R, N]),
        "valid": prediction in LABELS,
        "rouge_l": None if prediction == "ERROR" else rng.random(),
        "bertscore_f1": rng.choice([None, rng.random()]),
        "cochrane": rng.random() < 0.1,
        "review": rng.random() < 0.5,
        "meta_analysis": rng.random() < 0.2,
    }
    if rng.random() < 0.8:  # some samples have no category or strength
        value["category"] = rng.choice(["cancer", "Public health", "neonatal care", ""])
    if rng.random() < 0.7:
        value["strength"] = rng.choice(["LOW", "HIGH", "MEDIUM"])
    if prediction == "ERROR":
        value["no_reply"] = True
    if rng.random() < 0.05:
        value["no_reference"] = True
    return value


def outcome_value(rng: random.Random) -> dict[str, Any]:
    prediction = rng.choice(["POSITIVE", "NEGATIVE", "INVALID", "ERROR"])
    target = rng.choice(["POSITIVE", "NEGATIVE"])
    valid = prediction in ("POSITIVE", "NEGATIVE")
    return {
        "prediction": prediction,
        "target": target,
        "valid": valid,
        "correct": int(valid and prediction == target),
        "condition": rng.choice(["title_abstract", "doi_only", "counterfactual"]),
        "trial": rng.randrange(60),
        "exact_case": valid and rng.random() < 0.8,
        "lenient": prediction if valid else rng.choice(["POSITIVE", "INVALID", "ERROR"]),
        "journal": rng.choice(["JCO", "NEJM", "Lancet"]),
    }


def _metrics() -> dict[str, list[Any]]:
    from med_evals.inspect_internals.compat import scorer_metrics
    from med_evals.scorers.medreqal import verdict
    from med_evals.scorers.oncology_rct import outcome_metrics
    from med_evals.tasks import MEDREQAL, ONCOLOGY_RCT

    oncology = ["POSITIVE", "NEGATIVE"]
    return {
        "verdict": [
            *scorer_metrics(verdict(reference_key="reference", bertscore=False)),
            *MEDREQAL.metric_set(True),
        ],
        "outcome": [
            *outcome_metrics(ONCOLOGY_RCT),
            accuracy_all(),
            accuracy_valid(),
            macro_f1_all(oncology),
            macro_f1_valid(oncology),
            valid_rate(),
            label_counts(oncology),
            confusion_counts(oncology),
            by_field("journal", oncology),
            headline(ONCOLOGY_RCT),
        ],
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def _plain(monkeypatch: pytest.MonkeyPatch, metric: Any, scores: list[SampleScore]) -> Any:
    """``metric`` on the same values as fresh scores: no cached table to extend."""
    fresh = [SampleScore(score=Score(value=dict(s.score.value)), sample_id=s.sample_id)
             for s in scores]
    with monkeypatch.context() as m:
        m.setattr(score_table, "_TABLES", type(score_table._TABLES)())
        m.setattr(score_table, "_LAST", [None, None, 0])
        return metric(fresh)


def _refreshes(values: list[dict[str, Any]], rng: random.Random) -> list[list[SampleScore]]:
    """Growing lists as Inspect's refreshes pass them: new SampleScores, the same Scores."""
    scores = [Score(value=v) for v in values]
    out, n = [], 0
    while n < len(scores):
        n = min(len(scores), n + rng.randint(1, 40))
        out.append([SampleScore(score=s, sample_id=i) for i, s in enumerate(scores[:n])])
    return out


@pytest.mark.parametrize("kind", ["verdict", pytest.param("outcome", marks=pytest.mark.slow)])
def test_table_path_equals_plain_path_at_every_refresh(monkeypatch, kind):
    rng = random.Random(7)
    make = verdict_value if kind == "verdict" else outcome_value
    # the oncology set (with its intervals) costs more per refresh than the verdict set
    values = [make(rng) for _ in range(400 if kind == "verdict" else 200)]
    metrics = _metrics()[kind]
    for scores in _refreshes(values, rng):
        for metric in metrics:
            fast = metric(scores)
            assert _same(fast, _plain(monkeypatch, metric, scores)), (metric, len(scores))
    # the run did use the table, and extended it rather than rebuilding it
    table = table_of(scores)
    assert table is not None and len(table) == len(values)


def test_empty_and_single_sample(monkeypatch):
    rng = random.Random(1)
    for metric in _metrics()["verdict"]:
        for scores in ([], [SampleScore(score=Score(value=verdict_value(rng)), sample_id=1)]):
            assert _same(metric(scores), _plain(monkeypatch, metric, scores))


def test_prefix_is_reused_and_a_replaced_score_rebuilds():
    rng = random.Random(2)
    scores = [Score(value=verdict_value(rng)) for _ in range(30)]
    first = table_of([SampleScore(score=s) for s in scores[:20]])
    assert first is not None
    codes = first.codes("prediction", LABELS).copy()
    again = table_of([SampleScore(score=s) for s in scores])
    assert again is first and len(again) == 30  # extended in place
    assert list(again.codes("prediction", LABELS)[:20]) == list(codes)
    # a requeued sample's fresh score replaces its entry: not a prefix any more
    replaced = [*scores[:5], Score(value=verdict_value(rng)), *scores[6:]]
    rebuilt = table_of([SampleScore(score=s) for s in replaced])
    assert rebuilt is not None and rebuilt is not first
    assert rebuilt.values[5] is replaced[5].value


def test_non_dict_values_are_an_error_naming_the_value():
    with pytest.raises(ValueError, match="need dict score values, got 1.0"):
        table_of([SampleScore(score=Score(value=1.0))])
    rng = random.Random(3)
    mixed = [Score(value=verdict_value(rng)), Score(value="C")]
    with pytest.raises(ValueError, match="got 'C'"):
        accuracy_all()([SampleScore(score=s) for s in mixed])
    with pytest.raises(ValueError, match="got 'C'"):
        score_table.rows_of([verdict_value(rng), "C"])


def test_values_from_a_log_give_the_numbers_of_the_live_table():
    """rows_of (the report, the gate) and table_of (a live run) are one path."""
    rng = random.Random(6)
    values = [verdict_value(rng) for _ in range(150)]
    scores = [SampleScore(score=Score(value=v), sample_id=i) for i, v in enumerate(values)]
    live = table_of(scores).rows()
    for key in ("rouge_l", "bertscore_f1"):
        assert _same(generation.mean_present(values, key), generation.mean_present(live, key))
    for fn in (classification.valid_rate_of,
               lambda v: classification.accuracy_of(v, True),
               lambda v: classification.macro_f1_of(v, LABELS, False),
               lambda v: medreqal.by_group(v, "category", "macro_f1")):
        assert _same(fn(values), fn(live))


def test_a_value_a_column_cannot_read_raises_and_drops_the_table():
    rng = random.Random(4)
    scores = [Score(value=verdict_value(rng)) for _ in range(10)]
    table = table_of([SampleScore(score=s) for s in scores])
    assert isinstance(table, Table)
    table.codes("target", LABELS)
    broken = [*scores, Score(value={"prediction": S})]  # no target
    with pytest.raises(KeyError):
        table_of([SampleScore(score=s) for s in broken])
    assert table not in score_table._TABLES.values()
    with pytest.raises(KeyError):
        accuracy_all()([SampleScore(score=s) for s in broken])


def test_rows_behave_as_the_list_of_values():
    rng = random.Random(5)
    scores = [Score(value=outcome_value(rng)) for _ in range(12)]
    table = table_of([SampleScore(score=s) for s in scores])
    assert table is not None
    rows = table.rows()
    assert rows == [s.value for s in scores] and rows.table is table
    groups = table.groups("condition")
    assert sum(len(t) for t in groups.values()) == 12
    assert list(groups) == list(dict.fromkeys(s.value["condition"] for s in scores))
