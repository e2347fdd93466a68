"""Epoch reduction keeps one epoch's whole label record; floats are means over present values;
a 3-epoch oncology run with conflicting replies finishes with self-consistent scores."""

import itertools

import pytest
from inspect_ai.model import get_model
from inspect_ai.scorer import Score

from med_evals.logs.runs import load_run
from med_evals.scorers.labels import ERROR, INVALID
from med_evals.scorers.oncology_rct import TRIAL_OUTCOME, outcome_value, summarize_condition
from med_evals.scorers.reducers import majority_label, reduce_values
from med_evals.tasks.oncology_rct import oncology_rct

from ..conftest import mock_output
from ..oncology_support import install_fixture
from ..support.evals import inspect_eval


def _outcome(reply: str | None, target: str = "POSITIVE") -> dict:
    return outcome_value(reply, target=target, condition="doi_only", trial=0)


def _consistent(v: dict) -> bool:
    valid = TRIAL_OUTCOME.is_label(v["prediction"])
    return v["valid"] == valid and v["correct"] == int(valid and v["prediction"] == v["target"])


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        (["INVALID!", "POSITIVE", "NEGATIVE"], INVALID),  # three-way tie: first epoch's record
        (["NEGATIVE", "POSITIVE", "POSITIVE"], "POSITIVE"),  # 2-of-3 majority wins
        (["POSITIVE", "NEGATIVE", "NEGATIVE"], "NEGATIVE"),
        ([None, None, "POSITIVE"], ERROR),  # two ERROR epochs (no reply) outvote one label
        ([None, "POSITIVE", "NEGATIVE"], ERROR),  # tie: first seen
        (["POSITIVE", None, None, "POSITIVE"], "POSITIVE"),  # 2-2 tie: POSITIVE seen first
        (["maybe", "NEGATIVE", "maybe"], INVALID),
    ],
)
def test_reduced_record_is_one_epochs_whole_record(replies, expected):
    values = [_outcome(r) for r in replies]
    record, i = reduce_values(values)
    assert record["prediction"] == expected
    assert _consistent(record)
    # every label field comes from the chosen epoch, none from another
    for key in ("prediction", "valid", "correct", "exact_case", "lenient"):
        assert record[key] == values[i][key]
    assert record["agreement"] == pytest.approx(
        sum(v["prediction"] == expected for v in values) / len(values)
    )


def test_every_mix_of_three_epochs_reduces_consistently():
    replies = ["POSITIVE", "NEGATIVE", "nonsense", None]
    for combo in itertools.product(replies, repeat=3):
        for target in ("POSITIVE", "NEGATIVE"):
            record, _ = reduce_values([_outcome(r, target) for r in combo])
            assert _consistent(record), combo


def test_floats_are_means_over_epochs_that_produced_them():
    scores = [
        Score(value={"prediction": "REFUTED", "target": "REFUTED", "valid": True, "rouge_l": 0.2}),
        Score(value={"prediction": "ERROR", "target": "REFUTED", "valid": False, "rouge_l": None}),
        Score(value={"prediction": "REFUTED", "target": "REFUTED", "valid": True, "rouge_l": 0.6}),
    ]
    reduced = majority_label()(scores)
    assert reduced.value["prediction"] == "REFUTED"
    assert reduced.value["rouge_l"] == pytest.approx(0.4)  # the ERROR epoch had no score
    assert reduced.metadata["epochs"] == 3
    all_missing = majority_label()([Score(value={"x": None}), Score(value={"x": None})])
    assert all_missing.value["x"] is None


def test_three_epoch_oncology_run_with_conflicting_replies(tmp_path, monkeypatch):
    """Once a crash at metric time (a field-by-field mix made INVALID look valid)."""
    install_fixture(tmp_path, monkeypatch)
    cycle = itertools.cycle(["INVALID", "POSITIVE", "NEGATIVE", "POSITIVE", "POSITIVE", ""])

    def outputs(input, tools, tool_choice, config):  # noqa: A002
        return mock_output(next(cycle))

    [log] = inspect_eval(
        oncology_rct(condition="doi_only"),
        model=get_model("mockllm/model", custom_outputs=outputs),
        epochs=3,
        display="none",
        log_dir=str(tmp_path / "logs"),
        max_samples=1,
    )
    assert log.status == "success", log.error
    run = load_run(log.location)
    assert len(run.values) == 6
    for v in run.values.values():
        assert _consistent(v), v
    # the logged headline equals the summary of the reduced values (one function)
    s = summarize_condition(list(run.values.values()))
    assert run.metrics["accuracy_valid"] == pytest.approx(s["strict"]["accuracy"], nan_ok=True)
    assert run.metrics["valid_rate"] == pytest.approx(s["valid_rate"])
    assert run.headline_values() == pytest.approx(
        {k: run.metrics[k] for k in ("valid_rate", "accuracy_valid", "macro_f1_valid")},
        nan_ok=True,
    )
