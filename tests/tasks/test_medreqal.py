"""MedREQAL: loading, prompts, and an offline end-to-end run on the fixture with every metric."""

from __future__ import annotations

import csv
import math
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai.model import ChatMessageSystem, ModelOutput, ModelUsage, get_model

from med_evals.data.datasets import DatasetError, check_counts
from med_evals.scorers.bertscore import BertScoreConfig, load_bertscorer, packaged_encoder_path
from med_evals.solvers import medreqal as verdict_prompts
from med_evals.tasks.medreqal import medreqal, read_medreqal, record_to_sample

from ..support.evals import inspect_eval as eval
from ..support.prompts import sent

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "datasets" / "fixtures" / "medreqal_fixture.csv"
S, R, N = "SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"


@pytest.fixture(scope="session")
def encoder() -> None:
    """The BERTScore encoder, for the tests that score with it (loaded once per process)."""
    load_bertscorer(BertScoreConfig.make())


# --- loading ------------------------------------------------------------------------------


def test_read_fixture() -> None:
    df = read_medreqal(FIXTURE)
    assert len(df) == 12
    assert df["gold"].value_counts().to_dict() == {S: 5, N: 5, R: 2}


def test_record_to_sample() -> None:
    row = read_medreqal(FIXTURE).to_dict("records")[1]
    sample = record_to_sample(row, 1)
    assert sample.id == "medreqal-2"
    assert sample.input == row["question"]
    assert sample.target == R
    record = sample.metadata["reference"]
    assert record["text"].startswith("Regular vitamin C supplementation")
    assert record["category"] == "immune system and infections"
    assert record["strength"] == "HIGH"


def _rewrite(tmp_path: Path, edit) -> Path:
    rows = list(csv.DictReader(FIXTURE.open(encoding="utf-8")))
    rows = edit(rows)
    out = tmp_path / "MedREQAL.csv"
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


def test_verdicts_column_is_accepted(tmp_path: Path) -> None:
    def rename(rows):
        return [{("verdicts" if k == "verdict" else k): v for k, v in r.items()} for r in rows]

    df = read_medreqal(_rewrite(tmp_path, rename))
    assert list(df["gold"]) == list(read_medreqal(FIXTURE)["gold"])


def test_verdict_disagreeing_with_label_names_the_row(tmp_path: Path) -> None:
    def corrupt(rows):
        rows[2]["verdict"] = "SUPPORTED"
        return rows

    with pytest.raises(DatasetError, match=r"row 3, column 'verdict'"):
        read_medreqal(_rewrite(tmp_path, corrupt))


def test_unknown_label_code(tmp_path: Path) -> None:
    def corrupt(rows):
        rows[0]["label"] = "3"
        return rows

    with pytest.raises(DatasetError, match=r"row 1, column 'label'"):
        read_medreqal(_rewrite(tmp_path, corrupt))


def test_missing_column(tmp_path: Path) -> None:
    def drop(rows):
        return [{k: v for k, v in r.items() if k != "conclusion"} for r in rows]

    with pytest.raises(DatasetError, match="missing column.*'conclusion'"):
        read_medreqal(_rewrite(tmp_path, drop))


def test_count_check_matches_the_paper() -> None:
    labels = pd.Series([S] * 543 + [R] * 186 + [N] * 2057)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_counts(FIXTURE, labels, "medreqal") is None


def test_count_check_says_what_differs() -> None:
    labels = pd.Series([S] * 544 + [R] * 186 + [N] * 2057)
    with pytest.warns(UserWarning, match="2787 rows, not 2786; 544 SUPPORTED, not 543"):
        message = check_counts(FIXTURE, labels, "medreqal")
    assert "not comparable" in message


def test_pinned_file_is_verified(tmp_path: Path) -> None:
    (tmp_path / "medreqal").mkdir()
    shutil.copy(FIXTURE, tmp_path / "medreqal" / "MedREQAL.csv")
    with pytest.raises(DatasetError, match="git blob id"):
        medreqal(data_dir=str(tmp_path))


