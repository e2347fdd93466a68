import re
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai.model import get_model

from med_evals.commands.cli import main as cli_main
from med_evals.study.params import ParamError
from med_evals.tasks.oncology_controls import make_controls, seeded_derangement
from med_evals.tasks.oncology_rct import (
    CONDITIONS,
    GROUPS,
    oncology_rct,
    read_trials,
    resolve_conditions,
)

from ..conftest import mock_output, replying
from ..oncology_support import FIXTURE_CSV, install_fixture
from ..support.evals import inspect_eval

SYSTEM = (
    "You will be provided with information about a randomized controlled oncology trial. Your "
    "task will be to classify if the trial was positive, i.e. if it met its primary endpoint, or "
    "negative, i.e. if it did not meet its primary endpoint. Your response should be either the "
    "word POSITIVE (in all caps) or NEGATIVE (in all caps). Do not output anything else."
)


@pytest.fixture
def fixture_data(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    return pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)


def _inputs(condition):
    task = oncology_rct(condition=condition)
    return {s.metadata["trial"]: s for s in task.dataset}


def test_exact_prompt_of_every_condition(fixture_data):
    r = fixture_data.iloc[0]
    expected = {
        "title_abstract": f"Title: {r.title}\n\nAbstract: {r.abstract}",
        "title_only": f"Title: {r.title}",
        "doi_only": "DOI: 10.1200/JCO.19.90001",
        "counterfactual": (
            f"Title: {r.counterfactual_title}\n\nAbstract: {r.counterfactual_abstract}"
        ),
        "counterfactual_doi": (
            f"DOI: 10.1200/JCO.19.90001\n\nTitle: {r.counterfactual_title}\n\n"
            f"Abstract: {r.counterfactual_abstract}"
        ),
        "abstract_only": f"Abstract: {r.abstract}",
        "title_doi": f"DOI: 10.1200/JCO.19.90001\n\nTitle: {r.title}",
        "conclusion_only": f"Abstract: {r.abstract_conclusions.strip()}",
        "methods_conclusion": (
            f"Abstract: {r.abstract_methods.strip()} {r.abstract_conclusions.strip()}"
        ),
        "methods_results_conclusion": (
            f"Abstract: {r.abstract_methods.strip()} {r.abstract_results.strip()} "
            f"{r.abstract_conclusions.strip()}"
        ),
    }
    for cond, text in expected.items():
        assert _inputs(cond)[0].input == text, cond
    # only trials whose counterfactual title was edited (trial 2 of the fixture)
    edited = fixture_data.iloc[2].counterfactual_title
    assert {t: s.input for t, s in _inputs("counterfactual_title_only").items()} == {
        2: f"Title: {edited}"
    }
    assert r.counterfactual_abstract != r.abstract

    shuffled = _inputs("doi_shuffled")[0].input
    assert shuffled.startswith("DOI: ") and shuffled != "DOI: 10.1200/JCO.19.90001"
    assert shuffled[5:] in set(fixture_data.doi)
    synthetic = _inputs("doi_synthetic")[0].input
    assert re.fullmatch(r"DOI: 10\.1200/JCO\.19\.\d{5}", synthetic)
    assert synthetic[5:] not in set(fixture_data.doi)
    assert re.fullmatch(r"Identifier: [0-9A-F]{12}", _inputs("irrelevant_identifier")[0].input)
    # every condition's prompt is checked here: a new condition fails this until it is
    checked = {*expected, "counterfactual_title_only", "doi_shuffled", "doi_synthetic",
               "irrelevant_identifier"}
    assert checked == set(CONDITIONS), (
        f"add the exact prompt of {sorted(set(CONDITIONS) - checked)} to this test")


