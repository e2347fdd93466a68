"""The reference record in a verdict sample's metadata (med_evals.data.reference_text)."""

from __future__ import annotations

import asyncio

from inspect_ai.log import EvalSampleSummary
from inspect_ai.scorer import Target

from med_evals.data.reference_text import reference_fields, reference_record, reference_text
from med_evals.scorers.generation import rouge_l
from med_evals.scorers.medreqal import REFUTED, verdict
from tests.scorers.test_medreqal_scorer import state

CONCLUSION = "Exercise probably reduces pain a little in adults with knee osteoarthritis. " * 6


def test_record_and_flat_metadata_read_alike() -> None:
    record = reference_record(CONCLUSION, category="pain", strength="LOW")
    assert record == {"reference": {"text": CONCLUSION, "category": "pain", "strength": "LOW"}}
    flat = {"reference": CONCLUSION, "category": "pain", "strength": "LOW"}
    for metadata in (record, flat):
        assert reference_text(metadata) == CONCLUSION
        assert reference_fields(metadata)["category"] == "pain"
    assert reference_text(None) == "" and reference_text({"reference": {"url": "u"}}) == ""
    assert reference_fields(None) == {}


def test_the_verdict_scorer_reads_the_record() -> None:
    reply = "LABEL: REFUTED\nExercise did not reduce pain."
    s = state(reply, **reference_record(CONCLUSION, category="pain", strength="LOW"))
    score = asyncio.run(verdict(reference_key="reference", bertscore=False)(s, Target("1")))
    assert score.value["prediction"] == REFUTED
    assert (score.value["category"], score.value["strength"]) == ("pain", "LOW")
    assert score.value["rouge_l"] == rouge_l(reply, CONCLUSION) > 0


def test_inspect_keeps_a_short_record_whole_in_sample_summaries() -> None:
    # why the record is nested: Inspect shortens top-level metadata strings (textwrap) each time
    # it builds a summary, and copies a nested value under 1 KB as it is
    record = reference_record(CONCLUSION[:600], category="pain", strength="LOW")
    summary = EvalSampleSummary(id=1, epoch=1, input="q", target="x", metadata=record)
    assert summary.metadata == record
    long = reference_record(CONCLUSION * 3)
    summary = EvalSampleSummary(id=1, epoch=1, input="q", target="x", metadata=long)
    assert summary.metadata["reference"] != long["reference"]  # left out of the summary only
