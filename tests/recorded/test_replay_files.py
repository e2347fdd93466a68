import json
import math

import pandas as pd
import pytest

from med_evals.commands.recorded_to_replay import (
    inspect_commands,
    recorded_to_replay_command,
    write_replays,
)
from med_evals.commands.score_recorded import read_recorded, score_recorded
from med_evals.data.datasets import DatasetError
from med_evals.tasks.oncology_rct import load_trials, oncology_rct

from ..oncology_support import FIXTURE_CSV, install_fixture
from ..support.evals import inspect_eval

SECTIONS = ["conclusion_only", "methods_conclusion", "methods_results_conclusion", "title_abstract"]
KEYS = ("accuracy", "macro_f1", "f1_positive", "sensitivity", "specificity")


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


def _wide_fixture(tmp_path):
    """A recorded table in the study's wide layout for the fixture trials, rows reversed."""
    trials = pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)
    replies = ["POSITIVE", "NEGATIVE", " negative\n", "", "POSITIVE.", "**POSITIVE**"]
    wide = trials[["doi", "Annotation_accept"]].copy()
    wide["m1_conclusion_response_raw"] = [replies[i % 6] for i in range(len(wide))]
    wide["m1_title_abstract_response_raw"] = [replies[(i + 1) % 6] for i in range(len(wide))]
    wide["m2_conclusion_response_raw"] = "NEGATIVE"
    wide = wide.iloc[::-1]  # replies must be matched to trials by DOI, not row order
    path = tmp_path / "wide.csv"
    wide.to_csv(path, index=False)
    return path, trials