def test_counterfactual_title_only_edited_by_default_or_all_trials(fixture_data):
    """Default: the trials whose title was edited (ours); ``all``: every trial, an unchanged
    title scored against the inverted label. Both are labelled in the log's metadata."""
    edited = oncology_rct(condition="counterfactual_title_only")
    every = oncology_rct(condition="counterfactual_title_only", title_only_trials="all")
    assert [s.metadata["trial"] for s in edited.dataset] == [2]
    assert [s.metadata["trial"] for s in every.dataset] == list(range(len(fixture_data)))
    for s in every.dataset:
        row = fixture_data.iloc[s.metadata["trial"]]
        assert s.input == f"Title: {row.counterfactual_title}"
        assert s.target == ("NEGATIVE" if row.Annotation_accept == "POSITIVE" else "POSITIVE")
    counts = {"titles_edited": 1, "titles_unchanged": len(fixture_data) - 1}
    label = edited.metadata["counterfactual_title_only"]
    assert label == {**counts, "trials": "edited", "trials_rule": label["trials_rule"]}
    assert label["trials_rule"].startswith("ours: only the trials whose counterfactual title")
    assert every.metadata["counterfactual_title_only"]["trials"] == "all"
    assert "scored against the inverted label" in every.metadata["counterfactual_title_only"][
        "trials_rule"
    ]
    with pytest.raises(ParamError, match="title_only_trials=all: applies to the "
                       "counterfactual_title_only condition, which this run does not include"):
        oncology_rct(condition="study", title_only_trials="all")
    with pytest.raises(ParamError, match="choose from edited, all"):
        oncology_rct(condition="appendix", title_only_trials="some")


def test_targets_and_inverted_counterfactual_targets(fixture_data):
    truth = dict(enumerate(fixture_data.Annotation_accept))
    inverse = {"POSITIVE": "NEGATIVE", "NEGATIVE": "POSITIVE"}
    for name, cond in CONDITIONS.items():
        for trial, sample in _inputs(name).items():
            want = inverse[truth[trial]] if cond.counterfactual else truth[trial]
            assert sample.target == want, (name, trial)
            assert sample.metadata["ground_truth"] == truth[trial]


def test_condition_groups_and_errors():
    assert resolve_conditions("study") == list(GROUPS["study"])
    assert resolve_conditions("title_only,doi_only,title_only") == ["title_only", "doi_only"]
    assert resolve_conditions(["appendix", "controls"]) == [
        *GROUPS["appendix"],
        *GROUPS["controls"],
    ]
    assert resolve_conditions("all") == list(CONDITIONS)
    with pytest.raises(ValueError, match="unknown condition 'title_abstrct'"):
        resolve_conditions("title_abstrct")


def test_time_split(fixture_data):
    task = oncology_rct(condition="title_only", published_after="2016-01-01")
    dates = sorted(s.metadata["date"] for s in task.dataset)
    assert dates == ["2016-02-15", "2019-03-10", "2021-11-01", "2023-09-30"]
    assert task.metadata["n_trials"] == 4
    with pytest.raises(ValueError, match="no trial published after"):
        oncology_rct(published_after="2030-01-01")


def test_controls_on_the_real_corpus(shared_datasets):
    df = read_trials(shared_datasets / "oncology-rct-250-counterfactual" / "trials.csv")
    c = make_controls(df, seed=0)
    real = set(df.doi)
    assert all(a != b for a, b in zip(c.shuffled_doi, df.doi, strict=True))
    assert sorted(c.shuffled_doi) == sorted(df.doi)  # a permutation of the real DOIs
    assert len(set(c.synthetic_doi)) == 250 and not (set(c.synthetic_doi) & real)
    for doi, syn in zip(df.doi, c.synthetic_doi, strict=True):
        assert syn.split("/")[0] == doi.split("/")[0] and len(syn) == len(doi)
        assert re.sub(r"\d", "#", syn) == re.sub(r"\d", "#", doi)  # same pattern
    assert make_controls(df, seed=0) == c and make_controls(df, seed=1) != c


def test_derangement_has_no_fixed_point():
    for seed in range(20):
        perm = seeded_derangement(7, seed)
        assert sorted(perm) == list(range(7)) and all(i != p for i, p in enumerate(perm))


def _evidence_follower(text: str) -> str | None:
    """A deterministic 'model': reads the conclusion when there is one."""
    if "did not meet its primary endpoint" in text:
        return " negative\n"  # valid, not exact case
    if "met its primary endpoint" in text:
        return "POSITIVE"
    if text.startswith("Title:"):
        return "**POSITIVE**"  # invalid; lenient POSITIVE
    if text.startswith("DOI:"):
        return "NEGATIVE"
    return ""  # no reply: an error


