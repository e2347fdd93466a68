import json

import pytest
from inspect_ai import score as inspect_score
from inspect_ai.model import get_model

from med_evals.data.datasets import DatasetError
from med_evals.scorers.medevidence import effect_direction
from med_evals.tasks.medevidence import medevidence, read_questions

from ..conftest import replying
from ..medevidence_support import FIXTURE_JSONL, install_medevidence
from ..support.evals import inspect_eval
from ..support.prompts import sent


@pytest.fixture
def fixture_data(tmp_path, monkeypatch):
    return install_medevidence(tmp_path, monkeypatch)


def _metrics(log):
    return {
        (m.group, m.name if m.group else k): m.value
        for s in log.results.scores
        for k, m in s.metrics.items()
    }


def test_prompts_closed_book_and_evidence(fixture_data):
    task = medevidence(condition="closed_book,evidence")
    samples = {s.id: s for s in task.dataset}
    assert len(samples) == 10
    question = ("Is pain at 24 hours higher, lower, or the same when comparing drug B to "
                "placebo?")
    # the input is the question itself (what inspect view lists); the prompt is sent
    inputs = {samples[f"{c}-90000001-1"].input for c in ("closed_book", "evidence")}
    assert inputs == {question}
    messages = sent(task, [samples["closed_book-90000001-1"], samples["evidence-90000001-1"]])
    closed, evid = messages.values()
    assert [m.role for m in closed] == [m.role for m in evid] == ["system", "user"]
    assert closed[0].text == evid[0].text == "follow instruction"
    assert closed[1].text.endswith(
        "**QUESTION**: 'Is pain at 24 hours higher, lower, or the same when comparing drug B to "
        "placebo?'\n **ARTICLE SUMMARIES**: No text available\n    "
    )
    assert (
        "one of the following options: Higher, Lower, No Difference, Insufficient Data, "
        "Uncertain Effect" in closed[1].text
    )
    assert (
        "----\n\nArticle ID 80000002:\nTITLE: Fixture randomised trial two\nPublished Date: "
        "No date provided\n\nRelevant Information:\nFixture abstract two. Pain at 24 hours "
        "was reduced with drug B.\n\n----"
    ) in evid[1].text
    assert "Article ID 80000003" not in evid[1].text  # only the question's relevant sources
    assert samples["evidence-90000001-1"].target == "lower"


def test_the_log_says_what_is_the_papers_and_what_is_ours(fixture_data):
    evidence = medevidence().metadata["fidelity"]
    assert "the paper's headline accuracies come from the full texts" in evidence["evidence"]
    assert "closed_book" not in evidence
    assert evidence["macro_f1"].startswith("ours: ")
    assert evidence["long_prompts"].startswith("not implemented: ")
    both = medevidence(condition="closed_book,evidence").metadata["fidelity"]
    assert both["closed_book"].startswith("ours: the question alone; the authors' code has no")


def test_three_way_scheme_targets_and_prompt(fixture_data):
    task = medevidence(labels="three")
    targets = {s.metadata["question_id"]: s.target for s in task.dataset}
    assert targets == {
        "90000001-0": "uncertain",
        "90000001-1": "lower",
        "90000001-2": "uncertain",
        "90000002-0": "higher",
        "90000002-1": "uncertain",
    }
    [[_, user]] = sent(task, [next(iter(task.dataset))]).values()
    prompt = user.text
    assert (
        "options: Higher, Lower, Uncertain (Uncertain covers no difference, an uncertain "
        "effect, and insufficient data)\n" in prompt
    )
    assert task.metadata["label_scheme"].startswith("ours")
    assert medevidence().metadata["label_scheme"] == "the paper's five classes"


def test_three_way_metrics_follow_the_scheme(fixture_data, tmp_path):
    """Three-label metrics in the log and when the log is re-scored (Task-level metrics)."""
    model = get_model("mockllm/model", custom_outputs=replying(lambda t: "**Answer**: Uncertain"))
    [log] = inspect_eval(
        medevidence(labels="three", metrics="full"),
        model=model,
        display="none",
        log_dir=str(tmp_path),
    )
    for scored in (log, inspect_score(log, effect_direction("three"), action="overwrite")):
        m = _metrics(scored)
        counts = {k for (g, k) in m if g == "label_counts"}
        assert counts == {"higher", "lower", "uncertain", "INVALID", "ERROR", "total"}
        # gold: uncertain x3, lower, higher; all predicted uncertain: F1 3/4, 0, 0 over 3 labels
        assert m[("headline", "macro_f1_all")] == pytest.approx(0.75 / 3)
        assert ("confusion_counts", "uncertain>uncertain") in m
        assert not any("no difference" in k for (_, k) in m)
        assert m[("accuracy_by_gold", "gold=uncertain/accuracy_all")] == 1.0
        # every reply abstains (uncertain): nothing covered, every gold uncertain abstained on,
        # and both answerable questions too
        assert m[("abstention", "coverage")] == 0.0
        assert m[("abstention", "abstention_recall")] == 1.0
        assert m[("abstention", "over_abstention")] == 1.0


