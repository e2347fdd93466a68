"""``inspect view`` lists each study's samples by what they are (issue 43, item 4): a run of
each study on its small fixture, one viewer for all the logs, each task's sample list opened in
headless Chromium 1,280 px wide (a screenshot under the test's folder), and its DOM read: the
column after the id is the sample's input, the question (MedREQAL, MedEvidence), the claim
(HealthFC), the trial's text in the condition's layout (oncology); the gold and the predicted
label are shown; the rows are in the spec's order (``view_sort``, then the id).

Not covered here: ``counterfactual_build`` and ``counterfactual_judges`` (their graders need
mock replies of their own formats; their inputs are the trial's abstract and its rewrite)."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from inspect_ai.model import get_model

from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import FIXTURES, replying
from .medevidence_support import install_medevidence
from .oncology_support import follower, install_fixture
from .support import INSPECT, deadline, free_port
from .support.browser import chromium_page, chromium_path
from .support.evals import inspect_eval

#: the start of each study's prompt: never what the list shows
BOILERPLATE = ("Please answer", "Given the ARTICLE", "Below is an instruction",
               "follow instruction")


def reply(text: str) -> str:
    if "**QUESTION**" in text:
        return "**Answer**: Higher"
    if "LABEL: (label)" in text:
        return "LABEL: SUPPORTED . Trials suggest so."
    return follower(text)


#: the cells of the viewer's sample list
CELLS = "[role=grid][aria-label=Samples] [role=gridcell]"


def _rows(page) -> list[dict[str, str]]:
    """Each row of the list: column id -> its text, in the order shown."""
    return page.evaluate("""(sel) => [...document.querySelectorAll(sel)].reduce((rows, c) => {
            const col = c.getAttribute('data-col-id');
            if (col === 'sampleId') rows.push({});
            rows[rows.length - 1][col] = c.innerText.trim();
            return rows; }, [])""", CELLS)


def _columns(page) -> list[str]:
    return page.evaluate(
        "(sel) => [...document.querySelectorAll(sel)].map(c => c.getAttribute('data-col-id'))",
        CELLS)


@pytest.mark.slow
def test_each_tasks_sample_list_shows_what_the_sample_is(tmp_path, monkeypatch):
    chromium_path()
    tasks = [
        medreqal(data_file=str(FIXTURES / "medreqal_fixture.csv"), bertscore=False),
        healthfc(data_file=str(FIXTURES / "healthfc_fixture.csv"), bertscore=False),
    ]
    # each task reads its data when made: its dataset's manifest installed first
    install_medevidence(tmp_path / "me", monkeypatch)
    tasks.append(medevidence(condition="closed_book,evidence"))
    install_fixture(tmp_path / "onc", monkeypatch)
    tasks.append(oncology_rct(condition="title_abstract,doi_only"))
    model = get_model("mockllm/model", custom_outputs=replying(reply))
    logs = inspect_eval(tasks, model=model, display="none", log_dir=str(tmp_path / "logs"),
                        limit=6)
    assert all(log.status == "success" for log in logs)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    proc = subprocess.Popen([INSPECT, "view", "--log-dir", str(tmp_path / "logs"), "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with deadline(60):
            while True:
                try:
                    urllib.request.urlopen(url + "api/log-dir", timeout=1).read()
                    break
                except OSError:
                    pass
        with chromium_page(width=1280, height=900) as page:
            for log in logs:
                full = read_eval_log(log.location)
                samples = {str(s.id): s for s in full.samples or []}
                page.goto(url + "#/logs/" + Path(log.location).name)
                page.locator(CELLS).first.wait_for(timeout=30_000)
                page.screenshot(path=str(tmp_path / f"{full.eval.task.split('/')[-1]}.png"))
                columns = list(dict.fromkeys(_columns(page)))
                assert columns[:4] == ["sampleId", "input", "target", "answer"], columns
                rows = _rows(page)
                assert len(rows) == len(samples)
                for row in rows:
                    s = samples[row["sampleId"]]
                    assert isinstance(s.input, str)  # the item itself, not the prompt
                    shown = " ".join(row["input"].split())
                    # the viewer cuts a long input with "..."
                    start = shown.removesuffix("...").removesuffix("…").strip()
                    assert " ".join(s.input.split()).startswith(start), (start, s.input)
                    assert not shown.startswith(BOILERPLATE), shown
                    assert row["target"] == str(s.target)
                    score = next(iter(s.scores.values()))
                    assert row["answer"] == str(score.answer)
                spec_sort = {"oncology_rct": ("trial",)}.get(full.eval.task.split("/")[-1], ())
                first = next(iter(s.scores))
                expected = sorted(samples, key=lambda sid: (
                    *(samples[sid].scores[first].value[k] for k in spec_sort), sid))
                assert [r["sampleId"] for r in rows] == expected
    finally:
        proc.terminate()
        proc.wait(timeout=10)