def test_unknown_prompt() -> None:
    with pytest.raises(ValueError, match="unknown prompt .llama.; choose from chat"):
        medreqal(prompt="llama", data_file=str(FIXTURE))


# --- prompts (Table 7) --------------------------------------------------------------------

INSTRUCTION = (
    "please answer this clinical question only with SUPPORTED (if the question is supported by "
    "the clinical research) or REFUTED (if the hypothesis is refuted by the current clinical "
    "research) or NOT ENOUGH INFORMATION (if there is insufficient evidence for the question in "
    "current research). Please give your output in form of LABEL: (label) . Briefly explain your "
    "answer. QUESTION: Does X help?"
)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_prompts_verbatim() -> None:
    system, user = verdict_prompts.render("chat", "Does X help?")
    assert system == (
        "You are an AI assistant helping answer clinical and medical questions based on your "
        "best knowledge."
    )
    assert user == "P" + INSTRUCTION[1:]
    system, user = verdict_prompts.render("mistral", "Does X help?")
    assert system is None
    assert user == "Based on your knowledge, " + INSTRUCTION
    system, user = verdict_prompts.render("alpaca", "Does X help?")
    assert system is None
    assert _flat(user) == (
        "Below is an instruction that describes a task, paired with an input that provides "
        "further context. Write a response that appropriately completes the request. ### "
        "Instruction: Based on your best current knowledge, please answer the following medical "
        "question. If you think there is not enough evidence to answer, then say so. Please "
        'answer the question with "SUPPORTED" or "REFUTED" or "NOT ENOUGH INFORMATION". Briefly '
        "explain your answer. ### Input: Does X help? ### Response:"
    )


def test_braces_in_questions_are_kept() -> None:
    assert verdict_prompts.render("chat", "Is {x} safe?")[1].endswith("QUESTION: Is {x} safe?")


# --- end to end, offline ------------------------------------------------------------------

#: question start -> reply; the replies are chosen so every metric has a known value
REPLIES = {
    "Does regular aerobic": "LABEL: SUPPORTED\nA Cochrane review found exercise reduces symptoms.",
    "Does vitamin C": "LABEL: REFUTED\nA meta-analysis of trials found no preventive effect.",
    "Is acupuncture": "LABEL: NOT ENOUGH INFORMATION\nTrials are small.",
    "Do inhaled": "Inhaled corticosteroids reduce exacerbations. NOT ENOUGH INFORMATION",
    "Does omega-3": "LABEL: SUPPORTED\nSystematic reviews suggest a benefit.",
    "Can music therapy": "It depends on the child.",
    "Does early mobilisation": "Not enough information: too few trials were reviewed.",
    "Does chewing gum": "LABEL: SUPPORTED\nChewing gum shortens the time to bowel recovery.",
    "Is probiotic": "SUPPORTED for duration, REFUTED for severity.",
    "Does topical fluoride": "LABEL: REFUTED\nFluoride varnish has no effect.",
    "Do antioxidant": "LABEL: NOT ENOUGH INFORMATION\nThe evidence is of low quality.",
    "Does screening": "",
}
# gold and parsed prediction per fixture row (same order as the CSV)
GOLD = [S, R, N, S, R, N, N, S, N, S, N, S]
PRED = [S, R, N, N, S, "INVALID", N, S, "INVALID", R, N, "ERROR"]


def reply_for(text: str) -> str:
    for start, reply in REPLIES.items():
        if start in text:
            return reply
    raise AssertionError(f"no reply for prompt {text[:80]!r}")


def mock_model(seen: list | None = None):
    def respond(input, tools, tool_choice, config):
        if seen is not None:
            seen.append(input)
        out = ModelOutput.from_content("mockllm/model", reply_for(input[-1].text))
        out.usage = ModelUsage(input_tokens=50, output_tokens=20, total_tokens=70)
        return out

    return get_model("mockllm/model", custom_outputs=respond)