def _answer_from_sources(text):
    if "No text available" in text:
        return "I am not sure."  # invalid in closed book
    if "Response 60%" in text and "response rate" in text:
        return "- **Answer**: Higher"
    if "quality of life" in text:
        return "Answer: Uncertain effect"  # no **Answer** field: invalid for the authors
    if "pain" in text.lower() and "Pain at 24 hours" in text:
        return "- **Full Answer**: reduced [2]\n- **Answer**: Lower"
    return "**Answer**: No Difference"


@pytest.mark.slow
def test_end_to_end_metrics(fixture_data, tmp_path):
    model = get_model("mockllm/model", custom_outputs=replying(_answer_from_sources))
    [log] = inspect_eval(
        medevidence(condition="closed_book,evidence", metrics="full"),
        model=model,
        display="none",
        log_dir=str(tmp_path / "logs"),
    )
    assert log.status == "success"
    m = _metrics(log)
    # evidence: question 90000001-2 has no relevant source, so its prompt says "No text
    # available" and the reply is invalid; 90000002-1's "Answer: Uncertain effect" has no
    # **Answer** field. Authors' grading: no difference, lower, INVALID, higher, INVALID; gold:
    # no difference, lower, insufficient data, higher, uncertain effect.
    assert m[("headline", "evidence/accuracy_all")] == pytest.approx(3 / 5)
    assert m[("accuracy_valid", "evidence/accuracy_valid")] == 1.0
    assert m[("headline", "evidence/valid_rate")] == pytest.approx(3 / 5)
    assert m[("label_counts", "evidence/no difference")] == 1
    assert m[("label_counts", "evidence/INVALID")] == 2
    assert m[("confusion_counts", "evidence/insufficient data>INVALID")] == 1
    assert m[("confusion_counts", "evidence/uncertain effect>INVALID")] == 1
    # macro-F1 over five labels: higher, lower, no difference 1; uncertain, insufficient 0
    assert m[("headline", "evidence/macro_f1_all")] == pytest.approx(3 / 5)
    assert m[("by_field", "evidence/evidence_quality=high/accuracy_all")] == 1.0
    assert m[("by_field", "evidence/evidence_quality=not rated/accuracy_all")] == 0.0
    # the paper's per-gold-class breakdown
    assert m[("accuracy_by_gold", "evidence/gold=higher/accuracy_all")] == 1.0
    assert m[("accuracy_by_gold", "evidence/gold=uncertain effect/accuracy_all")] == 0.0
    assert m[("accuracy_by_gold", "evidence/gold=lower/n")] == 1
    # our lenient reading, beside it: "Answer: Uncertain effect" counts there
    assert m[("lenient_view", "evidence/accuracy_all_lenient")] == pytest.approx(4 / 5)
    assert m[("lenient_view", "evidence/valid_rate_lenient")] == pytest.approx(4 / 5)
    assert m[("confusion_lenient", "evidence/uncertain effect>uncertain effect_lenient")] == 1
    # abstention (five classes: uncertain effect, insufficient data): the three valid replies
    # are committed and right; both gold abstentions got invalid replies, not abstentions
    assert m[("abstention", "evidence/coverage")] == pytest.approx(3 / 5)
    assert m[("abstention", "evidence/selective_accuracy")] == 1.0
    assert m[("abstention", "evidence/abstention_recall")] == 0.0
    assert m[("abstention", "evidence/over_abstention")] == 0.0
    # closed book: every reply invalid -> accuracy over all 0, over valid undefined
    assert m[("headline", "closed_book/accuracy_all")] == 0.0
    assert m[("label_counts", "closed_book/INVALID")] == 5


def test_dataset_errors(tmp_path):
    rows = [json.loads(line) for line in FIXTURE_JSONL.read_text().splitlines()]
    rows[1]["question_data"][0]["answer"] = "better"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(DatasetError, match=r"line 2, question 0, field 'answer': unknown label"):
        read_questions(bad)
    rows[1]["question_data"][0]["answer"] = "higher"
    rows[1]["question_data"][1]["relevant_sources"] = ["123"]
    bad.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(DatasetError, match=r"'relevant_sources': \['123'\] not among"):
        read_questions(bad)
    bad.write_text(FIXTURE_JSONL.read_text()[:-40])
    with pytest.raises(DatasetError, match="line 2: malformed JSON"):
        read_questions(bad)
    with pytest.raises(ValueError, match="closed_book only"):
        medevidence(questions="284")


def test_all_250_questions_from_shared(shared_datasets):
    task = medevidence(condition="closed_book,evidence", data_dir=str(shared_datasets))
    assert len(task.dataset) == 500
    assert task.metadata["data"]["sha256"].startswith("bbaaa6c0")
    task284 = medevidence(condition="closed_book", questions="284", data_dir=str(shared_datasets))
    assert len(task284.dataset) == 284
