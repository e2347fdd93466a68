import re
import shutil
from pathlib import Path

import pytest
from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import get_model
from inspect_ai.scorer import match

from med_evals.commands.cli import main as cli_main
from med_evals.commands.report import ReportError, build_report
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.oncology_rct import oncology_rct

from ..conftest import replying
from ..medevidence_support import install_medevidence
from ..oncology_support import oncology_module
from ..support.browser import chromium_page
from ..support.evals import inspect_eval


def _follower(text):
    if "did not meet" in text:
        return "NEGATIVE"
    if "met its primary endpoint" in text:
        return "POSITIVE"
    return "NEGATIVE"


def _guesser(text):
    return "POSITIVE" if "DOI:" in text else "Positive."


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Real logs: two models on the oncology fixture, MedEvidence, and three bad logs."""
    with oncology_module(tmp_path_factory, "report") as (tmp, mp):
        return _report_logs(tmp, mp)


def _report_logs(tmp: Path, mp: pytest.MonkeyPatch) -> Path:
    logdir = tmp / "logs"
    for name, fn in (("follower", _follower), ("guesser", _guesser)):
        model = get_model(f"mockllm/{name}", custom_outputs=replying(fn))
        inspect_eval(
            oncology_rct(condition="study"), model=model, display="none", log_dir=str(logdir)
        )

    def boom(*args):
        raise RuntimeError("provider down")

    [errored] = inspect_eval(
        oncology_rct(provider_errors="raise"),
        model=get_model("mockllm/broken", custom_outputs=boom),
        display="none",
        log_dir=str(logdir),
        max_retries=0,
    )
    assert errored.status == "error"
    ok = read_eval_log(next(iter(sorted(logdir.glob("*oncology*")))).as_posix())
    ok.status = "cancelled"
    write_eval_log(ok, (logdir / "cancelled-oncology-rct.eval").as_posix())
    install_medevidence(tmp / "me", mp)
    inspect_eval(
        medevidence(),
        model=get_model("mockllm/follower", custom_outputs=replying(lambda t: "Answer: Lower")),
        display="none",
        log_dir=str(logdir),
    )
    # bad logs: another task's, an errored run, a cancelled run
    inspect_eval(
        Task(dataset=[Sample(input="1+1?", target="2")], scorer=match()),
        model=get_model("mockllm/x", custom_outputs=replying(lambda t: "2")),
        display="none",
        log_dir=str(logdir),
    )
    return logdir


@pytest.mark.slow
def test_report_tables_figures_and_skips(logs, tmp_path):
    r = build_report([logs], tmp_path / "out", n_boot=100)
    md = r.markdown.read_text()
    assert "Table 1 (ours): condition × run" in md
    assert "| title_abstract | follower |" in md.replace("mockllm/", "")
    assert "Flip rates" in md and "Identifier pull" in md and "McNemar exact p" in md
    assert "## MedEvidence" in md and "Headline numbers" in md
    assert "What produced each run" in md
    assert len(r.figures) >= 4 and all(f.stat().st_size > 1000 for f in r.figures)
    reasons = " ".join(r.skipped)
    assert "is not a med_evals study" in reasons
    assert "status error" in reasons and "status cancelled" in reasons
    # the follower flips every trial between baseline and counterfactual
    assert "| follower | title_abstract vs counterfactual | 1.000 |" in md.replace("mockllm/", "")
    # one missing-value mark (a word: a trial's title, "Maintenance ...", may hold the letters)
    assert re.search(r"\bnan\b", md) is None and "N/A" not in md


@pytest.mark.slow
def test_published_numbers_are_labelled_as_theirs(logs, tmp_path, shared_datasets):
    ref = shared_datasets.parent / "reference"
    r = build_report([logs], tmp_path / "out", reference=ref, n_boot=50)
    md = r.markdown.read_text()
    assert "the study's own Table 1 (theirs" in md
    assert "| title_abstract | Claude Opus 4.5 (published) | 100.0 | 0.97 (0.95-0.99) |" in md


@pytest.mark.slow
def test_refuses_runs_with_different_data_unless_told(logs, tmp_path, monkeypatch):
    from ..oncology_support import FIXTURE_CSV

    other = tmp_path / "trials.csv"
    shutil.copy(FIXTURE_CSV, other)
    other.write_text(other.read_text().replace("Fixture trial 2", "Fixture trial two"))
    model = get_model("mockllm/follower", custom_outputs=replying(_follower))
    inspect_eval(
        oncology_rct(trials_file=str(other)),
        model=model,
        display="none",
        log_dir=str(tmp_path / "more"),
    )
    with pytest.raises(ReportError, match="differ in dataset revision, prompt or task version"):
        build_report([logs, tmp_path / "more"], tmp_path / "out", n_boot=50)
    r = build_report([logs, tmp_path / "more"], tmp_path / "out", allow_mixed=True, n_boot=50)
    assert r.warnings and "Mixed runs compared" in r.markdown.read_text()
    assert (
        cli_main(["report", str(logs), str(tmp_path / "more"), "--out", str(tmp_path / "o")]) == 2
    )


@pytest.mark.slow
def test_html_renders_in_headless_chromium(logs, tmp_path):
    r = build_report([logs], tmp_path / "out", n_boot=50)
    with chromium_page() as page:
        problems = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("requestfailed", lambda req: problems.append(f"request failed: {req.url}"))
        page.goto(r.html.as_uri())
        page.wait_for_load_state("load")
        sizes = page.evaluate(
            "Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)"
        )
        # no horizontal scroll at 1,280 px, and no table or figure wider than the text column
        page_width, view_width = page.evaluate(
            "[document.documentElement.scrollWidth, window.innerWidth]"
        )
        too_wide = page.evaluate(
            """Array.from(document.querySelectorAll('table, img')).filter(
                 e => e.getBoundingClientRect().right
                      > document.body.getBoundingClientRect().right + 1).length"""
        )
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert problems == []
    assert len(sizes) == len(r.figures) and all(w > 100 for w in sizes)
    assert page_width <= view_width == 1280
    assert too_wide == 0


def test_medreqal_tables(tmp_path, shared_datasets):
    from med_evals.tasks.medreqal import medreqal

    fixture = Path(__file__).resolve().parents[2] / "datasets/fixtures/medreqal_fixture.csv"
    replies = {
        "a": "LABEL: SUPPORTED. A Cochrane review found benefit.",
        "b": "LABEL: NOT ENOUGH INFORMATION. Evidence is limited.",
    }
    for name, reply in replies.items():
        model = get_model(f"mockllm/{name}", custom_outputs=replying(lambda t, r=reply: r))
        inspect_eval(
            medreqal(data_file=str(fixture), bertscore=False),
            model=model,
            display="none",
            log_dir=str(tmp_path / "logs"),
        )
    r = build_report(
        [tmp_path / "logs"],
        tmp_path / "out",
        reference=shared_datasets.parent / "reference",
        n_boot=50,
    )
    lines = r.markdown.read_text().splitlines()
    assert any("(published) rows: the paper's Table 2 (theirs)" in line for line in lines)
    # Table 3: predicted-label counts beside the gold counts (fixture: 5 / 2 / 5)
    assert "| mockllm/a | 12 | 0 | 0 | 0 | 0 |" in lines
    assert "| mockllm/b | 0 | 0 | 12 | 0 | 0 |" in lines
    assert "| gold | 5 | 2 | 5 | — | — |" in lines
    assert "| gold (published) | 543 | 186 | 2057 | — | — |" in lines
    # Table 5: evidence mentions
    assert "| mockllm/a | 12 | 12 | 12 | 0 |" in lines
    assert "| mockllm/b | 12 | 0 | 0 | 0 |" in lines
    # Table 2: accuracy over all samples in %, a = 5/12 right, b = 5/12 right; no BERTScore
    # was computed, and the paper's BERTScore column holds only the paper's rows
    [t2] = [line for line in lines if line.startswith("| mockllm/a | 41.7 | 19.6 |")]
    assert t2.endswith("| — | — | not computed |")  # ROUGE-L only, no BERTScore
    assert (
        "| Mixtral-8x7B (published) | 62.0 | 34.8 | 21.1 | 85.6 | — | not named in the paper |"
        in lines
    )
