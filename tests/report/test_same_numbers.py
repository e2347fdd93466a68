"""One number, one computation: for a replayed run of each study, the log's headline metrics,
the report's headline cells (its rows and its Markdown) and ``med-evals regress`` (old == new
when the baseline is the same log) show the same values."""

from __future__ import annotations

from pathlib import Path

import pytest

from med_evals.commands.regress import make_baseline, regress
from med_evals.commands.report import build_report
from med_evals.commands.report.document import fmt
from med_evals.tasks import spec

from ..medevidence_support import install_medevidence
from ..oncology_support import install_fixture
from .support import logged, replay_run, same

FIXTURES = Path(__file__).resolve().parents[2] / "datasets" / "fixtures"


def md_tables(text: str) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(section heading, caption, rows) of every table in the report's Markdown."""
    out: list[tuple[str, str, list[dict[str, str]]]] = []
    section = caption = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("*") and line.endswith("*"):
            caption = line.strip("*")
        elif line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            cols = [c.strip() for c in line.strip("|").split(" | ")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                cells = [c.strip() for c in lines[i].strip("|").split(" | ")]
                rows.append(dict(zip(cols, cells, strict=True)))
                i += 1
            out.append((section, caption, rows))
            continue
        i += 1
    return out


def check_same_numbers(task: str, log_dir: Path, out: Path) -> list:
    """Assert log == report == regress for every headline number; return the report rows."""
    study = spec(task)
    [log_path] = sorted((log_dir).glob("*.eval"))
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_path))
    result = build_report([log_dir], out, n_boot=20)
    rows = [r for r in result.headline if r.task == task]
    assert rows, "the report has headline rows"
    conditions = {r.condition for r in rows}
    reg, notes = regress(make_baseline([log_dir]), [log_dir], n_boot=20)
    assert notes == []
    tables = md_tables(result.markdown.read_text())
    [(_, _, md_rows)] = [
        t for t in tables if t[0] == study.title and t[1].startswith("Headline numbers")
    ]
    # the log viewer's headline (Task(headline_metric=...)): the study's first headline number
    assert log.results.headline.metric.split("/")[-1] == study.headline[0].name
    for r in rows:
        prefix = f"{r.condition}/" if len(conditions) > 1 else ""
        [md] = [m for m in md_rows if m["run"] == r.label and m.get("condition", "") == r.condition]
        for h in study.headline:
            value = r.values[h.name]
            assert same(value, logged(log, prefix + h.name)), (h.name, r.condition)
            [row] = [x for x in reg if x.metric == prefix + h.name]
            assert same(row.old, row.new) and same(row.new, value)
            assert md[h.display] == fmt(value)
    return rows


def test_oncology_rct(tmp_path, monkeypatch):
    from med_evals.tasks.oncology_rct import oncology_rct

    install_fixture(tmp_path / "data", monkeypatch)

    def reply(text: str, sid: str, epoch: int) -> str | None:
        if sid.endswith("-001"):
            return "I cannot tell"  # invalid under the strict rule
        if sid.endswith("-002"):
            return None  # a provider failure
        return "NEGATIVE" if "did not meet" in text else "POSITIVE"

    replay_run(oncology_rct(condition="title_abstract,counterfactual"), reply, "openai/gpt-test",
               tmp_path / "run")
    rows = check_same_numbers("oncology_rct", tmp_path / "run" / "logs", tmp_path / "report")
    assert {r.condition for r in rows} == {"title_abstract", "counterfactual"}
    assert {r.label for r in rows} == {"openai/gpt-test (replayed)"}
    assert all(0 < r.values["valid_rate"] < 1 for r in rows)


