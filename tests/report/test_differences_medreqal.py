"""Where two runs differ, for MedREQAL and HealthFC (issue 36): each row shows the sample's
question or claim, not the prompt's instruction around it, in report.md, in ``med-evals diff``
and in its ``--json``, under every prompt variant (chat, mistral, alpaca) and, for HealthFC,
with the evidence after the claim too. The runs are replayed through the real tasks; the
expected text is read from the fixture CSVs, not from the code under test."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from med_evals.commands.cli import main as cli_main
from med_evals.commands.report import build_report
from med_evals.logs.pairs import VIEWER
from med_evals.solvers.medreqal import PAPER_MODELS
from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medreqal import medreqal

from ..conftest import FIXTURES
from ..support.evals import inspect_eval

#: (study, prompt variant, evidence): every variant; HealthFC's evidence option with each
CASES = [
    *[("medreqal", p, False) for p in PAPER_MODELS],
    *[("healthfc", p, ev) for p in PAPER_MODELS for ev in (False, True)],
]
#: the fixtures' label codes (both studies: 0 SUPPORTED, 1 NOT ENOUGH INFORMATION, 2 REFUTED)
GOLD = {"0": "SUPPORTED", "1": "NOT ENOUGH INFORMATION", "2": "REFUTED"}
#: the question or claim column of each fixture
ITEM = {"medreqal": "question", "healthfc": "en_claim"}
#: A answers SUPPORTED, B REFUTED: right only in A is gold SUPPORTED, right only in B gold
#: REFUTED, wrong in both (labels differ) gold NOT ENOUGH INFORMATION
REPLIES = {"model-a": "LABEL: SUPPORTED", "model-b": "LABEL: REFUTED"}
#: each list: (its name in diff's text, its --json key, report.md's title, the gold label)
LISTS = (("right only in A", "right_only_in_a", "Right only in A", "SUPPORTED"),
         ("right only in B", "right_only_in_b", "Right only in B", "REFUTED"),
         ("wrong in both", "wrong_in_both", "Wrong in both", "NOT ENOUGH INFORMATION"))
N_BOOT = 20


def _items(study: str) -> dict[str, tuple[str, str]]:
    """sample id -> (gold label, question or claim), from the fixture CSV."""
    with (FIXTURES / f"{study}_fixture.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return {f"{study}-{i}": (GOLD[r["label"]], r[ITEM[study]]) for i, r in enumerate(rows, 1)}


def _task(study: str, prompt: str, evidence: bool) -> Any:
    kw = {"data_file": str(FIXTURES / f"{study}_fixture.csv"), "prompt": prompt,
          "generation_scoring": False, "bertscore": False}
    return healthfc(evidence=evidence, **kw) if study == "healthfc" else medreqal(**kw)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[tuple[str, str, bool], dict[str, str]]:
    """(study, prompt, evidence) -> model -> its log: each model's replies recorded once for
    every sample id of both fixtures and replayed, in one eval, through every case's task."""
    tmp = tmp_path_factory.mktemp("verdict-lists")
    ids = [*_items("medreqal"), *_items("healthfc")]
    out: dict[tuple[str, str, bool], dict[str, str]] = {}
    for model, reply in REPLIES.items():
        rec = tmp / f"{model}.jsonl"
        rec.write_text("".join(json.dumps({"id": sid, "epoch": 1, "reply": reply,
                                           "model": model}) + "\n" for sid in ids))
        tasks = [_task(*case) for case in CASES]
        logs = inspect_eval(tasks, model=f"replay/{rec}", log_dir=str(tmp / "logs"),
                            display="none")
        for case, log in zip(CASES, logs, strict=True):
            assert log.status == "success", log.error
            study, args = log.eval.task.rsplit("/", 1)[-1], log.eval.task_args
            assert (study, args["prompt"], args.get("evidence", False)) == case
            out.setdefault(case, {})[model] = log.location
    return out