def test_wide_table_becomes_replay_files_keyed_by_sample_id(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    table, trials = _wide_fixture(tmp_path)
    loaded, _ = load_trials()
    written = write_replays(table, tmp_path / "replays", loaded)
    assert sorted(written) == ["m1", "m2"]
    rows = [json.loads(x) for x in written["m1"].read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    assert len(rows) == 2 * len(trials)
    assert by_id["conclusion_only-000"]["reply"] == "POSITIVE"  # trial 0 is the table's last row
    assert by_id["title_abstract-002"]["reply"] == " "  # blank: INVALID, as score-recorded
    assert by_id["conclusion_only-004"]["reply"] == "POSITIVE."
    assert {r["task"] for r in rows} == {"oncology_rct"} and {r["epoch"] for r in rows} == {1}
    (cmd, _) = inspect_commands(written)
    assert cmd == (
        "inspect eval med_evals/oncology_rct -T condition=conclusion_only,title_abstract "
        f"--model replay/{written['m1']}"
    )

    # through the task: the same numbers as score-recorded
    (log,) = inspect_eval(
        oncology_rct(condition="conclusion_only,title_abstract", metrics="full"),
        model=f"replay/{written['m1']}",
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success"
    expected = {
        r["condition"]: r for r in score_recorded(read_recorded(table)) if r["model"] == "m1"
    }
    metrics = {n: m.value for s in log.results.scores for n, m in s.metrics.items()}
    for cond, r in expected.items():
        assert metrics[f"{cond}/n_error"] == r["n_error"] == 0  # a blank recording is INVALID
        assert metrics[f"{cond}/n_invalid"] == r["n_invalid"] >= 3
        assert _same(metrics[f"{cond}/accuracy_valid"], r["strict"]["accuracy"])


def test_a_row_the_study_parsed_error_replays_as_a_failed_call(tmp_path, monkeypatch):
    """predictions.csv's layout: a blank reply the study parsed INVALID replays as text without
    a label, one it parsed ERROR as a failed call; the task counts both as score-recorded does."""
    install_fixture(tmp_path, monkeypatch)
    trials = pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)
    n = len(trials)
    raw = ["POSITIVE", "", None, "NEGATIVE", "Positive.", "NEGATIVE"][:n]
    table = pd.DataFrame({
        "trial_idx": range(n), "vendor": "gemini", "condition": "doi_only", "raw_output": raw,
        "parsed_output": ["ERROR" if r is None else "INVALID" if r in ("", "Positive.")
                          else r for r in raw],
        "ground_truth": trials["Annotation_accept"],
    })  # fmt: skip
    path = tmp_path / "predictions.csv"
    table.to_csv(path, index=False)
    written = write_replays(path, tmp_path / "replays")
    rows = {json.loads(x)["id"]: json.loads(x) for x in written["gemini"].read_text().splitlines()}
    assert rows["doi_only-001"]["reply"] == " "
    assert rows["doi_only-002"]["reply"] is None and "ERROR" in rows["doi_only-002"]["error"]
    [r] = score_recorded(read_recorded(path))
    assert (r["n_invalid"], r["n_error"]) == (2, 1)
    (log,) = inspect_eval(
        oncology_rct(condition="doi_only", metrics="full"),
        model=f"replay/{written['gemini']}",
        log_dir=str(tmp_path / "logs"),
        display="none",
        max_retries=0,
    )
    assert log.status == "success"
    metrics = {n: m.value for s in log.results.scores for n, m in s.metrics.items()}
    for name in ("n_total", "n_valid", "n_invalid", "n_error"):
        assert metrics[name] == r[name], name
    assert _same(metrics["accuracy_valid"], r["strict"]["accuracy"])


def test_ground_truth_and_doi_mismatches_are_errors(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    table, _ = _wide_fixture(tmp_path)
    loaded, _ = load_trials()
    df = pd.read_csv(table, dtype=str, keep_default_na=False)
    df.loc[df.index[0], "doi"] = "10.9999/unknown"
    df.to_csv(tmp_path / "bad_doi.csv", index=False)
    with pytest.raises(DatasetError, match=r"row 1, column 'doi': '10.9999/unknown'"):
        write_replays(tmp_path / "bad_doi.csv", tmp_path / "out", loaded)
    df = pd.read_csv(table, dtype=str, keep_default_na=False)
    flip = {"POSITIVE": "NEGATIVE", "NEGATIVE": "POSITIVE"}
    df.loc[df.index[0], "Annotation_accept"] = flip[df.loc[df.index[0], "Annotation_accept"]]
    df.to_csv(tmp_path / "bad_truth.csv", index=False)
    with pytest.raises(DatasetError, match="differs from the trials dataset"):
        write_replays(tmp_path / "bad_truth.csv", tmp_path / "out", loaded)


def test_cli_writes_files_and_prints_the_commands(tmp_path, monkeypatch, capsys):
    install_fixture(tmp_path, monkeypatch)
    table, _ = _wide_fixture(tmp_path)
    assert recorded_to_replay_command(str(table), str(tmp_path / "r")) == 0
    out = capsys.readouterr().out
    assert f"m2: {tmp_path / 'r' / 'm2.jsonl'}" in out
    assert f"-T condition=conclusion_only --model replay/{tmp_path / 'r' / 'm2.jsonl'}" in out


@pytest.mark.slow
def test_study_recordings_replayed_through_the_task_equal_score_recorded(
    shared_datasets, tmp_path, monkeypatch
):
    """The published GPT-3.5 / GPT-4o / o1 replies: replay == score-recorded, exactly."""
    table = shared_datasets / "oncology-rct-250" / "trials_with_predictions.csv"
    if not table.is_file():
        pytest.skip(f"{table} not found")
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(shared_datasets))
    trials, _ = load_trials()
    written = write_replays(table, tmp_path / "replays", trials)
    assert sorted(written) == ["gpt35turbo_temp100", "gpt4o_temp100", "o1_temp100"]
    replies = read_recorded(table)
    expected = {(r["model"], r["condition"]): r for r in score_recorded(replies)}

    # every model's file holds exactly the table's replies under the task's sample ids
    for model, path in written.items():
        rows = {json.loads(x)["id"]: json.loads(x)["reply"] for x in path.read_text().splitlines()}
        mine = replies[replies.model == model]
        assert rows == {f"{r.condition}-{r.trial:03d}": r.reply for r in mine.itertuples()}

    # one model (the one with an invalid reply) through Inspect, all four conditions
    model = "gpt35turbo_temp100"
    (log,) = inspect_eval(
        oncology_rct(condition=",".join(SECTIONS), metrics="full"),
        model=f"replay/{written[model]}",
        log_dir=str(tmp_path / "logs"),
        display="none",
        max_tasks=1,
        log_samples=False,  # the metrics are compared; writing each sample is most of the time
    )
    assert log.status == "success"
    assert log.results.total_samples == log.results.completed_samples == 1000
    metrics = {n: m.value for s in log.results.scores for n, m in s.metrics.items()}
    for cond in SECTIONS:
        r = expected[(model, cond)]
        s = r["strict"]
        assert metrics[f"{cond}/valid_rate"] == pytest.approx(r["valid_rate"])
        for name in ("n_total", "n_valid", "n_invalid", "n_error", "n_exact_case"):
            assert metrics[f"{cond}/{name}"] == r[name], (cond, name)
        for name in ("tp", "fn", "fp", "tn"):
            assert metrics[f"{cond}/{name}"] == s[name], (cond, name)
        assert _same(metrics[f"{cond}/accuracy_valid"], s["accuracy"])
        assert _same(metrics[f"{cond}/macro_f1_valid"], s["macro_f1"])
        assert _same(metrics[f"{cond}/f1_positive_valid"], s["f1_positive"])
        assert _same(metrics[f"{cond}/sensitivity_valid"], s["sensitivity"])
        assert _same(metrics[f"{cond}/specificity_valid"], s["specificity"])
        for key in KEYS:
            for kind in ("wald", "wilson"):
                lo, hi = s[f"{key}_{kind}"]
                assert _same(metrics[f"{cond}/{key}_{kind}_lo"], lo), (cond, key, kind)
                assert _same(metrics[f"{cond}/{key}_{kind}_hi"], hi), (cond, key, kind)
    assert expected[(model, "title_abstract")]["n_invalid"] == 1
