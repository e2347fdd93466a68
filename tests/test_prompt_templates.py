"""``-T prompt=all``: MedREQAL's three Table 7 templates in one run, the template a per-sample
condition everywhere: the report's spread and ranking lines (two replayed models, one first
under one template and second under another), the gate (per template; another template is
another setup) and ``med-evals diff`` (per template)."""

from __future__ import annotations

import math

import pytest

from med_evals.commands.cli import main as cli_main
from med_evals.commands.regress import make_baseline, regress
from med_evals.commands.report import build_report
from med_evals.commands.report.document import fmt
from med_evals.commands.report.prompt_spread import SPREAD, order, ranking_changes, ranks
from med_evals.logs.labels import ReportError
from med_evals.logs.runs import load_runs
from med_evals.tasks.medreqal import medreqal

from .conftest import FIXTURES
from .report.support import replay_run
from .report.test_same_numbers import md_tables

S, R, N = "SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION"
#: the fixture's gold labels, question 1 to 12
GOLD = [S, R, N, S, R, N, N, S, N, S, N, S]
WRONG = {S: R, R: N, N: S}


def question_and_template(sid: str) -> tuple[str, str]:
    """``medreqal-3@alpaca`` -> (gold of question 3, ``alpaca``)."""
    question, _, template = sid.partition("@")
    return GOLD[int(question.split("-")[1]) - 1], template


def model_a(text: str, sid: str, epoch: int) -> str:
    """Right under chat and mistral; SUPPORTED to all under alpaca (5 of 12 right)."""
    gold, template = question_and_template(sid)
    return f"LABEL: {S if template == 'alpaca' else gold}"


def model_b(text: str, sid: str, epoch: int) -> str:
    """NEI to all under chat (5 of 12), REFUTED to all under mistral (2 of 12), right under
    alpaca."""
    gold, template = question_and_template(sid)
    return f"LABEL: {({'chat': N, 'mistral': R}).get(template, gold)}"


def model_b_worse(text: str, sid: str, epoch: int) -> str:
    """Model B, but wrong on every question under alpaca."""
    gold, template = question_and_template(sid)
    return f"LABEL: {WRONG[gold]}" if template == "alpaca" else model_b(text, sid, epoch)


def one_template(text: str, sid: str, epoch: int) -> str:
    return f"LABEL: {GOLD[int(sid.split('-')[1]) - 1]}"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("templates")
    data = str(FIXTURES / "medreqal_fixture.csv")
    runs = {
        "a": ("all", model_a, "model-a"),
        "b": ("all", model_b, "model-b"),
        "b_worse": ("all", model_b_worse, "model-b"),
        "chat": ("chat", one_template, "model-a"),
        "alpaca": ("alpaca", one_template, "model-a"),
    }
    out = {}
    for name, (prompt, reply, model) in runs.items():
        with pytest.warns(UserWarning, match="counts differ"):
            task = medreqal(prompt=prompt, data_file=data, bertscore=False)
        replay_run(task, reply, model, tmp / name)
        out[name] = tmp / name / "logs"
    return out


# --- the report ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(logs, tmp_path_factory):
    result = build_report([logs["a"], logs["b"]], tmp_path_factory.mktemp("report"), n_boot=20)
    return result.markdown.read_text()


@pytest.mark.slow
def test_spread_table_counted_by_hand(report):
    [rows] = [rows for section, caption, rows in md_tables(report)
              if section.startswith("MedREQAL") and caption.startswith("Prompt spread")]
    accuracy = {r["run"]: r for r in rows if r["number"] == "Accuracy"}
    a, b = accuracy["model-a (replayed)"], accuracy["model-b (replayed)"]
    assert [a[t] for t in ("chat", "mistral", "alpaca", SPREAD)] == [
        fmt(1.0), fmt(1.0), fmt(5 / 12), fmt(7 / 12)]
    assert [b[t] for t in ("chat", "mistral", "alpaca", SPREAD)] == [
        fmt(5 / 12), fmt(2 / 12), fmt(1.0), fmt(10 / 12)]
    assert {r["number"] for r in rows} == {"Accuracy", "Macro-F1", "Valid rate"}


@pytest.mark.slow
def test_ranking_table_and_line_say_the_order_changes(report):
    [rows] = [rows for _, caption, rows in md_tables(report) if caption.startswith("Rank of")]
    a, b = "model-a (replayed)", "model-b (replayed)"
    assert rows == [
        {"template": "chat", a: "1", b: "2"},
        {"template": "mistral", a: "1", b: "2"},
        {"template": "alpaca", a: "2", b: "1"},
    ]
    assert "\nRanking changes with the template: yes\n" in report