def test_medevidence(tmp_path, monkeypatch):
    from med_evals.tasks.medevidence import medevidence

    install_medevidence(tmp_path / "data", monkeypatch)

    def reply(text: str, sid: str, epoch: int) -> str:
        return "**Answer**: lower" if sid.startswith("evidence") else "The answer is lower."

    replay_run(medevidence(condition="evidence,closed_book"), reply, "anthropic/claude-test",
               tmp_path / "run")
    rows = check_same_numbers("medevidence", tmp_path / "run" / "logs", tmp_path / "report")
    by_cond = {r.condition: r.values for r in rows}
    assert by_cond["evidence"]["valid_rate"] == 1.0
    assert by_cond["closed_book"]["valid_rate"] == 0.0  # not the authors' **Answer** field
    # several questions of one review: intervals clustered by review, from the samples'
    # metadata in the log, beside the plain ones (Inspect's clustered Wilson interval)
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import SampleScore, Score, ci_wilson

    from med_evals.commands.report.document import fmt_interval

    [path] = sorted((tmp_path / "run" / "logs").glob("*.eval"))
    samples = [s for s in read_eval_log(str(path)).samples if s.id.startswith("evidence")]
    samples.sort(key=lambda s: str(s.id))
    right = [int(s.scores["effect_direction"].value["prediction"] == s.target) for s in samples]
    reviews = [s.metadata["review"] for s in samples]
    assert len(set(reviews)) < len(reviews)
    tables = md_tables((tmp_path / "report" / "report.md").read_text())
    [(_, _, clustered)] = [t for t in tables if t[1].startswith("95% intervals clustered by")]
    [row] = [r for r in clustered if r["condition"] == "evidence"]
    assert row["reviews"] == str(len(set(reviews)))
    # Inspect's metric itself, on the log's samples with their review in the metadata
    bounds = ci_wilson(cluster="review")([
        SampleScore(score=Score(value=r), sample_id=i, sample_metadata={"review": c})
        for i, (r, c) in enumerate(zip(right, reviews, strict=True))])
    assert row["Accuracy 95% CI, clustered by review"] == fmt_interval(
        (bounds["lower"], bounds["upper"]), 3)


@pytest.mark.slow
def test_medevidence_other_metrics_equal_a_full_log_from_either_log(tmp_path, monkeypatch):
    """The report's metrics beyond the headline come from the scorer's full metric set over the
    per-sample values: the same cells from a default (headline) log as from a metrics=full log,
    each equal to the full log's own metric."""
    from med_evals.tasks.medevidence import medevidence

    install_medevidence(tmp_path / "data", monkeypatch)

    def reply(text: str, sid: str, epoch: int) -> str:
        return "**Answer**: lower" if sid.endswith(("1", "2")) else "The answer is: higher"

    full = replay_run(medevidence(condition="evidence,closed_book", metrics="full"), reply,
                      "anthropic/claude-test", tmp_path / "full")
    short = replay_run(medevidence(condition="evidence,closed_book"), reply,
                       "anthropic/claude-test", tmp_path / "short")
    logged_full = {k: m.value for s in full.results.scores for k, m in s.metrics.items()}
    logged_short = {k for s in short.results.scores for k in s.metrics}
    assert logged_short < set(logged_full) and len(logged_short) == 6
    cells = {}
    for run in ("full", "short"):
        md = build_report([tmp_path / run / "logs"], tmp_path / f"report-{run}", n_boot=20)
        tables = [t for t in md_tables(md.markdown.read_text()) if t[1].startswith("Other metrics")]
        assert tables
        cells[run] = {(row["condition"], name): cell for _, _, rows in tables for row in rows
                      for name, cell in row.items() if name not in ("run", "condition")}
    assert cells["full"] == cells["short"]
    assert any("lenient" in name for _, name in cells["full"])
    for (cond, name), cell in cells["full"].items():
        value = logged_full[f"{cond}/{name}"]  # a count: logged as a float, shown as an integer
        assert cell == fmt(value) or (value == int(value) and cell == str(int(value)))


@pytest.mark.parametrize("task", ["medreqal", "healthfc"])
def test_verdict_tasks(task, tmp_path):
    if task == "medreqal":
        from med_evals.tasks.medreqal import medreqal as make

        kwargs = {"data_file": str(FIXTURES / "medreqal_fixture.csv"), "bertscore": False}
    else:
        from med_evals.tasks.healthfc import healthfc as make

        kwargs = {"data_file": str(FIXTURES / "healthfc_fixture.csv"), "bertscore": False,
                  "evidence": True}

    def reply(text: str, sid: str, epoch: int) -> str:
        return "LABEL: SUPPORTED. A Cochrane review." if int(sid.split("-")[-1]) % 3 else "Unsure."

    with pytest.warns(UserWarning, match="counts differ"):
        task_obj = make(**kwargs)
    replay_run(task_obj, reply, "vllm/test-model", tmp_path / "run")
    rows = check_same_numbers(task, tmp_path / "run" / "logs", tmp_path / "report")
    [row] = rows
    assert 0 < row.values["valid_rate"] < 1 and row.condition == ""
    # no review id in the data: no clustered interval, and the report says so
    text = (tmp_path / "report" / "report.md").read_text()
    assert "No interval clustered by source: the " in text
    assert "95% intervals clustered by" not in text