def metrics_of(log) -> dict[str, float]:
    return {name: m.value for s in log.results.scores for name, m in s.metrics.items()}


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory, encoder):
    seen: list = []
    with pytest.warns(UserWarning, match="counts differ"):
        task = medreqal(data_file=str(FIXTURE), metrics="full")
    [log] = eval(
        task,
        model=mock_model(seen),
        log_dir=str(tmp_path_factory.mktemp("logs")),
        display="none",
    )
    return log, seen


def test_fixture_answers_as_planned() -> None:
    df = read_medreqal(FIXTURE)
    assert list(df["gold"]) == GOLD
    from med_evals.scorers.medreqal import parse_verdict

    assert [parse_verdict(reply_for(q)) for q in df["question"]] == PRED


@pytest.mark.slow
def test_end_to_end_classification_metrics(chat_run) -> None:
    log, _ = chat_run
    assert log.status == "success"
    m = metrics_of(log)
    # correct: rows 1,2,3,7,8,11 -> 6 of 12; valid replies: 9, of which 6 correct
    assert m["accuracy_all"] == pytest.approx(6 / 12)
    assert m["accuracy_valid"] == pytest.approx(6 / 9)
    # all: S P 2/3 R 2/5 -> 1/2; R P 1/2 R 1/2 -> 1/2; NEI P 3/4 R 3/5 -> 2/3
    assert m["macro_f1_all"] == pytest.approx((1 / 2 + 1 / 2 + 2 / 3) / 3)
    # valid: S P 2/3 R 2/4 -> 4/7; R P 1/2 R 1/2; NEI P 3/4 R 3/3 -> 6/7
    assert m["macro_f1_valid"] == pytest.approx((4 / 7 + 1 / 2 + 6 / 7) / 3)
    assert {k: m[k] for k in m if k.startswith("predicted_")} == {
        "predicted_supported": 3,
        "predicted_refuted": 2,
        "predicted_nei": 4,
        "predicted_invalid": 2,
        "predicted_error": 1,
    }
    # abstention: committed S/R replies 5 (3 right); gold NEI 5, answered NEI 3; gold S or R 7,
    # answered NEI 1
    assert (m["coverage"], m["selective_accuracy"]) == (pytest.approx(5 / 12), pytest.approx(3 / 5))
    assert m["abstention_recall"] == pytest.approx(3 / 5)
    assert m["over_abstention"] == pytest.approx(1 / 7)
    cm = {k: v for k, v in m.items() if k.startswith("gold_") and v}
    assert cm == {
        "gold_supported_pred_supported": 2,
        "gold_supported_pred_nei": 1,
        "gold_supported_pred_refuted": 1,
        "gold_supported_pred_error": 1,
        "gold_refuted_pred_refuted": 1,
        "gold_refuted_pred_supported": 1,
        "gold_nei_pred_nei": 3,
        "gold_nei_pred_invalid": 2,
    }


@pytest.mark.slow
def test_end_to_end_per_category_and_strength(chat_run) -> None:
    m = metrics_of(chat_run[0])
    assert m["accuracy_category_cognitive_and_mental_health"] == pytest.approx(1 / 2)
    assert m["accuracy_category_digestive_system_and_metabolism"] == pytest.approx(1 / 2)
    assert m["accuracy_category_cancer"] == 0.0
    assert m["accuracy_category_immune_system_and_infections"] == 1.0
    # musculoskeletal: two NEI questions, both answered NEI
    assert m["macro_f1_category_musculoskeletal_system_and_dermatology"] == pytest.approx(1 / 3)
    # LOW rows 3,6,7,11: N/N, N/INVALID, N/N, N/N -> 3/4
    assert m["accuracy_strength_low"] == pytest.approx(3 / 4)
    # HIGH rows 2,4,12: R/R, S/N, S/ERROR -> 1/3
    assert m["accuracy_strength_high"] == pytest.approx(1 / 3)
    # MEDIUM rows 1,5,8,9,10: S/S, R/S, S/S, N/INVALID, S/R -> 2/5
    assert m["accuracy_strength_medium"] == pytest.approx(2 / 5)
    # MEDIUM macro-F1: S P 2/3 R 2/3; R 0; NEI 0
    assert m["macro_f1_strength_medium"] == pytest.approx((2 / 3) / 3)


