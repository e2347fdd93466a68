"""The verdict scorer and its epoch reducer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from inspect_ai.model import ChatMessageUser, ModelOutput
from inspect_ai.scorer import Score, Target
from inspect_ai.solver import TaskState

from med_evals.scorers.medreqal import (
    NEI,
    REFUTED,
    SUPPORTED,
    target_label,
    verdict,
)
from med_evals.scorers.reducers import majority_label


def state(reply: str | None, **metadata: Any) -> TaskState:
    s = TaskState(
        model="mockllm/model",
        sample_id=1,
        epoch=1,
        input="q",
        messages=[ChatMessageUser(content="q")],
        metadata=dict(metadata),
    )
    if reply is not None:
        s.output = ModelOutput.from_content("mockllm/model", reply)
    return s


def run(s: TaskState, target: str) -> Score:
    return asyncio.run(verdict()(s, Target(target)))


def test_value_answer_explanation() -> None:
    reply = "LABEL: REFUTED\nTrials found no benefit."
    score = run(state(reply, category="cancer", strength="HIGH"), REFUTED)
    assert score.value == {
        "prediction": REFUTED,
        "target": REFUTED,
        "valid": True,
        "category": "cancer",
        "strength": "HIGH",
        "cochrane": False,
        "review": False,
        "meta_analysis": False,
    }
    assert score.answer == REFUTED
    assert score.explanation == reply


def test_one_scorer_for_label_explanation_and_mentions() -> None:
    from med_evals.scorers.generation import rouge_l

    reply = "LABEL: SUPPORTED\nA Cochrane meta-analysis found that aspirin reduced pain."
    reference = "Aspirin reduces pain in adults."
    s = state(reply, reference=reference)
    score = asyncio.run(verdict(reference_key="reference", bertscore=False)(s, Target("0")))
    assert score.value["prediction"] == SUPPORTED and score.value["valid"] is True
    assert score.value["rouge_l"] == rouge_l(reply, reference) > 0
    assert score.value["bertscore_f1"] is None  # BERTScore off
    assert (score.value["cochrane"], score.value["review"], score.value["meta_analysis"]) == (
        True,
        False,
        True,
    )
    assert score.metadata is None  # settings are recorded once, in the task's metadata
    no_ref = asyncio.run(
        verdict(reference_key="reference", bertscore=False)(state(reply), Target("0"))
    )
    assert no_ref.metadata == {"no_reference": True} and no_ref.value["rouge_l"] is None
    # label only
    plain = asyncio.run(verdict(mentions=False)(state(reply, reference=reference), Target("0")))
    assert set(plain.value) == {"prediction", "target", "valid"}


def test_invalid_reply_and_no_groups() -> None:
    score = run(state("It depends."), NEI)
    assert score.value == {
        "prediction": "INVALID",
        "target": NEI,
        "valid": False,
        "cochrane": False,
        "review": False,
        "meta_analysis": False,
    }


def test_no_reply_is_error() -> None:
    assert run(state(None), SUPPORTED).value["prediction"] == "ERROR"
    errored = state("LABEL: SUPPORTED", generate_error="RateLimitError: too many requests")
    score = run(errored, SUPPORTED)
    assert score.value["prediction"] == "ERROR"
    assert "RateLimitError" in score.explanation


def test_target_label_accepts_codes_and_names() -> None:
    assert target_label("0") == SUPPORTED
    assert target_label("1") == NEI
    assert target_label("2") == REFUTED
    assert target_label("Not enough information") == NEI
    with pytest.raises(ValueError):
        target_label("MAYBE")


def _score(pred: str, rouge: float, cochrane: bool = False) -> Score:
    return Score(value={"prediction": pred, "target": SUPPORTED, "rouge_l": rouge, "c": cochrane})


def test_reducer_majority_label_and_mean_of_floats() -> None:
    reduced = majority_label()(
        [_score(SUPPORTED, 0.1), _score(REFUTED, 0.2, True), _score(REFUTED, 0.6, True)]
    )
    assert reduced.value["prediction"] == REFUTED
    assert reduced.value["rouge_l"] == pytest.approx(0.3)
    assert reduced.value["c"] is True
    assert reduced.value["agreement"] == pytest.approx(2 / 3)


def test_reducer_tie_goes_to_first_epoch() -> None:
    reduced = majority_label()([_score(NEI, 0.0), _score(SUPPORTED, 1.0)])
    assert reduced.value["prediction"] == NEI
    assert reduced.value["agreement"] == pytest.approx(1 / 2)
    assert reduced.value["rouge_l"] == pytest.approx(0.5)
