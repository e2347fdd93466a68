"""The oncology study's edge rules: what it sent per provider, and the counterfactual titles."""

import json

import pandas as pd
from inspect_ai.model import get_model

import med_evals.tasks.oncology_rct as onco
from med_evals.tasks.oncology_rct import oncology_rct, study_generate_config, title_edited

from ..conftest import replying
from ..oncology_support import FIXTURE_CSV, install_fixture
from ..support.evals import inspect_eval


def test_temperature_per_provider_as_the_study_sent_it():
    # run_evaluation.py: temperature=0 for OpenAI and Google, no temperature for Anthropic
    for model, temperature in [
        ("openai/gpt-5.2-2025-12-11", 0.0),
        ("google/gemini-3-flash-preview", 0.0),
        ("anthropic/claude-opus-4-5-20251101", None),
        ("vllm/Qwen/Qwen2.5-7B-Instruct", 0.0),
        (None, 0.0),
    ]:
        config = study_generate_config(model)
        assert config.temperature == temperature, model
        assert config.max_tokens == 500


def test_task_built_for_anthropic_sends_no_temperature(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)

    class Claude:
        def __str__(self):
            return "anthropic/claude-opus-4-5-20251101"

    monkeypatch.setattr(onco, "active_model", lambda: Claude())
    task = oncology_rct()
    assert task.config.temperature is None and task.config.max_tokens == 500
    assert task.metadata["generate"]["model_at_build"] == "anthropic/claude-opus-4-5-20251101"


def test_task_built_by_eval_knows_its_model(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    model = get_model("mockllm/model", custom_outputs=replying(lambda t: "POSITIVE"))
    [log] = inspect_eval(oncology_rct, model=model, display="none", log_dir=str(tmp_path / "l"))
    assert log.status == "success"
    assert log.eval.metadata["generate"]["model_at_build"] == "mockllm/model"
    assert log.plan.config.temperature == 0.0


def test_counterfactual_title_only_takes_edited_titles(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    task = oncology_rct(condition="title_only,counterfactual_title_only")
    cf = [s for s in task.dataset if s.metadata["condition"] == "counterfactual_title_only"]
    assert [s.metadata["trial"] for s in cf] == [2]  # the fixture's one edited title
    assert cf[0].target != cf[0].metadata["ground_truth"]
    label = task.metadata["counterfactual_title_only"]
    assert (label["titles_edited"], label["titles_unchanged"], label["trials"]) == (1, 5, "edited")
    assert "counterfactual_title_only" not in oncology_rct().metadata


def test_counterfactual_titles_of_the_study(shared_datasets, monkeypatch):
    path = shared_datasets / "oncology-rct-250-counterfactual" / "trials.csv"
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    edited = df.apply(title_edited, axis=1)
    annotated = df["sections_modified"].map(lambda s: "title" in json.loads(s))
    # 14 titles differ as text, one only by a final full stop: 13 edited, as the paper says
    assert (df["title"] != df["counterfactual_title"]).sum() == 14
    assert edited.sum() == 13 and (edited == annotated).all()
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(shared_datasets))
    task = oncology_rct(condition="counterfactual_title_only")
    assert len(task.dataset) == 13
    assert task.metadata["counterfactual_title_only"]["titles_unchanged"] == 237
    every = oncology_rct(condition="counterfactual_title_only", title_only_trials="all")
    assert len(every.dataset) == 250
    assert every.metadata["counterfactual_title_only"]["trials"] == "all"


def test_fixture_titles():
    df = pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)
    row = df.iloc[0].to_dict()
    assert not title_edited(row)
    assert not title_edited({**row, "counterfactual_title": row["title"] + ". "})
    assert title_edited({**row, "counterfactual_title": row["title"] + " (no benefit)"})
