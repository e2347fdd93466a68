"""Inspect's log viewer tells replayed runs apart: its list of logs shows each run's
``log.eval.model``, which ``med-evals compare``'s replay models name by the recorded model
(``replay/gpt4o_temp100``), not by the replay file's path; and a sample link of the report's
per-sample differences opens that sample in it (checked in headless Chromium)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request

import pytest
from inspect_ai.log import resolve_sample_attachments

from med_evals.commands.compare import replay_model
from med_evals.data.datasets import sha256_of
from med_evals.logs.pairs import VIEWER, viewer_url
from med_evals.logs.runs import load_run
from med_evals.tasks.oncology_rct import oncology_rct

from .oncology_support import install_fixture
from .support import INSPECT, free_port
from .support.browser import chromium_page, chromium_path
from .support.evals import inspect_eval

RECORDED = ("gpt4o_temp100", "o1_temp100")


def _serving(url: str, proc: subprocess.Popen, seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            said = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"inspect view exited: {said}")
        try:
            urllib.request.urlopen(url + "api/log-dir", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"inspect view did not answer at {url} in {seconds} s")


@pytest.mark.slow
def test_the_viewers_list_names_replayed_runs_by_their_recorded_model(tmp_path, monkeypatch):
    chromium_path()  # skips before the viewer starts when there is no browser
    install_fixture(tmp_path, monkeypatch)
    logs = tmp_path / "logs"
    logs.mkdir()
    # the viewer starts (about 3 s) while the runs run
    port = free_port()
    proc = subprocess.Popen(
        [INSPECT, "view", "--log-dir", str(logs), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        ids = [s.id for s in oncology_rct().dataset]
        replays = tmp_path / "logs-replays"  # as compare writes them, beside its logs
        replays.mkdir()
        paths = []
        for name, reply in zip(RECORDED, ("POSITIVE", "NEGATIVE"), strict=True):
            path = replays / f"{name}.jsonl"
            path.write_text("".join(json.dumps({"id": i, "reply": reply, "model": name}) + "\n"
                                    for i in ids))
            paths.append(path)
        runs = inspect_eval(oncology_rct(), model=[replay_model(p) for p in paths],
                            log_dir=str(logs), display="none", max_tasks=2)
        # the log names the run by the recorded model, and still records the file and its hash
        assert sorted(lg.eval.model for lg in runs) == [f"replay/{n}" for n in RECORDED]
        for lg in runs:
            path = replays / f"{lg.eval.model.removeprefix('replay/')}.jsonl"
            assert lg.eval.model_args == {"file": str(path)}
            # a long path is stored once as an attachment: resolved as the viewer does
            calls = [e.call.request for s in lg.samples
                     for e in resolve_sample_attachments(s, "full").events if e.event == "model"]
            assert {(c["replay"], c["sha256"]) for c in calls} == {(str(path), sha256_of(path))}

        url = f"http://127.0.0.1:{port}/"
        _serving(url, proc)
        with chromium_page(height=800) as page:
            page.goto(url)
            for name in RECORDED:  # each row's model cell
                page.get_by_text(f"replay/{name}", exact=True).first.wait_for(timeout=20_000)
            text = page.inner_text("body")
            # the link the report's per-sample differences give opens that sample
            run = load_run(runs[0].location)
            sid = sorted(run.values)[1]
            link = viewer_url(run, sid, 1, str(logs))
            assert link is not None and link.startswith(VIEWER)
            page.goto(link.replace(VIEWER, url.rstrip("/"), 1))
            reply = run.samples[sid]["reply"]
            page.get_by_text(reply, exact=True).first.wait_for(timeout=20_000)
            sample_page = page.inner_text("body")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "2 rows" in text
    # the sample itself: not the list of logs, nor the log's list of samples
    others = [i for i in run.values if i != sid]
    assert sid in sample_page and "2 rows" not in sample_page
    assert not [i for i in others if i in sample_page]
    for name in RECORDED:
        assert text.count(f"replay/{name}") == 1
        assert f"{name}.jsonl" not in text  # the file's path is not the name any more