def _metrics(log):
    """{(group, name): value} of a log's metrics."""
    return {
        (m.group, m.name if m.group else key): m.value
        for s in log.results.scores
        for key, m in s.metrics.items()
    }


@pytest.mark.slow
def test_end_to_end_metrics(fixture_data, tmp_path):
    model = get_model("mockllm/model", custom_outputs=replying(_evidence_follower))
    [log] = inspect_eval(
        oncology_rct(condition="study,irrelevant_identifier", metrics="full"),
        model=model,
        display="none",
        log_dir=str(tmp_path / "logs"),
    )
    assert log.status == "success"
    m = _metrics(log)
    first = log.samples[0]
    assert first.messages[0].role == "system" and first.messages[0].text == SYSTEM
    assert log.eval.config.epochs_reducer == ["majority_label"]
    assert log.plan.config.temperature == 0.0 and log.plan.config.max_tokens == 500
    assert log.eval.metadata["data"]["sha256"]

    # baseline and counterfactual: the model follows the text, so all right
    for cond in ("title_abstract", "counterfactual", "counterfactual_doi"):
        assert m[("headline", f"{cond}/accuracy_valid")] == 1.0
        assert m[("headline", f"{cond}/macro_f1_valid")] == 1.0
        assert m[("headline", f"{cond}/valid_rate")] == 1.0
    # three of six replies are " negative\n": valid but not exact case
    assert m[("counts", "title_abstract/n_exact_case")] == 3
    # title only: "**POSITIVE**" is invalid under the study's rule, lenient reads POSITIVE
    assert m[("headline", "title_only/valid_rate")] == 0.0
    assert m[("counts", "title_only/n_invalid")] == 6
    assert m[("lenient_parse", "title_only/accuracy_lenient")] == pytest.approx(0.5)
    assert m[("lenient_parse", "title_only/macro_f1_lenient")] == pytest.approx(1 / 3)
    # DOI only: always NEGATIVE -> sensitivity 0, specificity 1, accuracy 3/6
    assert m[("headline", "doi_only/accuracy_valid")] == pytest.approx(0.5)
    assert m[("sensitivity_valid", "doi_only/sensitivity_valid")] == 0.0
    assert m[("specificity_valid", "doi_only/specificity_valid")] == 1.0
    assert m[("f1_positive_valid", "doi_only/f1_positive_valid")] == 0.0
    assert m[("confusion", "doi_only/fn")] == 3 and m[("confusion", "doi_only/tn")] == 3
    assert m[("intervals_95", "doi_only/accuracy_wald_lo")] == pytest.approx(
        0.5 - 1.96 * (0.25 / 6) ** 0.5
    )
    # identifier only: no reply -> errors, counted apart from invalid
    assert m[("counts", "irrelevant_identifier/n_error")] == 6
    assert m[("counts", "irrelevant_identifier/n_invalid")] == 0
    # flip rates: baseline -> counterfactual flips every trial; the DOI changes nothing
    assert m[("flip_rates", "title_abstract~counterfactual")] == 1.0
    assert m[("flip_rates", "counterfactual~counterfactual_doi")] == 0.0
    assert m[("flip_rates", "title_abstract~counterfactual/n")] == 6


def test_single_condition_has_plain_metric_names(fixture_data, tmp_path):
    model = get_model("mockllm/model", custom_outputs=replying(_evidence_follower))
    [log] = inspect_eval(
        oncology_rct(metrics="full"),
        model=model,
        display="none",
        log_dir=str(tmp_path / "logs"),
    )
    m = _metrics(log)
    assert m[("headline", "accuracy_valid")] == 1.0 and m[("headline", "macro_f1_valid")] == 1.0
    # the viewer's score column is the first metric: the study's F1, not the valid rate
    assert list(log.results.scores[0].metrics)[:3] == [
        "macro_f1_valid", "accuracy_valid", "valid_rate",
    ]  # fmt: skip
    assert m[("counts", "n_valid")] == 6
    sample = log.samples[0]
    assert sample.scores["trial_outcome"].value["condition"] == "title_abstract"
    assert sample.scores["trial_outcome"].answer in ("POSITIVE", "NEGATIVE")


