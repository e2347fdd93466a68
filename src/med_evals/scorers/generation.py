"""Generation scoring of long answers: ROUGE-L and BERTScore F1, and evidence mentions.

MedREQAL compares each reply with the review's authors' conclusions (HealthFC: the article's
explanation) with ROUGE-L (``rouge-score``, Porter stemming) and BERTScore F1 (``bert-score``).

BERTScore (its encoder, configuration and cross-sample batching) is in
:mod:`med_evals.scorers.bertscore`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState
from rapidfuzz.distance import LCSseq

from med_evals.data.reference_text import reference_text
from med_evals.models.batching import loop_batcher
from med_evals.scorers.bertscore import (
    BertScoreBatcher,
    BertScoreConfig,
)
from med_evals.scorers.classification import each_condition, per_condition
from med_evals.scorers.score_table import Table, Value, rows_of
from med_evals.scorers.values import GenerationScores, Mentions
from med_evals.solvers.generate import GENERATE_ERROR


class _CachedPorterStemmer:
    """NLTK's Porter stemmer with memory: the same stems, without stemming a word twice."""

    def __init__(self) -> None:
        from nltk.stem import porter

        self.stem = functools.lru_cache(maxsize=200_000)(porter.PorterStemmer().stem)


@functools.lru_cache(maxsize=1)
def _rouge_tokenizer() -> Any:
    """``rouge-score``'s default tokenizer with Porter stemming, its stemmer cached."""
    from rouge_score import tokenizers

    tokenizer = tokenizers.DefaultTokenizer(use_stemmer=True)
    tokenizer._stemmer = _CachedPorterStemmer()
    return tokenizer


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F-measure of ``candidate`` against ``reference`` (with Porter stemming).

    The value of ``RougeScorer(["rougeL"], use_stemmer=True).score(reference, candidate)``:
    the same tokens (``rouge-score``'s tokenizer and stemmer), the same precision, recall and
    F-measure, but the longest common subsequence comes from ``rapidfuzz`` (bit-parallel C++)
    instead of ``rouge-score``'s pure-Python table, about 10x faster on MedREQAL's replies.
    """
    if not candidate.strip() or not reference.strip():
        return 0.0
    tokenizer = _rouge_tokenizer()
    pred, target = tokenizer.tokenize(candidate), tokenizer.tokenize(reference)
    if not pred or not target:
        return 0.0
    lcs = LCSseq.similarity(target, pred)
    precision, recall = lcs / len(pred), lcs / len(target)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _reply(state: TaskState) -> str:
    if state.metadata.get(GENERATE_ERROR) or not state.output or not state.output.choices:
        return ""
    return state.output.completion or ""


#: The generation scores of a sample that has none (no reply, or no reference).
NO_SCORES: GenerationScores = {
    "rouge_l": None,
    "bertscore_f1": None,
    "bertscore_precision": None,
    "bertscore_recall": None,
}


def mean_present(values: Sequence[Value], key: str) -> float:
    """``float(np.mean(xs))`` over the values whose ``key`` is present (not None); NaN for none.

    The one function behind the ROUGE-L and BERTScore means: the logged metric, the report's
    cell and the gate's row (:func:`generation_means`).
    """
    table = rows_of(values).table
    column = table.column(("get", key), lambda v: v.get(key))

    def mean() -> float:
        xs = [float(x) for x in column if x is not None]
        return float(np.mean(xs)) if xs else math.nan

    return table.memo(("mean", key), mean)  # type: ignore[no-any-return]


def generation_means(values: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The ROUGE-L and BERTScore means of ``values`` under their logged names (the metrics
    :func:`rouge_l_mean` and :func:`bertscore_f1_mean`: the same function,
    :func:`mean_present`): a study's ``means`` (MedREQAL's, HealthFC's spec)."""
    rows = rows_of(values)
    return {f"{key}_mean": mean_present(rows, key) for key in ("rouge_l", "bertscore_f1")}


def _mean_of(key: str) -> Metric:
    """The mean of ``key`` (a number), or one per condition where the scores hold several."""

    def compute(scores: list[SampleScore]) -> float | dict[str, float]:
        return each_condition(  # type: ignore[no-any-return]
            scores, lambda rows: mean_present(rows, key), f"{key}_mean")

    return compute


@metric
def rouge_l_mean() -> Metric:
    """Mean ROUGE-L F-measure over the samples that got a reply and have a reference (the
    others are missing, not 0: see ``generation_counts``); NaN when none has a score."""
    return _mean_of("rouge_l")


@metric
def bertscore_f1_mean() -> Metric:
    """Mean BERTScore F1 over the samples that got a reply and have a reference; NaN when none
    has a score."""
    return _mean_of("bertscore_f1")


@metric
def generation_counts() -> Metric:
    """How many samples the generation means are over, and how many are left out and why.

    Keys: ``generation_scored`` (ROUGE-L present), ``generation_no_reply`` (provider error or
    empty reply), ``generation_no_reference`` (the sample has no reference text).
    """

    def counts(rows: list[Any]) -> dict[str, int]:
        table = rows_of(rows).table
        return {
            "generation_scored": _table_count(table, "rouge_l", present=True),
            "generation_no_reply": _table_count(table, "no_reply"),
            "generation_no_reference": _table_count(table, "no_reference"),
        }

    def compute(scores: list[SampleScore]) -> dict[str, int]:
        return per_condition(scores, counts, "generation_counts")

    return compute


@scorer(metrics=[rouge_l_mean(), bertscore_f1_mean()])
def generation(
    reference_key: str = "reference",
    bertscore_model: str | None = None,
    bertscore_layers: int | None = None,
    bertscore_rescale: bool = False,
    bertscore_batch_size: int = 64,
    bertscore: bool = True,
) -> Scorer:
    """ROUGE-L and BERTScore (P, R, F1) of the reply against the sample's reference text.

    A sample with no reference text gets ``None`` scores and is left out of the means.

    Args:
        reference_key: Sample metadata field holding the reference text: a string, or a
            record whose ``text`` it is (:mod:`med_evals.data.reference_text`).
        bertscore_model: Hugging Face model id or path; default: the packaged MiniLM encoder.
        bertscore_layers: Layer whose embeddings are compared; default 6 for the packaged
            encoder, ``bert-score``'s tuned layer for other models.
        bertscore_rescale: Rescale with ``bert-score``'s baseline for the model.
        bertscore_batch_size: Sentences per encoder forward pass.
        bertscore: False: ROUGE-L only (BERTScore values are None; no encoder is loaded).
    """
    config = BertScoreConfig.make(
        bertscore_model, bertscore_layers, bertscore_rescale, bertscore_batch_size
    )
    batchers: list[BertScoreBatcher] = []  # the running event loop's (loop_batcher)
    info = (config.describe() if bertscore else {"bertscore": "off"}) | {
        "reference_field": reference_key
    }

    async def score(state: TaskState, target: Target) -> Score:
        reply = _reply(state)
        reference = reference_text(state.metadata, reference_key)
        if not reference.strip():
            # nothing to compare with (9 HealthFC claims have no explanation): no score, and
            # the means are taken over the samples that have a reference
            return Score(value=dict(NO_SCORES), metadata=info | {"no_reference": True})  # type: ignore[arg-type]
        p = r = f = None
        if bertscore:
            p, r, f = await loop_batcher(batchers, lambda: BertScoreBatcher(config)).score(
                reply, reference
            )
        return Score(
            value={
                "rouge_l": rouge_l(reply, reference),
                "bertscore_f1": f,
                "bertscore_precision": p,
                "bertscore_recall": r,
            },
            metadata=info,
        )

    return score


# --- evidence mentions (the paper's Table 5) ---------------------------------------------------

#: Table 5's terms: "Cochrane", "review*", "meta-analys*" (any case; "meta analysis" and
#: "metaanalysis" too).
EVIDENCE_TERMS: dict[str, re.Pattern[str]] = {
    "cochrane": re.compile(r"\bcochrane\b", re.I),
    "review": re.compile(r"\breview", re.I),
    "meta_analysis": re.compile(r"\bmeta[\s-]?analys", re.I),
}


def evidence_mentions_in(reply: str) -> Mentions:
    """Which of Table 5's terms a reply mentions."""
    found = {term: bool(p.search(reply)) for term, p in EVIDENCE_TERMS.items()}
    return Mentions(
        cochrane=found["cochrane"], review=found["review"], meta_analysis=found["meta_analysis"]
    )


@metric
def evidence_mention_counts() -> Metric:
    """How many replies mention each term.

    Keys: ``mentions_cochrane``, ``mentions_review``, ``mentions_meta_analysis``.
    """

    def counts(rows: list[Any]) -> dict[str, int]:
        table = rows_of(rows).table
        return {f"mentions_{term}": _table_count(table, term) for term in EVIDENCE_TERMS}

    def compute(scores: list[SampleScore]) -> dict[str, int]:
        return per_condition(scores, counts, "evidence_mention_counts")

    return compute


def _table_count(table: Table, key: str, present: bool = False) -> int:
    """How many values have a true ``v.get(key)`` (with ``present``: one that is not None)."""
    column = table.column(("get", key), lambda v: v.get(key))
    if present:
        return table.memo(("present", key), lambda: sum(x is not None for x in column))  # type: ignore[no-any-return]
    return table.memo(("true", key), lambda: sum(bool(x) for x in column))  # type: ignore[no-any-return]
