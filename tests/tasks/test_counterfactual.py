import json
import re

import pandas as pd
import pytest
from inspect_ai import Epochs, Task, task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import get_model

from med_evals.scorers.judges import (
    conclusion_agreement,
    parse_agreement,
    parse_edited,
    parse_rating,
)
from med_evals.scorers.reducers import majority_label
from med_evals.tasks.counterfactual import (
    change_ratio,
    check_rewrite,
    counterfactual_build,
    counterfactual_judges,
)
from med_evals.tasks.oncology_rct import oncology_rct

from ..conftest import mock_output, replying
from ..oncology_support import FIXTURE_CSV, install_fixture

LOGS = "/tmp/med_evals_test_logs"


@pytest.fixture
def fixture_data(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    return pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)


def _section(prompt, name):
    return re.search(rf"\[{name}\] (.*?)(?:\n\n\[|\n\nReturn)", prompt, re.DOTALL).group(1)


def _rewriter(prompt):
    """A mock builder: flips the result sentences; misbehaves on two trials."""
    fields = {k: _section(prompt, k) for k in ("introduction", "methods", "results", "conclusions")}
    fields["title"] = re.search(r"Title: (.*)\n", prompt).group(1)
    if "FIXTURE-6" in prompt:
        return "Sorry, I cannot help with that."  # unparseable
    swap = {"significantly longer": "not significantly different", "did not meet": "met"}
    for k in ("results", "conclusions"):
        text = fields[k]
        if "did not meet" in text or "not significantly different" in text:
            text = text.replace("not significantly different", "significantly longer")
            text = text.replace("did not meet", "met")
        else:
            for a, b in swap.items():
                text = text.replace(a, b)
            text = text.replace(" met its", " did not meet its")
        fields[k] = text
    if "FIXTURE-3" in prompt:
        fields["methods"] = "METHODS: An entirely different design was described here instead."
    return json.dumps(fields)


def test_change_ratio_and_checks():
    assert change_ratio("abc", "abc") == 0.0
    assert 0 < change_ratio("the trial met", "the trial did not meet") < 0.5
    orig = {"title": "t", "introduction": "i", "methods": "m", "results": "r", "conclusions": "c"}
    assert check_rewrite(orig, None, 0.02)[0] == "unparseable reply"
    assert check_rewrite(orig, dict(orig), 0.02)[0] == "results and conclusions unchanged"
    assert check_rewrite(orig, {**orig, "methods": "M!", "results": "R"}, 0.02)[0].startswith(
        "methods changed by"
    )
    assert check_rewrite(orig, {**orig, "results": "R"}, 0.02)[0] is None


def test_build_writes_study_schema_and_resumes(fixture_data, tmp_path):
    out = tmp_path / "cf.csv"
    model = get_model("mockllm/model", custom_outputs=replying(_rewriter))
    [log] = inspect_eval(
        counterfactual_build(out_csv=str(out)), model=model, display="none", log_dir=LOGS
    )
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    assert m["accepted"] == 4 and m["rejected"] == 2
    assert m["rejected_unparseable"] == 1 and m["rejected_methods"] == 1
    assert m["modified_results"] == 4 and m["modified_introduction"] == 0

    built = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(built.columns) == list(fixture_data.columns)
    assert len(built) == 4
    for _, row in built.iterrows():
        assert row.target_label != row.Annotation_accept
        assert json.loads(row.sections_modified) == ["results", "conclusion"]
        assert row.counterfactual_abstract != row.abstract
    # the oncology task reads the builder's output unchanged
    onco = oncology_rct(condition="counterfactual", trials_file=str(out))
    assert len(onco.dataset) == 4 and onco.metadata["data"]["sha256"]

    # resume: only the two rejected trials are asked again
    [again] = inspect_eval(
        counterfactual_build(out_csv=str(out)), model=model, display="none", log_dir=LOGS
    )
    assert len(again.samples) == 2
    assert len(pd.read_csv(out)) == 4


