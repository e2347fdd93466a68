"""HealthFC: loading, the evidence option, an offline run on the fixture, and the shared copy."""

from __future__ import annotations

import csv
import os
import warnings
from pathlib import Path

import pytest
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from med_evals.data.datasets import DatasetError
from med_evals.scorers.bertscore import BertScoreConfig, load_bertscorer
from med_evals.scorers.generation import rouge_l
from med_evals.tasks.healthfc import healthfc, read_healthfc, record_to_sample

from ..support.evals import inspect_eval as eval

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "datasets" / "fixtures" / "healthfc_fixture.csv"
SHARED = Path(os.environ.get("MED_EVALS_SHARED_DATA", ROOT.parent / "shared" / "datasets"))
S, R, N = "SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"


@pytest.fixture(scope="session")
def encoder() -> None:
    """The BERTScore encoder, for the tests that score with it (loaded once per process)."""
    load_bertscorer(BertScoreConfig.make())


def test_read_fixture_and_record_to_sample() -> None:
    df = read_healthfc(FIXTURE)
    assert list(df["gold"]) == [N, S, R, N, R, S]
    sample = record_to_sample(df.to_dict("records")[2], 2)
    assert sample.id == "healthfc-3"
    assert sample.input == "Do magnetic bracelets relieve arthritis pain?"
    assert sample.target == R
    assert sample.metadata["reference"]["text"].startswith("Well-conducted trials")
    assert sample.metadata["reference"]["evidence"].startswith("In blinded trials")


def _rewrite(tmp_path: Path, column: str, row: int, value: str) -> Path:
    rows = list(csv.DictReader(FIXTURE.open(encoding="utf-8")))
    rows[row][column] = value
    out = tmp_path / "Datensatz.csv"
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


def test_empty_claim_names_the_row(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"row 2, column 'en_claim': empty"):
        read_healthfc(_rewrite(tmp_path, "en_claim", 1, " "))


def test_empty_explanation_is_allowed(tmp_path: Path) -> None:
    # the published file has 9 claims without an explanation
    df = read_healthfc(_rewrite(tmp_path, "en_explanation", 0, ""))
    assert df["en_explanation"][0] == "" and len(df) == 6