def test_epochs_keep_labels_by_majority(fixture_data, tmp_path):
    calls: Counter = Counter()

    def flaky(text):
        calls[text] += 1
        right = _evidence_follower(text).strip().upper()
        wrong = {"POSITIVE": "NEGATIVE", "NEGATIVE": "POSITIVE"}[right]
        return wrong if calls[text] == 2 else right  # 2nd epoch wrong, majority right

    model = get_model("mockllm/model", custom_outputs=replying(flaky))
    [log] = inspect_eval(
        oncology_rct(metrics="full"),
        model=model,
        epochs=3,
        display="none",
        log_dir=str(tmp_path / "logs"),
    )
    m = _metrics(log)
    assert log.eval.config.epochs == 3
    assert m[("headline", "accuracy_valid")] == 1.0
    assert m[("counts", "n_total")] == 6  # one reduced score per trial, not 18
    from med_evals.logs.runs import score_values

    _, values = score_values(log.location, "trial_outcome")
    assert len(values) == 6 and all(v["agreement"] == pytest.approx(2 / 3) for v in values)


def test_provider_error_is_scored_error_not_lost(fixture_data, tmp_path):
    def outputs(input, tools, tool_choice, config):  # noqa: A002
        text = input[-1].text
        if "FIXTURE-3" in text:
            raise RuntimeError("HTTP 500 from provider")
        return mock_output(_evidence_follower(text))

    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = inspect_eval(
        oncology_rct(metrics="full"),
        model=model,
        display="none",
        max_retries=0,
        log_dir=str(tmp_path / "logs"),
    )
    assert log.status == "success" and len(log.samples) == 6
    m = _metrics(log)
    assert m[("counts", "n_error")] == 1 and m[("counts", "n_valid")] == 5
    assert m[("headline", "valid_rate")] == pytest.approx(5 / 6)
    errored = [s for s in log.samples if s.scores["trial_outcome"].value["prediction"] == "ERROR"]
    assert len(errored) == 1 and "HTTP 500" in errored[0].scores["trial_outcome"].explanation


def test_flip_rate_command_on_two_runs(fixture_data, capsys, tmp_path):
    model = get_model("mockllm/model", custom_outputs=replying(_evidence_follower))
    logs = []
    for cond in ("title_abstract", "counterfactual"):
        [log] = inspect_eval(
            oncology_rct(condition=cond),
            model=model,
            display="none",
            log_dir=str(tmp_path / "logs"),
        )
        logs.append(log.location)
    assert cli_main(["flip-rate", *logs, "--out", str(tmp_path / "flip.csv")]) == 0
    table = pd.read_csv(tmp_path / "flip.csv")
    assert table.loc[0, "pair"] == "title_abstract vs counterfactual"
    assert table.loc[0, "flip_rate"] == 1.0 and table.loc[0, "n_both_valid"] == 6
    assert table.loc[0, "flip_rate_all_paired"] == 1.0 and table.loc[0, "n_all_paired"] == 6
    # the directory form finds the same logs
    assert cli_main(["flip-rate", str(tmp_path / "logs")]) == 0
    # the same run twice in one folder (a copy of the finished log) counts once
    shutil.copy(logs[0], tmp_path / "logs" / ("copy-" + Path(logs[0]).name))
    capsys.readouterr()
    assert cli_main(["flip-rate", str(tmp_path / "logs"), "--out", str(tmp_path / "f2.csv")]) == 0
    assert pd.read_csv(tmp_path / "f2.csv").loc[0, "n_both_valid"] == 6
    assert "ignored" in capsys.readouterr().err
    # nothing to compare, or a path that is not there: one line, exit 2 (exit_codes.USAGE)
    assert cli_main(["flip-rate", logs[0]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["med-evals flip-rate: error: no log holds both conditions of any requested pair"]
    assert cli_main(["flip-rate", str(tmp_path / "nowhere")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