def test_judge_parsers():
    assert parse_rating('{"rating": 4, "reason": "fine"}') == {"rating": 4, "reason": "fine"}
    assert parse_rating("Rating: 2 - inconsistent p-values")["rating"] == 2
    assert parse_rating('{"rating": 7}') is None and parse_rating("looks good") is None
    assert parse_edited('```json\n{"edited": "b", "reason": "odd"}\n```')["edited"] == "B"
    assert parse_edited("Both look edited") is None
    assert (
        parse_agreement('{"verdict": "Partly agrees", "reason": "x"}')["verdict"] == "partly agrees"
    )
    assert parse_agreement("contradicts.")["verdict"] == "contradicts"
    assert parse_agreement('{"verdict": "maybe"}') is None


def test_missing_grader_is_an_error_at_start(fixture_data):
    with pytest.raises(Exception, match="grader"):
        inspect_eval(counterfactual_judges, model="mockllm/model", display="none", log_dir=LOGS)


def test_rating_judge_retries_then_counts_failures(fixture_data):
    calls = {"n": 0}

    def grader(input, tools, tool_choice, config):  # noqa: A002
        calls["n"] += 1
        first = input[0].text
        if "FIXTURE-3" in first:
            return mock_output("I would rather not rate this.")  # always malformed
        if len(input) == 1:
            return mock_output("Let me think about it.")  # malformed first reply
        return mock_output('{"rating": 4, "reason": "coherent"}')

    [log] = inspect_eval(
        counterfactual_judges,
        task_args={"judge": "rate", "attempts": 2},
        model="mockllm/model",
        model_roles={"grader": get_model("mockllm/model", custom_outputs=grader)},
        display="none",
        log_dir=LOGS,
    )
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    # FIXTURE-3: both abstracts (cf and original) fail after 2 attempts each
    assert m["judge_failures"] == 2
    assert m["cf_rating_mean"] == 4.0 and m["cf_rating_4"] == 5
    assert calls["n"] == 6 * 2 * 2  # every item needed its second attempt


def test_paired_judge_detectability(fixture_data):
    def grader(input, tools, tool_choice, config):  # noqa: A002
        text = input[-1].text
        a = text.split("Abstract B:")[0]
        # a perfect detector: the counterfactual of a positive trial says "did not meet"
        edited_in_a = ("did not meet" in a) == (
            "Drug A" in text or "FIXTURE-3" in text or "FIXTURE-6" in text
        )
        return mock_output(json.dumps({"edited": "A" if edited_in_a else "B", "reason": "r"}))

    [log] = inspect_eval(
        counterfactual_judges,
        task_args={"judge": "paired"},
        model="mockllm/model",
        model_roles={"grader": get_model("mockllm/model", custom_outputs=grader)},
        display="none",
        log_dir=LOGS,
    )
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    assert m["detect_rate"] == 1.0 and m["judge_failures"] == 0 and m["n"] == 6
    picks = {s.scores["detectability_judge"].value["edited"] for s in log.samples}
    assert picks == {"A", "B"}  # the order is randomised


def test_conclusion_agreement_scorer():
    verdicts = iter(['{"verdict": "agrees"}', "unclear", "unclear", '{"verdict": "contradicts"}'])
    grader = get_model("mockllm/model", custom_outputs=lambda *a: mock_output(next(verdicts)))

    @task
    def agreement_task():  # created inside eval, where the grader role is bound
        return Task(
            dataset=[
                Sample(input="Q1?", metadata={"reference": "Drug helps."}),
                Sample(input="Q2?", metadata={"reference": "Drug does not help."}),
                Sample(input="Q3?", metadata={"reference": "No evidence."}),
            ],
            scorer=conclusion_agreement(attempts=2),
            epochs=Epochs(1, majority_label()),
        )

    [log] = inspect_eval(
        agreement_task,
        model=get_model("mockllm/model", custom_outputs=replying(lambda t: "It helps.")),
        model_roles={"grader": grader},
        display="none",
        log_dir=LOGS,
        max_samples=1,
    )
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    assert m["judge_failures"] == 1 and m["n"] == 3
    assert m["agrees"] == 0.5 and m["contradicts"] == 0.5