@pytest.mark.slow
def test_end_to_end_generation_and_mentions(chat_run) -> None:
    from bert_score import score as bert_score
    from rouge_score import rouge_scorer

    m = metrics_of(chat_run[0])
    df = read_medreqal(FIXTURE)
    replies = [reply_for(q) for q in df["question"]]
    refs = list(df["conclusion"])
    rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    # an empty reply is no reply (ERROR): missing from the means, not 0, and counted
    nonempty = [i for i, c in enumerate(replies) if c]
    assert len(nonempty) < 12
    assert m["generation_no_reply"] == 12 - len(nonempty)
    assert m["generation_scored"] == len(nonempty)
    expected_rouge = [rouge.score(refs[i], replies[i])["rougeL"].fmeasure for i in nonempty]
    assert m["rouge_l_mean"] == pytest.approx(sum(expected_rouge) / len(nonempty))
    _, _, f = bert_score(
        [replies[i] for i in nonempty],
        [refs[i] for i in nonempty],
        model_type=str(packaged_encoder_path()),
        num_layers=6,
    )
    assert m["bertscore_f1_mean"] == pytest.approx(float(f.mean()), abs=1e-5)
    assert 0.2 < m["bertscore_f1_mean"] < 0.9
    # Cochrane: row 1; review*: rows 1, 5 (reviews), 7 (reviewed); meta-analys*: row 2
    assert (m["mentions_cochrane"], m["mentions_review"], m["mentions_meta_analysis"]) == (1, 3, 1)


