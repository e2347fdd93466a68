"""End to end: fixtures -> ``build medreqal`` with a local fake model -> a CSV that
``med_evals/medreqal`` loads and runs."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from inspect_ai.model import get_model

from med_evals.commands.cli import main
from med_evals.data.builders import medreqal_build as mb
from med_evals.data.builders.prompts import CLASSIFICATION_SYSTEM, RENAL
from med_evals.tasks.medreqal import medreqal, read_medreqal
from tests.conftest import mock_output

from ..support.evals import inspect_eval

FIXTURES = Path(__file__).parent / "fixtures"

#: objective (start) -> the fake generator's replies, in order of the calls
REPLIES = {
    "To determine whether bladder training": [
        "QUESTION: Does bladder training reduce "
        "incontinence in women?\nLABEL: NOT ENOUGH INFORMATION"
    ],
    "To assess the effects of Lactobacillus": [
        "I think probiotics help.",  # retried once
        "QUESTION: Do probiotics prevent antibiotic-associated diarrhoea?\nLABEL: SUPPORTED",
    ],
    "To compare hyaluronate": ["QUESTION: Do hyaluronate drops relieve dry eye?\nLABEL: REFUTED"],
    "To assess whether supervised aerobic": ["No idea.", "Still no idea."],  # left out
    "To assess regular inhaled": [
        "QUESTION: (Do inhaled corticosteroids reduce exacerbations "
        "in mild asthma?)\nLABEL: SUPPORTED"
    ],
}
CATEGORY_REPLIES = {
    "bladder": "miscellaneous",
    "probiotics": "digestive system and metabolism",
    "dry eye": "Sensory organs.",
    "asthma": "respiratory system",
}


def fake_model():
    calls: Counter[str] = Counter()

    def outputs(input, tools, tool_choice, config):  # noqa: A002
        system, user = input[0].text, input[-1].text
        if system == CLASSIFICATION_SYSTEM:
            assert config.temperature == 0.0
            return mock_output(next(v for k, v in CATEGORY_REPLIES.items() if k in user.lower()))
        key = next(k for k in REPLIES if f"Objectives: {k}" in user)
        calls[key] += 1
        return mock_output(REPLIES[key][calls[key] - 1])

    return get_model("mockllm/model", custom_outputs=outputs)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[mb.BuildResult, Path]:
    out = tmp_path_factory.mktemp("build") / "fresh.csv"
    logs = out.parent / "logs"
    result = mb.build_medreqal(
        [FIXTURES],
        fake_model(),
        out,
        log_dir=str(logs),
        validation_sheet=3,
        display="none",
        echo=lambda s: None,
    )
    return result, logs


@pytest.mark.slow
def test_csv_in_medreqal_schema(built) -> None:
    result, _ = built
    df = read_medreqal(result.csv)
    assert list(df.columns[:8]) == list(mb.SCHEMA)
    assert list(df["pmid"]) == ["90000006", "90000001", "90000008", "90000009"]
    assert list(df["verdict"]) == ["NOT ENOUGH INFORMATION", "SUPPORTED", "REFUTED", "SUPPORTED"]
    assert list(df["label"]) == ["1", "0", "2", "0"]
    assert list(df["category"]) == [
        RENAL,
        "digestive system and metabolism",
        "sensory organs",
        "respiratory system",
    ]
    assert df["category_model"][0] == "miscellaneous"
    assert df["question"][3] == "Do inhaled corticosteroids reduce exacerbations in mild asthma?"
    assert df["publication_date"][3] == "2024-06-05" and df["review_id"][3] == "CD099007"
    assert "Sjögren’s syndrome – “naïve”" in df["objective"][2]


@pytest.mark.slow
def test_skipped_are_counted_and_written(built) -> None:
    result, _ = built
    counts = result.skipped_counts()
    assert counts[mb.UNPARSED] == 1 and counts["withdrawn"] == 1
    assert counts["earlier version of a review in the input"] == 2
    assert counts["malformed record"] == 1
    rows = list(csv.DictReader(mb.beside(result.csv, "skipped.csv").open(encoding="utf-8")))
    assert {r["pmid"]: r["reason"] for r in rows}["90000010"] == mb.UNPARSED
    summary = json.loads(mb.beside(result.csv, "build.json").read_text())
    assert summary["rows"] == 4 and summary["skipped"] == counts


@pytest.mark.slow
def test_generation_is_logged(built) -> None:
    result, logs = built
    assert len(result.logs) == 2 and all(Path(p).parent == logs for p in result.logs)
    log = read_eval_log(result.logs[0])
    assert log.status == "success" and log.eval.task == "medreqal_questions"
    retried = next(s for s in log.samples if s.id == "90000001")
    assert sum(e.event == "model" for e in retried.events) == 2
    assert retried.scores["question_label"].metadata["attempts"] == 2
    categories = read_eval_log(result.logs[1])
    assert categories.eval.task == "medreqal_categories"
    assert categories.plan.config.temperature == 0.0  # as in the paper
    call = next(e for e in categories.samples[0].events if e.event == "model")
    assert call.config.temperature == 0.0


@pytest.mark.slow
def test_validation_sheet(built) -> None:
    result, _ = built
    rows = list(csv.DictReader(result.validation.open(encoding="utf-8")))
    assert len(rows) == 3
    assert all(r["question_correct"] == r["label_correct"] == "" for r in rows)
    again = mb.write_validation_sheet(
        list(csv.DictReader(result.csv.open(encoding="utf-8"))),
        result.csv.parent / "again.csv",
        3,
        seed=0,
    )
    assert again.read_text(encoding="utf-8") == result.validation.read_text(encoding="utf-8")


@pytest.mark.slow
def test_medreqal_task_runs_on_the_built_csv(built) -> None:
    result, _ = built
    task = medreqal(data_file=str(result.csv), bertscore=False)
    model = get_model(
        "mockllm/model",
        custom_outputs=lambda *a: mock_output("LABEL: SUPPORTED. Trials suggest it helps."),
    )
    (log,) = inspect_eval(task, model=model, display="none", log_dir=str(result.csv.parent))
    assert log.status == "success" and len(log.samples) == 4
    metrics = log.results.scores[0].metrics
    assert metrics["accuracy_all"].value == pytest.approx(0.5)
    later = medreqal(data_file=str(result.csv), bertscore=False, published_after="2024-01-01")
    assert [s.input for s in later.dataset][0].startswith("Do inhaled")
    assert len(later.dataset) == 1


def test_published_after_in_the_build(tmp_path) -> None:
    result = mb.build_medreqal(
        [FIXTURES],
        fake_model(),
        tmp_path / "late.csv",
        published_after="2023-01-01",
        log_dir=str(tmp_path),
        display="none",
        echo=lambda s: None,
    )
    assert list(read_medreqal(result.csv)["pmid"]) == ["90000009"]  # 90000010: no parse
    assert result.skipped_counts()[mb.NOT_AFTER] == 3
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        mb.build_medreqal([FIXTURES], fake_model(), tmp_path / "x.csv", published_after="2023")


def test_cli_build_with_replay(tmp_path, capsys) -> None:
    replay = tmp_path / "replay.jsonl"
    lines = [
        {
            "task": "medreqal_questions",
            "id": "90000009",
            "reply": "QUESTION: Do inhaled steroids help?\nLABEL: SUPPORTED",
        },
        {"task": "medreqal_categories", "id": "90000009", "reply": "respiratory system"},
    ]
    replay.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    out = tmp_path / "cli.csv"
    rc = main(
        [
            "build",
            "medreqal",
            "--source",
            str(FIXTURES / "cochrane_efetch.xml"),
            "--model",
            f"replay/{replay}",
            "--out",
            str(out),
            "--published-after",
            "2024-01-01",
            "--log-dir",
            str(tmp_path / "logs"),
            "--validation-sheet",
            "1",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "wrote" in printed and "published on or before the cut-off" in printed
    df = read_medreqal(out)
    assert list(df["question"]) == ["Do inhaled steroids help?"]
    assert mb.beside(out, "validation.csv").is_file()
    assert len(list((tmp_path / "logs").glob("*.eval"))) == 2


def test_failed_model_calls_are_counted_not_fatal(tmp_path) -> None:
    def outputs(input, tools, tool_choice, config):  # noqa: A002
        if "inhaled corticosteroids" in input[-1].text:
            raise RuntimeError("provider down")
        if input[0].text == CLASSIFICATION_SYSTEM:
            return mock_output("cancer")
        return mock_output("QUESTION: Does it work?\nLABEL: REFUTED")

    model = get_model("mockllm/model", custom_outputs=outputs)
    result = mb.build_medreqal(
        [FIXTURES],
        model,
        tmp_path / "e.csv",
        log_dir=str(tmp_path),
        display="none",
        echo=lambda s: None,
    )
    assert result.skipped_counts()[mb.MODEL_ERROR] == 1
    assert result.rows == 4


def test_cli_build_with_no_readable_source_is_exit_2(tmp_path, capsys) -> None:
    """No source holds a PubMed record: one line naming each source tried and why, exit 2,
    before any model call and without writing anything."""
    junk = tmp_path / "page.html"
    junk.write_text("<html><body>Access denied</body></html>", encoding="utf-8")
    empty = tmp_path / "empty"
    empty.mkdir()
    notes = tmp_path / "notes.xml"
    notes.write_text("just some notes", encoding="utf-8")
    out = tmp_path / "out" / "b.csv"
    rc = main(
        ["build", "medreqal", "--source", str(junk), "--source", str(empty), "--source",
         str(notes), "--model", "mockllm/model", "--out", str(out)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 2
    [line] = captured.err.strip().splitlines()
    assert line.startswith("med-evals build medreqal: error: no PubMed record could be read")
    assert f"{junk} (no PMID on the page)" in line
    assert f"{empty}/ (no .xml, .html, .htm file in it)" in line
    assert f"{notes} (no <PubmedArticle> and no PubMed page markup)" in line
    assert "questions" not in captured.out and not out.parent.exists()


def test_cli_build_with_every_record_left_out_is_exit_2(tmp_path, capsys) -> None:
    out = tmp_path / "late.csv"
    rc = main(
        ["build", "medreqal", "--source", str(FIXTURES / "cochrane_efetch.xml"), "--model",
         "mockllm/model", "--out", str(out), "--published-after", "2030-01-01"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith("med-evals build medreqal: error: no question built: every record")
    assert "published on or before the cut-off" in err[-1]
    assert mb.beside(out, "skipped.csv").is_file()  # what was left out, and why, is kept