@pytest.mark.slow
def test_each_template_is_a_row_of_the_headline_and_of_table_2(report):
    tables = md_tables(report)
    [head] = [rows for section, caption, rows in tables
              if section.startswith("MedREQAL") and caption.startswith("Headline numbers")]
    assert [(r["run"], r["condition"]) for r in head[:2]] == [
        ("model-a (replayed)", "chat"), ("model-b (replayed)", "chat")]
    [t2] = [rows for _, caption, rows in tables if caption.startswith("Table 2 (ours)")]
    assert t2[0]["run"] == "model-a (replayed), prompt=chat" and t2[0]["Accuracy (%)"] == "100.0"
    [t3] = [rows for _, caption, rows in tables if caption.startswith("Table 3 (ours)")]
    # the gold counts are the same under every template: one gold row (and the paper's)
    assert [r["run"] for r in t3 if r["run"].startswith("gold")] == ["gold", "gold (published)"]


def test_order_keeps_ties_together_and_a_tie_is_a_change():
    values = {"x": 0.5, "y": 0.7, "z": 0.5, "w": math.nan}
    tiers = order(values)
    assert tiers == [["y"], ["x", "z"], ["w"]]
    assert ranks(tiers, values) == {"y": "1", "x": "2=", "z": "2=", "w": "—"}
    same = {"chat": [["a"], ["b"]], "alpaca": [["a"], ["b"]]}
    assert not ranking_changes(same)
    assert ranking_changes({**same, "mistral": [["a", "b"]]})


@pytest.mark.slow
def test_one_run_of_several_templates_has_nothing_to_rank(logs, tmp_path):
    md = build_report([logs["a"]], tmp_path, n_boot=20).markdown.read_text()
    assert ("\nRanking by Accuracy per template: needs two runs of the same templates (1 run(s) "
            "of several templates here).\n") in md


# --- the setup and the gate ---------------------------------------------------------------


@pytest.mark.slow
def test_the_template_is_part_of_the_setup(logs):
    runs, _ = load_runs([logs["chat"], logs["alpaca"], logs["a"]])
    prompts = {r.setup["prompt"] for r in runs}
    assert prompts == {"chat", "alpaca", "chat,mistral,alpaca"}
    with pytest.raises(ReportError, match="runs differ in dataset revision, prompt or task"):
        build_report([logs["chat"], logs["alpaca"]], logs["chat"].parent / "mixed", n_boot=20)


@pytest.mark.slow
def test_a_baseline_of_all_templates_gates_each_template(logs):
    baseline = make_baseline([logs["b"]])
    rows, notes = regress(baseline, [logs["b"]], n_boot=50)
    gated = {r.metric: r.verdict for r in rows if r.test.startswith("headline")}
    assert set(gated) == {f"{t}/{h}" for t in ("chat", "mistral", "alpaca")
                          for h in ("accuracy_all", "macro_f1_all", "valid_rate")}
    assert set(gated.values()) == {"ok"} and notes == []
    rows, _ = regress(baseline, [logs["b_worse"]], n_boot=50)
    verdicts = {r.metric: r.verdict for r in rows}
    assert verdicts["alpaca/accuracy_all"] == "REGRESSION"
    assert verdicts["chat/accuracy_all"] == verdicts["mistral/accuracy_all"] == "ok"
    [worse] = [r for r in rows if r.metric == "alpaca/accuracy_all"]
    assert (worse.old, worse.new) == (1.0, 0.0)


@pytest.mark.slow
def test_another_template_is_another_setup(logs):
    rows, _ = regress(make_baseline([logs["chat"]]), [logs["alpaca"]], n_boot=20)
    [row] = rows
    assert row.verdict == "setup changed"
    assert row.detail == (
        "changed: prompt chat -> alpaca, task_args.prompt chat -> alpaca, prompt: the input "
        "sent differs on 12 of 12 shared samples (e.g. medreqal-1): the number of messages "
        "(2 -> 1)")  # chat sends a system and a user message, alpaca one user message


# --- med-evals diff -----------------------------------------------------------------------


@pytest.mark.slow
def test_diff_compares_template_by_template(logs, capsys):
    [a] = sorted(logs["a"].glob("*.eval"))
    [b] = sorted(logs["b"].glob("*.eval"))
    assert cli_main(["diff", str(a), str(b), "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    for template in ("chat", "mistral", "alpaca"):
        assert f"\ncondition {template}: 12 paired samples (same id and target)\n" in out
    # alpaca: A said SUPPORTED to all (committed 12, 5 right), B the gold (7 committed, 5 NEI)
    assert ("  abstention (NOT ENOUGH INFORMATION), A / B: coverage 1.000 / 0.583, selective "
            "accuracy 0.417 / 1.000, abstention recall 0.000 / 1.000, over-abstention 0.000 / "
            "0.000\n") in out
    assert cli_main(["diff", str(a), str(b), "--condition", "alpaca", "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "condition alpaca: " in out and "condition chat" not in out