@pytest.mark.slow
def test_end_to_end_log_records_what_produced_it(chat_run) -> None:
    log, seen = chat_run
    meta = log.eval.metadata
    assert meta["prompt"] == "chat"
    assert meta["data"]["file"] == FIXTURE.name and len(meta["data"]["sha256"]) == 64
    assert "12 rows, not 2786" in meta["count_check"]
    assert meta["bertscore_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert (meta["bertscore_layer"], meta["bertscore_rescaled"]) == (6, False)
    config = log.plan.config
    assert (config.temperature, config.max_tokens) == (0.0, 256)
    # chat: a system message then the question in the user message
    assert len(seen) == 12
    assert all(isinstance(msgs[0], ChatMessageSystem) and len(msgs) == 2 for msgs in seen)
    sample = log.samples[0]
    assert sample.scores["verdict"].answer == S
    # one scorer: the label, the explanation's generation scores and the mentions together
    assert set(sample.scores) == {"verdict"}
    assert sample.scores["verdict"].value["bertscore_f1"] > 0
    assert meta["label_parser"] == "parse_verdict"


def test_alpaca_prompt_is_one_user_message(tmp_path) -> None:
    seen: list = []
    with pytest.warns(UserWarning):
        task = medreqal(prompt="alpaca", data_file=str(FIXTURE), generation_scoring=False)
    [log] = eval(task, model=mock_model(seen), log_dir=str(tmp_path), display="none", limit=2)
    assert log.status == "success"
    assert all(len(msgs) == 1 and msgs[0].role == "user" for msgs in seen)
    assert seen[0][0].text.endswith("### Response:")
    # no generation scores: none in the samples, NaN means (not 0)
    assert all("rouge_l" not in s.scores["verdict"].value for s in log.samples)
    m = metrics_of(log)
    assert math.isnan(m["rouge_l_mean"]) and math.isnan(m["bertscore_f1_mean"])


def test_epochs_reduce_to_majority_label(tmp_path) -> None:
    calls: dict[str, int] = {}

    def respond(input, tools, tool_choice, config):
        text = input[-1].text
        calls[text] = calls.get(text, 0) + 1
        # epoch 1: SUPPORTED, epochs 2 and 3: REFUTED
        label = S if calls[text] == 1 else R
        out = ModelOutput.from_content("mockllm/model", f"LABEL: {label}")
        out.usage = ModelUsage(input_tokens=5, output_tokens=5, total_tokens=10)
        return out

    with pytest.warns(UserWarning):
        task = medreqal(data_file=str(FIXTURE), generation_scoring=False, epochs=3, metrics="full")
    [log] = eval(
        task,
        model=get_model("mockllm/model", custom_outputs=respond),
        log_dir=str(tmp_path),
        display="none",
        limit=2,
        max_samples=1,  # one sample at a time, so epochs run in order
    )
    assert log.status == "success"
    m = metrics_of(log)
    # both questions reduce to REFUTED (2 of 3 epochs); gold is SUPPORTED then REFUTED
    assert m["predicted_refuted"] == 2 and m["accuracy_all"] == pytest.approx(1 / 2)


def test_bertscore_off_keeps_rouge(tmp_path) -> None:
    from inspect_ai.model import get_model

    from ..conftest import replying
    from ..support.evals import inspect_eval

    task = medreqal(data_file=str(FIXTURE), bertscore=False)
    model = get_model("mockllm/model", custom_outputs=replying(lambda t: f"LABEL: SUPPORTED. {t}"))
    [log] = inspect_eval(task, model=model, display="none", log_dir=str(tmp_path), limit=3)
    gen = [s.scores["verdict"].value for s in log.samples]
    assert all(g["bertscore_f1"] is None and isinstance(g["rouge_l"], float) for g in gen)
    assert any(g["rouge_l"] > 0 for g in gen)
    assert log.eval.metadata["bertscore"] is False


def test_agreement_judge_is_optional_beside_generation(tmp_path) -> None:
    from inspect_ai.model import get_model

    from ..conftest import mock_output, replying
    from ..support.evals import inspect_eval

    grader = get_model(
        "mockllm/grader", custom_outputs=lambda *a: mock_output('{"verdict": "partly agrees"}')
    )
    model = get_model("mockllm/model", custom_outputs=replying(lambda t: "LABEL: REFUTED. No."))
    [log] = inspect_eval(
        medreqal,
        task_args={"data_file": str(FIXTURE), "judge": True, "bertscore": False},
        model=model,
        model_roles={"grader": grader},
        display="none",
        log_dir=str(tmp_path),
        limit=4,
    )
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    assert m["partly_agrees"] == 1.0 and m["judge_failures"] == 0 and m["n"] == 4
    with pytest.raises(Exception, match="grader"):
        inspect_eval(
            medreqal,
            task_args={"data_file": str(FIXTURE), "judge": True},
            model=model,
            display="none",
            log_dir=str(tmp_path),
        )


# --- several prompt templates in one run (-T prompt=all) -----------------------------------


def test_one_template_keeps_its_sample_ids_and_no_condition() -> None:
    with pytest.warns(UserWarning):
        task = medreqal(prompt="alpaca", data_file=str(FIXTURE), generation_scoring=False)
    ids = [s.id for s in task.dataset]
    assert ids == [f"medreqal-{i}" for i in range(1, 13)]
    assert not any("condition" in s.metadata for s in task.dataset)
    assert task.metadata["prompt"] == "alpaca"
    assert task.metadata["prompt_models_in_paper"] == "ChatDoctor-7B, MedAlpaca-7B, PMC-LLaMa-13B"


def test_all_templates_ask_every_question_under_each() -> None:
    with pytest.warns(UserWarning):
        task = medreqal(prompt="all", data_file=str(FIXTURE), generation_scoring=False)
    samples = list(task.dataset)
    assert len(samples) == 36
    # question-major, each id unique in the run: the question's id and its template
    assert [s.id for s in samples[:4]] == [
        "medreqal-1@chat", "medreqal-1@mistral", "medreqal-1@alpaca", "medreqal-2@chat"]
    assert [s.metadata["condition"] for s in samples[:3]] == ["chat", "mistral", "alpaca"]
    question = read_medreqal(FIXTURE)["question"][0]
    # the input is the question itself (what inspect view lists); each template is sent
    assert {s.input for s in samples[:3]} == {question}
    chat, mistral, alpaca = sent(task, samples[:3]).values()
    assert [m.role for m in chat] == ["system", "user"]
    assert [(m.role, m.text) for m in chat] == [
        ("system", verdict_prompts.CHAT_SYSTEM),
        ("user", verdict_prompts.render("chat", question)[1])]
    assert [(m.role, m.text) for m in mistral] == [
        ("user", verdict_prompts.render("mistral", question)[1])]
    assert len(alpaca) == 1 and alpaca[0].text.endswith("### Response:")
    assert {s.target for s in samples[:3]} == {S}
    assert task.metadata["prompt"] == "chat,mistral,alpaca"
    assert set(task.metadata["prompt_models_in_paper"]) == {"chat", "mistral", "alpaca"}


def test_a_list_of_templates_runs_those_in_the_papers_order() -> None:
    with pytest.warns(UserWarning):
        task = medreqal(prompt="alpaca,chat", data_file=str(FIXTURE), generation_scoring=False)
    assert [s.id for s in list(task.dataset)[:2]] == ["medreqal-1@chat", "medreqal-1@alpaca"]
    assert task.metadata["prompt"] == "chat,alpaca"
    with pytest.raises(ValueError) as raised:
        medreqal(prompt="chat,llama", data_file=str(FIXTURE))
    assert str(raised.value) == ("medreqal: -T prompt=chat,llama: unknown prompt 'llama'; choose "
                                 "from chat, mistral, alpaca (or a group: all)")


def test_each_template_is_a_condition_of_every_metric(tmp_path) -> None:
    def respond(input, tools, tool_choice, config):
        # alpaca: the planned replies; chat: NOT ENOUGH INFORMATION to every question
        text = input[-1].text
        reply = reply_for(text) if text.endswith("### Response:") else f"LABEL: {N}"
        out = ModelOutput.from_content("mockllm/model", reply)
        out.usage = ModelUsage(input_tokens=5, output_tokens=5, total_tokens=10)
        return out

    with pytest.warns(UserWarning):
        task = medreqal(prompt="chat,alpaca", data_file=str(FIXTURE), generation_scoring=False,
                        metrics="full")
    [log] = eval(task, model=get_model("mockllm/model", custom_outputs=respond),
                 log_dir=str(tmp_path), display="none")
    m = metrics_of(log)
    assert {s.scores["verdict"].value["condition"] for s in log.samples} == {"chat", "alpaca"}
    # chat: NEI to all (5 of 12 gold NEI); alpaca: the planned replies (6 of 12 right)
    assert m["chat/accuracy_all"] == pytest.approx(5 / 12)
    assert m["alpaca/accuracy_all"] == pytest.approx(6 / 12)
    assert m["chat/predicted_nei"] == 12 and m["alpaca/predicted_nei"] == 4
    assert m["chat/coverage"] == 0.0 and m["alpaca/coverage"] == pytest.approx(5 / 12)
    assert m["chat/gold_nei_pred_nei"] == 5
    assert "chat/rouge_l_mean" in m and "rouge_l_mean" not in m
    assert m["alpaca/accuracy_strength_low"] == pytest.approx(3 / 4)