def _view(log: str, sid: str) -> str:
    return f"{VIEWER}/#/logs/{quote(Path(log).name)}/samples/sample/{sid}/1/"


def _listed(study: str, gold: str) -> list[tuple[str, str]]:
    """(sample id, question or claim) of the samples with this gold label, as listed (by id)."""
    return sorted((sid, item) for sid, (g, item) in _items(study).items() if g == gold)


@pytest.mark.slow
@pytest.mark.parametrize(("study", "prompt", "evidence"), CASES)
def test_report_rows_show_the_question_or_claim(runs, tmp_path, study, prompt, evidence):
    logs = runs[(study, prompt, evidence)]
    build_report([logs["model-a"], logs["model-b"]], tmp_path / "report", n_boot=N_BOOT)
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    pair = "A = model-a (replayed), B = model-b (replayed)"
    for _, _, title, gold in LISTS:
        listed = _listed(study, gold)
        rows = [f"| {sid} | {gold} | SUPPORTED | REFUTED | {item} | LABEL: SUPPORTED | "
                f"LABEL: REFUTED | [open]({_view(logs['model-a'], sid)}) | "
                f"[open]({_view(logs['model-b'], sid)}) |" for sid, item in listed]
        table = "\n".join([
            f"*{title} ({pair}): {len(listed)} samples, all shown*", "",
            "| sample | gold | label A | label B | input (start) | reply A | reply B | "
            "A in viewer | B in viewer |",
            "|---|---|---|---|---|---|---|---|---|", *rows, "", ""])
        assert table in md
    for words in ("Please answer", "please answer", "Below is an instruction", "EVIDENCE"):
        assert words not in md


@pytest.mark.slow
@pytest.mark.parametrize(("study", "prompt", "evidence"), CASES)
def test_diff_text_shows_the_question_or_claim(runs, capsys, study, prompt, evidence):
    logs = runs[(study, prompt, evidence)]
    assert cli_main(["diff", logs["model-a"], logs["model-b"], "--n-boot", str(N_BOOT)]) == 0
    out = capsys.readouterr().out
    for name, _, _, gold in LISTS:
        listed = _listed(study, gold)
        extra = f" (labels differ in {len(listed)})" if name == "wrong in both" else ""
        lines = [f"  {name}: {len(listed)}{extra} (all shown)"]
        for sid, item in listed:
            lines += [f"    {sid}  gold {gold}  A SUPPORTED  B REFUTED",
                      f"      input: {item}",
                      "      reply A: LABEL: SUPPORTED",
                      f"      view A: {_view(logs['model-a'], sid)}",
                      "      reply B: LABEL: REFUTED",
                      f"      view B: {_view(logs['model-b'], sid)}"]
        assert "\n".join(lines) + "\n" in out
    for words in ("Please answer", "please answer", "Below is an instruction", "EVIDENCE"):
        assert words not in out


@pytest.mark.slow
@pytest.mark.parametrize(("study", "prompt", "evidence"), CASES)
def test_diff_json_shows_the_question_or_claim(runs, capsys, study, prompt, evidence):
    logs = runs[(study, prompt, evidence)]
    args = ["diff", logs["model-a"], logs["model-b"], "--n-boot", str(N_BOOT), "--json"]
    assert cli_main(args) == 0
    [comparison] = json.loads(capsys.readouterr().out)["comparisons"]
    for _, key, _, gold in LISTS:
        listed = _listed(study, gold)
        got = comparison[key]
        assert got["count"] == len(listed)
        assert got["samples"] == [
            {"sample": sid, "gold": gold, "label_a": "SUPPORTED", "label_b": "REFUTED",
             "input": item,
             "reply_a": "LABEL: SUPPORTED", "reply_a_chars": 16, "epoch_a": 1, "epochs_a": 1,
             "view_a": _view(logs["model-a"], sid),
             "reply_b": "LABEL: REFUTED", "reply_b_chars": 14, "epoch_b": 1, "epochs_b": 1,
             "view_b": _view(logs["model-b"], sid)}
            for sid, item in listed]