def run(tmp_path: Path, evidence: bool, replies: dict[str, str], seen: list, **kw):
    def respond(input, tools, tool_choice, config):
        seen.append(input)
        text = input[-1].text
        reply = next(r for claim, r in replies.items() if claim in text)
        out = ModelOutput.from_content("mockllm/model", reply)
        out.usage = ModelUsage(input_tokens=40, output_tokens=20, total_tokens=60)
        return out

    with pytest.warns(UserWarning, match="6 rows, not 750"):
        task = healthfc(data_file=str(FIXTURE), evidence=evidence, **{"metrics": "full", **kw})
    [log] = eval(
        task,
        model=get_model("mockllm/model", custom_outputs=respond),
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success"
    return log


def metrics_of(log) -> dict[str, float]:
    return {name: m.value for s in log.results.scores for name, m in s.metrics.items()}


REPLIES = {
    # gold N: answered N
    "green tea": "LABEL: NOT ENOUGH INFORMATION\nThe trials were short.",
    # gold S: answered S, cites a Cochrane review
    "zinc": "LABEL: SUPPORTED\nA Cochrane review found zinc shortens colds.",
    # gold R: answered S
    "magnetic bracelets": "LABEL: SUPPORTED\nSome patients report relief.",
    # gold N: no label
    "cranberry": "Possibly, for some women.",
    # gold R: answered R, mentions a meta-analysis
    "homeopathy": "REFUTED. A meta-analysis found homeopathy equals placebo.",
    # gold S: answered N
    "physiotherapy": "Not enough information.",
}


@pytest.mark.slow
def test_zero_shot_end_to_end(tmp_path: Path, encoder) -> None:
    seen: list = []
    log = run(tmp_path, False, REPLIES, seen)
    m = metrics_of(log)
    # gold N S R N R S, predicted N S S INVALID R N
    assert m["accuracy_all"] == pytest.approx(3 / 6)
    assert m["accuracy_valid"] == pytest.approx(3 / 5)
    # S: P 1/2 R 1/2; R: P 1 R 1/2 -> 2/3; NEI: P 1/2 R 1/2
    assert m["macro_f1_all"] == pytest.approx((1 / 2 + 2 / 3 + 1 / 2) / 3)
    # valid (drop cranberry): S 1/2; R 2/3; NEI P 1/2 R 1 -> 2/3
    assert m["macro_f1_valid"] == pytest.approx((1 / 2 + 2 / 3 + 2 / 3) / 3)
    assert (m["predicted_supported"], m["predicted_refuted"], m["predicted_nei"]) == (2, 1, 2)
    assert (m["predicted_invalid"], m["predicted_error"]) == (1, 0)
    assert m["gold_refuted_pred_supported"] == 1 and m["gold_nei_pred_invalid"] == 1
    assert not any(k.startswith(("accuracy_category", "accuracy_strength")) for k in m)
    assert (m["mentions_cochrane"], m["mentions_review"], m["mentions_meta_analysis"]) == (1, 1, 1)
    # ROUGE-L against en_explanation
    df = read_healthfc(FIXTURE)
    expected = [
        rouge_l(next(r for c, r in REPLIES.items() if c in q), ref)
        for q, ref in zip(df["en_claim"], df["en_explanation"], strict=True)
    ]
    assert m["rouge_l_mean"] == pytest.approx(sum(expected) / 6)
    assert 0.2 < m["bertscore_f1_mean"] < 0.9
    # zero-shot: the evidence sentences are not in the prompt
    assert all("EVIDENCE:" not in msgs[-1].text for msgs in seen)
    meta = log.eval.metadata
    assert meta["evidence_in_prompt"] is False
    assert meta["generation_reference"] == "en_explanation"
    assert meta["bertscore_layer"] == 6


def test_evidence_option_puts_top_sentences_in_the_prompt(tmp_path: Path) -> None:
    seen: list = []
    log = run(tmp_path, True, REPLIES, seen, prompt="mistral", generation_scoring=False)
    assert log.eval.metadata["evidence_in_prompt"] is True
    prompts = [msgs[-1].text for msgs in seen]
    assert all(len(msgs) == 1 for msgs in seen)  # mistral: one user turn
    zinc = next(p for p in prompts if "zinc" in p)
    assert zinc.startswith("Based on your knowledge, please answer this clinical question")
    assert zinc.endswith(
        "QUESTION: Does zinc shorten the duration of a cold?\nEVIDENCE: Several randomised trials "
        "found colds ended about one day earlier with zinc lozenges."
    )


def test_all_templates_with_evidence(tmp_path: Path) -> None:
    seen: list = []
    log = run(tmp_path, True, REPLIES, seen, prompt="all", generation_scoring=False)
    assert [s.id for s in log.samples][:3] == ["healthfc-1@alpaca", "healthfc-1@chat",
                                               "healthfc-1@mistral"]  # the log sorts them
    assert len(seen) == 18 and all("\nEVIDENCE: " in msgs[-1].text for msgs in seen)
    m = metrics_of(log)
    # the same replies under every template: the same numbers, one per template
    for template in ("chat", "mistral", "alpaca"):
        assert m[f"{template}/accuracy_all"] == pytest.approx(3 / 6)
        assert m[f"{template}/coverage"] == pytest.approx(3 / 6)
    assert "accuracy_all" not in m
    assert log.eval.metadata["prompt"] == "chat,mistral,alpaca"


def test_abstention_in_the_full_metric_set(tmp_path: Path) -> None:
    m = metrics_of(run(tmp_path, False, REPLIES, [], generation_scoring=False))
    # gold N S R N R S, predicted N S S INVALID R N: committed S, S, R (2 right)
    assert m["coverage"] == pytest.approx(3 / 6)
    assert m["selective_accuracy"] == pytest.approx(2 / 3)
    # gold NEI: green tea (NEI) and cranberry (INVALID: no abstention)
    assert m["abstention_recall"] == pytest.approx(1 / 2)
    # gold S or R: physiotherapy answered NEI
    assert m["over_abstention"] == pytest.approx(1 / 4)
    assert (m["n_committed"], m["n_abstained"]) == (3, 2)


@pytest.mark.skipif(
    not (SHARED / "healthfc" / "Datensatz.csv").is_file(), reason="no shared HealthFC copy"
)
def test_shared_copy_loads_all_750_claims() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the counts must match: no warning
        task = healthfc(data_dir=str(SHARED))
    samples = list(task.dataset)
    assert len(samples) == 750
    counts = {label: sum(s.target == label for s in samples) for label in (S, N, R)}
    assert counts == {S: 202, N: 423, R: 125}
    # the evidence sentences travel with the samples only when the prompt uses them
    assert not any("evidence" in s.metadata["reference"] for s in samples)
    with_evidence = healthfc(data_dir=str(SHARED), evidence=True).dataset
    assert all(s.metadata["reference"]["evidence"] for s in with_evidence)
    assert sum(not s.metadata["reference"]["text"] for s in samples) == 9  # no English explanation
    meta = task.metadata
    assert meta["data"]["origin"] == "local"
    assert meta["data"]["sha256"].startswith("6b832bd2")
    assert meta["count_check"].startswith("matches")
    assert len(meta["samples_without_reference"]) == 9


@pytest.mark.slow
def test_generation_means_leave_out_errors_and_missing_references(
    tmp_path: Path, encoder
) -> None:
    """ERROR samples (provider failure) and claims without an explanation are missing from the
    ROUGE-L and BERTScore means (not 0), counted beside them; the means equal rouge-score's and
    bert-score's own values averaged over the claims that got a reply and have a reference."""
    from rouge_score.rouge_scorer import RougeScorer

    data = _rewrite(tmp_path, "en_explanation", 0, "")  # green tea: no explanation
    failing = ("zinc", "homeopathy")

    def respond(input, tools, tool_choice, config):
        text = input[-1].text
        if any(c in text for c in failing):
            raise RuntimeError("provider unavailable")
        reply = next(r for claim, r in REPLIES.items() if claim in text)
        out = ModelOutput.from_content("mockllm/model", reply)
        out.usage = ModelUsage(input_tokens=40, output_tokens=20, total_tokens=60)
        return out

    with pytest.warns(UserWarning, match="6 rows, not 750"):
        task = healthfc(data_file=str(data), metrics="full")
    [log] = eval(
        task,
        model=get_model("mockllm/model", custom_outputs=respond),
        log_dir=str(tmp_path / "logs"),
        display="none",
        max_retries=0,
    )
    assert log.status == "success"
    m = metrics_of(log)
    assert m["predicted_error"] == 2
    assert (m["generation_scored"], m["generation_no_reply"], m["generation_no_reference"]) == (
        3,
        2,
        1,
    )
    df = read_healthfc(data)
    pairs = [
        (next(r for c, r in REPLIES.items() if c in q), ref)
        for q, ref in zip(df["en_claim"], df["en_explanation"], strict=True)
        if ref.strip() and not any(c in q for c in failing)
    ]
    assert len(pairs) == 3
    rouge = RougeScorer(["rougeL"], use_stemmer=True)
    expected_rouge = [rouge.score(ref, reply)["rougeL"].fmeasure for reply, ref in pairs]
    assert m["rouge_l_mean"] == pytest.approx(sum(expected_rouge) / 3, abs=1e-12)
    _, _, f1 = load_bertscorer(BertScoreConfig.make()).score(
        [reply for reply, _ in pairs], [ref for _, ref in pairs]
    )
    assert m["bertscore_f1_mean"] == pytest.approx(float(f1.mean()), abs=1e-6)
    errored = [s for s in log.samples if s.scores["verdict"].value["prediction"] == "ERROR"]
    assert all(s.scores["verdict"].value["rouge_l"] is None for s in errored)
