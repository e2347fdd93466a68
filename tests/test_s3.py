"""Logs on S3: every command that reads logs reads ``s3://bucket/logs`` as a local folder.

Against a real S3-protocol server on loopback (moto's server mode, ``tests/support/s3.py``),
reached as AWS would be (``AWS_ENDPOINT_URL`` and the usual keys): one Inspect eval of two models
of the oncology task on the fixture trials, logged to ``s3://<bucket>/logs``, is read by
``med-evals report``, ``baseline``, ``regress``, ``flip-rate``, ``export-counterfactuals`` and
``compare``'s reading side, which give what they give over a local copy of the same objects.
Outputs to S3 are refused in one line; a missing bucket, a wrong secret key and an unreachable
endpoint are one line each, exit 2, no traceback. Then docs/scale.md's recipe: ``eval-set`` of
two studies x two models split over two workers into one store, a run killed (its log left
``started`` with half its samples), ``eval-set`` again completing only what was missing, one
report and one gate over the store.
"""

from __future__ import annotations

import contextvars
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from inspect_ai.log import EvalLog, read_eval_log, write_eval_log
from inspect_ai.model import get_model

from med_evals.commands.cli import main as cli_main
from med_evals.commands.regress import decide, read_baseline, regress, resume_command
from med_evals.data.published import reference_dir
from med_evals.logs.files import LogPathError, list_log_files, log_folder, log_name

from .conftest import replying
from .medevidence_support import install_medevidence
from .oncology_support import follower as _follower
from .oncology_support import install_fixture
from .support import free_port
from .support.evals import eval_set, inspect_eval
from .support.s3 import S3, fresh_clients, s3_server

BUCKET = "med-evals-logs"
CONDITIONS = "title_abstract,counterfactual"
NB = ["--n-boot", "100"]


@dataclass
class Runs:
    uri: str  # s3://<bucket>/logs
    local: Path  # a local copy of its objects
    logs: list[EvalLog]
    baseline: Path  # a baseline recorded from the local copy
    tmp: Path


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


@dataclass
class Place:
    """The bucket, a local folder and a baseline file: what the quick tests need (no run)."""

    uri: str  # s3://<bucket>/logs
    tmp: Path
    baseline: Path  # a well-formed baseline (the error tests never get as far as using it)


@pytest.fixture(scope="module")
def place(s3: S3, tmp_path_factory) -> Place:
    tmp = tmp_path_factory.mktemp("s3")
    uri = s3.make_bucket(BUCKET) + "/logs"
    baseline = tmp / "any-baseline.json"
    baseline.write_text(json.dumps({"format": 2, "runs": [
        {"task": "oncology_rct", "model": "m", "setup": {}, "samples": {}}]}))
    return Place(uri, tmp, baseline)


@pytest.fixture(scope="module")
def runs(s3: S3, place: Place) -> Runs:
    """Two models of the oncology task (two conditions) on the fixture, logged to S3."""
    tmp, uri = place.tmp, place.uri
    with pytest.MonkeyPatch.context() as mp:
        install_fixture(tmp / "onc", mp)
        from med_evals.tasks.oncology_rct import oncology_rct

        models = [get_model("mockllm/follower", custom_outputs=replying(_follower)),
                  get_model("mockllm/optimist", custom_outputs=replying(lambda t: "POSITIVE"))]
        logs = contextvars.copy_context().run(
            inspect_eval, oncology_rct(condition=CONDITIONS), model=models, log_dir=uri,
            display="none", max_tasks=2,
        )  # fmt: skip
    assert [lg.status for lg in logs] == ["success", "success"]
    assert all(str(lg.location).startswith(uri + "/") for lg in logs)
    local = s3.download(uri, tmp / "local")
    baseline = tmp / "baseline.json"
    assert cli_main(["baseline", str(local), "-o", str(baseline)]) == 0
    return Runs(uri, local, logs, baseline, tmp)


def _err_lines(capsys) -> tuple[str, list[str]]:
    captured = capsys.readouterr()
    return captured.out, [line for line in captured.err.splitlines() if line.strip()]


@pytest.mark.slow
def test_inspect_lists_the_logs_on_s3_as_in_a_local_folder(runs):
    """The folder is expanded by Inspect's listing (not pathlib, which sees no folder at an
    s3:// URI), each log with its write time; a log named by its URI stays that URI."""
    on_s3 = list_log_files([runs.uri], strict=True)
    local = list_log_files([runs.local], strict=True)
    assert sorted(log_name(f.name) for f in on_s3) == sorted(log_name(f.name) for f in local)
    assert len(on_s3) == 2 and all(f.name.startswith(runs.uri + "/") for f in on_s3)
    assert all(f.mtime > 1e9 for f in on_s3 + local)  # seconds since the epoch, listed
    one = str(runs.logs[0].location)
    assert [f.name for f in list_log_files([one], strict=True)] == [one]
    assert log_folder(one) == runs.uri
    # the resume hint of the gate names the run's own folder on S3
    assert resume_command(one) == f"inspect eval-retry --log-dir {runs.uri} {one}"


def _unlocated(md: str) -> str:
    """A report without what says where its logs are: the viewer links of "where two runs
    differ" (a local log's, none for S3), the sentence saying how to open them, and the name
    of the folder of table exports (a hash of the tables, those links included)."""
    md = re.sub(r"\[open\]\([^)]*\)", "—", md)
    md = re.sub(r"\]\(tables/[0-9a-f]{12}/", "](tables/", md)
    return re.sub(r"The links open a sample[^\n]*?\)\.|No log is local: no viewer links\.",
                  "", md)


@pytest.mark.slow
def test_report_over_s3_is_the_report_over_a_local_copy(runs):
    from med_evals.commands.report import build_report

    # fewer resamples than the command's 200 (the paired bootstrap is most of a report's time)
    a = build_report([runs.uri], runs.tmp / "report-s3", n_boot=20)
    b = build_report([str(runs.local)], runs.tmp / "report-local", n_boot=20)
    assert a.skipped == b.skipped == []
    assert a.headline == b.headline and len(a.headline) == 4  # 2 runs x 2 conditions
    assert _unlocated(a.markdown.read_text()) == _unlocated(b.markdown.read_text())
    follower = {r.condition: r.values for r in a.headline if r.label == "mockllm/follower"}
    assert follower["title_abstract"]["accuracy_valid"] == 1.0
    assert follower["counterfactual"]["accuracy_valid"] == 1.0  # scored against the flip


@pytest.mark.slow
def test_report_command_reads_a_log_named_by_its_uri(runs, capsys):
    one = str(runs.logs[0].location)  # one run: no paired comparison to bootstrap
    out = runs.tmp / "report-one"
    assert cli_main(["report", one, "--out", str(out)]) == 0
    printed, err = _err_lines(capsys)
    assert printed.startswith(f"wrote {out / 'report.md'}")
    # the one note there may be: the published Table 1 is not beside this checkout (a clone
    # without ../shared/reference beside it; no download offline)
    if reference_dir(None) is None:
        assert len(err) == 1 and err[0].startswith("note: The oncology study's Table 1 is not")
    else:
        assert err == []
    md = (out / "report.md").read_text()
    assert "Table 1 (ours)" in md and log_name(one) in md  # provenance names the log


@pytest.mark.slow
def test_baseline_and_regress_over_s3_match_a_local_copy(runs, capsys):
    on_s3 = runs.tmp / "baseline-s3.json"
    assert cli_main(["baseline", runs.uri, "-o", str(on_s3)]) == 0
    capsys.readouterr()
    a, b = json.loads(on_s3.read_text()), json.loads(runs.baseline.read_text())
    assert a == b and len(a["runs"]) == 2
    # the gate's rows over S3 and over the local copy (fewer resamples than the command's
    # 1,000: the rows' equality is the point)
    base = read_baseline(str(runs.baseline))
    (rows_s3, notes_s3), (rows_local, notes_local) = (
        regress(base, [logs], n_boot=10) for logs in (runs.uri, str(runs.local)))
    assert rows_s3 == rows_local and len(rows_s3) == 12 and notes_s3 == notes_local == []
    assert decide(rows_s3).code == 0
    # the command, on one run's log named by its URI: the other baseline run has no new run
    # (undecided, unless accepted)
    one = str(runs.logs[0].location)
    assert cli_main(["regress", *NB, "--baseline", str(runs.baseline), one]) == 3
    out, _ = _err_lines(capsys)
    assert "baseline run no new run in the logs given was compared with it" in out
    assert cli_main(["regress", *NB, "--allow-absent", "--baseline", str(runs.baseline), one]) == 0
    out, err = _err_lines(capsys)
    assert "pass: 6 gated metric(s) tested, 0 regressions" in out
    assert "accepted (--allow-absent): 1 baseline run(s) without a new run: " in out
    assert err == []


@pytest.mark.slow
def test_flip_rate_over_s3_matches_a_local_copy(runs, capsys):
    tables = []
    for logs, name in ((runs.uri, "s3"), (str(runs.local), "local")):
        out = runs.tmp / f"flips-{name}.csv"
        assert cli_main(["flip-rate", logs, "--out", str(out)]) == 0
        capsys.readouterr()
        tables.append(sorted(out.read_text().splitlines()[1:]))  # rows in listing order
    assert tables[0] == tables[1] and len(tables[0]) == 2
    follower = next(r for r in tables[0] if r.startswith("mockllm/follower,"))
    assert follower.startswith("mockllm/follower,title_abstract vs counterfactual,1.0,")


@pytest.mark.slow
def test_export_counterfactuals_reads_s3(runs, s3, capsys):
    """Its reading side: oncology logs hold no accepted rewrite, named as such, as locally; a
    folder on S3 without logs is named too."""
    s3.put(f"s3://{BUCKET}/notes/readme.txt", b"no logs here")
    got = {}
    for logs in (runs.uri, str(runs.local)):
        code = cli_main(["export-counterfactuals", logs, f"s3://{BUCKET}/notes",
                         "--out", str(runs.tmp / "cf.csv")])
        _, err = _err_lines(capsys)
        assert code == 2
        got[logs] = err
    for err in got.values():
        assert sum("not a counterfactual_build log" in line for line in err) == 2
        assert f"skipped: s3://{BUCKET}/notes: a folder with no Inspect log in it" in err
        assert err[-1] == ("med-evals export-counterfactuals: error: no accepted rewrite in the "
                           "logs (3 skipped, listed above); nothing written")
    named = [line for line in got[runs.uri] if "not a counterfactual_build log" in line]
    assert all(line.startswith(f"skipped: {runs.uri}/") for line in named)
    assert not (runs.tmp / "cf.csv").exists()


@pytest.mark.slow
def test_compare_reads_its_runs_back_from_s3_and_logs_locally(runs, capsys):
    """``compare`` writes its logs, replay files and report to a local folder (refused for an
    s3:// --log-dir, in one line); what it reads back, each run from ``log.location``, is read
    from S3 as from a local log."""
    from med_evals.commands.compare import _row

    labels = {lg.eval.model: lg.eval.model for lg in runs.logs}
    sources = dict.fromkeys(labels, "here")
    for lg in runs.logs:
        remote = read_eval_log(str(lg.location))
        local = read_eval_log(str(runs.local / log_name(str(lg.location))))
        a, b = (_row(x, labels, sources, "title_abstract") for x in (remote, local))
        assert (a.label, a.n, a.values) == (b.label, b.n, b.values) and a.n == 6
        assert a.log == str(lg.location)
    code = cli_main(["compare", "--model", "none", "--log-dir", f"s3://{BUCKET}/compare"])
    out, err = _err_lines(capsys)
    assert code == 2 and out == "" and len(err) == 1
    assert err[0].startswith(f"med-evals compare: error: --log-dir s3://{BUCKET}/compare: "
                             "med-evals compare writes its logs, replay files and report to a "
                             "local folder")


def test_outputs_to_s3_are_refused_in_one_line(place, s3, capsys):
    before = s3.keys(f"s3://{BUCKET}/")
    target = f"s3://{BUCKET}/out"
    cases = {
        "report": ["report", place.uri, "--out", target],
        "baseline": ["baseline", place.uri, "-o", f"{target}/baseline.json"],
        "flip-rate": ["flip-rate", place.uri, "--out", f"{target}/flips.csv"],
        "export-counterfactuals": ["export-counterfactuals", place.uri, "--out",
                                   f"{target}/cf.csv"],
    }
    for command, argv in cases.items():
        code = cli_main(argv)
        out, err = _err_lines(capsys)
        flag, path = argv[-2:]
        assert code == 2 and out == "" and err == [
            f"med-evals {command}: error: {flag} {path}: med-evals writes reports and "
            "baselines to a local folder; copy them to S3 after"
        ], (command, err)
    code = cli_main(["regress", "--baseline", f"{target}/baseline.json", place.uri])
    _, err = _err_lines(capsys)
    assert code == 2 and err == [f"med-evals regress: error: baseline {target}/baseline.json: "
                                 "med-evals reads a baseline from a local file; copy it here "
                                 "first"]
    assert s3.keys(f"s3://{BUCKET}/") == before  # nothing written there


def _each_command(place: Place, logs: str) -> dict[str, list[str]]:
    out = place.tmp / "cmd-out"
    return {
        "report": ["report", logs, "--out", str(out / "report")],
        "baseline": ["baseline", logs, "-o", str(out / "b.json")],
        "regress": ["regress", *NB, "--baseline", str(place.baseline), logs],
        "flip-rate": ["flip-rate", logs],
        "export-counterfactuals": ["export-counterfactuals", logs, "--out", str(out / "cf.csv")],
    }


#: a command's wall-clock bound in the error tests: a guard against waiting on a timeout
#: (botocore's connect and read timeouts are 60 s), not a speed test (a loaded machine takes
#: seconds to import the report's modules); that a refused request is not retried is counted
#: at the server instead (``refused``)
HANG_S = 30.0


def _one_line_each(place: Place, logs: str, capsys, why: str, refused: S3 | None = None) -> None:
    """Every command over ``logs``: exit 2, its last stderr line the error naming ``logs`` and
    ``why``, no traceback, within :data:`HANG_S`; with ``refused`` (the server), each command
    sent it one request, refused (403), and no other: nothing retried."""
    (place.tmp / "cmd-out").mkdir(exist_ok=True)
    for command, argv in _each_command(place, logs).items():
        if refused is not None:
            refused.requests.clear()
        started = time.monotonic()
        code = cli_main(argv)
        elapsed = time.monotonic() - started
        out, err = _err_lines(capsys)
        assert code == 2, (command, out, err)
        assert not any("Traceback" in line for line in err)
        assert err[-1].startswith(f"med-evals {command}: error: "), err
        assert elapsed < HANG_S, (command, elapsed)
        if refused is not None:
            assert [status for _, status in refused.requests] == [403], (command, refused.requests)
        if len(err) == 1:
            assert logs in err[0] and why in err[0], (command, err)
        else:  # the export names each path it skipped, then says it wrote nothing
            assert command == "export-counterfactuals", (command, err)
            assert err[:-1] == [f"skipped: {logs}: unreadable log ({why})"], err
    assert not (place.tmp / "cmd-out" / "b.json").exists()


def test_a_missing_bucket_is_one_line(place, capsys):
    logs = "s3://no-such-bucket-here/logs"
    _one_line_each(place, logs, capsys, "no such file")
    # the strict readers (baseline, regress, flip-rate) name the bucket
    for command in ("baseline", "regress", "flip-rate"):
        cli_main(_each_command(place, logs)[command])
        _, err = _err_lines(capsys)
        assert err == [f"med-evals {command}: error: {logs}: no such file or folder "
                       "(no bucket 'no-such-bucket-here')"]


@pytest.mark.slow
def test_a_wrong_secret_key_is_one_line(place, s3, monkeypatch, capsys):
    """moto's server mode checks no key and no signature by default (any secret works); with
    auth required (``INITIAL_NO_AUTH_ACTION_COUNT`` 0, through ``/moto-api/reset-auth``) it
    checks the access key against its IAM, the SigV4 signature and the IAM policy. The right
    secret then reads the logs; a wrong one, or an unknown key id, is one line, from one request
    refused (403) and not retried."""
    key_id, secret = s3.iam_user()
    wrong = _wrong(secret)
    assert wrong != secret
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    with s3.require_auth():
        for kid, sec, why in ((key_id, secret, None),
                              (key_id, wrong, "signature we calculated does not match"),
                              ("AKIAEXAMPLEEXAMPLE00", secret, "Access Key Id you provided "
                               "does not exist")):
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", kid)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", sec)
            fresh_clients()
            if why is None:  # the control: auth is on, and the right secret passes it
                list_log_files([place.uri])  # listed, no error
                assert s3.keys(place.uri + "/") is not None  # boto3, signed the same way
                continue
            s3.requests.clear()
            with pytest.raises(LogPathError, match=why):  # the listing itself is refused
                list_log_files([place.uri])
            assert [status for _, status in s3.requests] == [403], s3.requests
            _one_line_each(place, place.uri, capsys, why, refused=s3)
    fresh_clients()


def _wrong(secret: str) -> str:
    """A secret that is not ``secret``: its last character changed. (``secret[:-1] + "x"`` was
    the right secret whenever moto's random secret ended in "x", one run in 64: then the
    listing passed and the test failed with "DID NOT RAISE".)"""
    return secret[:-1] + ("y" if secret.endswith("x") else "x")


def test_an_unreachable_endpoint_is_one_line_and_fast(place, monkeypatch, capsys):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    fresh_clients()
    try:
        _one_line_each(place, place.uri, capsys,
                       f"Could not connect to the endpoint URL: \"{closed}")
    finally:
        fresh_clients()


# --- docs/scale.md: eval-set into one store, split over workers, killed, resumed, gated ------


def _recording(path: Path, tasks, reply) -> Path:  # noqa: ANN001 - Inspect tasks
    """A replay file answering every sample of ``tasks`` with ``reply(task, input text)``."""
    from .report.support import prompt_text

    with path.open("w", encoding="utf-8") as f:
        for task in tasks:
            for sample in task.dataset:
                f.write(json.dumps({"task": task.name, "id": sample.id,
                                    "reply": reply(task.name, prompt_text(sample))}) + "\n")
    return path


@pytest.mark.slow
def test_the_scale_recipe_on_s3(s3, tmp_path, monkeypatch, capsys):
    """Two workers share one store: one runs the oncology study, one MedEvidence, each for two
    models (``eval-set``, in process). One run is killed: its log is left ``started`` with half
    its samples, as a kill leaves it. ``eval-set`` again runs only that run's missing samples,
    reusing the others and every finished log; then one report and one gate over the store."""
    from med_evals.tasks.medevidence import medevidence
    from med_evals.tasks.oncology_rct import oncology_rct

    # both studies' fixtures in one data folder, behind one manifests folder
    data = install_fixture(tmp_path / "onc", monkeypatch)
    install_medevidence(tmp_path / "me", monkeypatch)
    shutil.copytree(tmp_path / "me" / "data" / "medevidence", data / "medevidence")
    shutil.copy(tmp_path / "me" / "manifests" / "medevidence.yaml", tmp_path / "onc" / "manifests")
    monkeypatch.setenv("MED_EVALS_MANIFEST_DIR", str(tmp_path / "onc" / "manifests"))
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(data))
    store = s3.make_bucket("med-evals-team") + "/study-2026-12"

    def onc():
        return oncology_rct(condition="title_abstract")

    def me():
        return medevidence()

    tasks = [onc(), me()]
    a = _recording(tmp_path / "model-a.jsonl", tasks, lambda t, text: (
        _follower(text) if t.endswith("oncology_rct") else "**Answer**: lower"))
    b = _recording(tmp_path / "model-b.jsonl", tasks, lambda t, text: (
        "POSITIVE" if t.endswith("oncology_rct") else "**Answer**: higher"))
    models = [f"replay/{a}", f"replay/{b}"]
    workers = {"oncology": onc, "medevidence": me}

    def run(worker: str) -> tuple[bool, list[EvalLog]]:
        # each run reads the recordings afresh, as a new process would (get_model memoizes)
        fresh = [get_model(m, memoize=False) for m in models]
        return contextvars.copy_context().run(
            eval_set, [workers[worker]()], model=fresh, log_dir=f"{store}/{worker}",
            retry_attempts=0, display="none", max_tasks=2,
        )  # fmt: skip

    first = {}
    for worker in workers:
        ok, logs = run(worker)
        assert ok and len(logs) == 2
        if worker == "oncology":
            first = {lg.eval.model + lg.eval.task: str(lg.location) for lg in logs}
    # the kill: model b's oncology log as a killed run leaves it (status started, 3 of 6 done)
    killed = next(loc for key, loc in first.items() if key.startswith(models[1]))
    log = read_eval_log(killed)
    done = {s.id for s in log.samples[:3]}
    log.samples = log.samples[:3]
    log.status, log.results, log.reductions = "started", None, None
    write_eval_log(log, killed)
    # model b now answers otherwise: a sample it answers again shows the new reply
    _recording(b, tasks, lambda t, text: (
        "NEGATIVE" if t.endswith("oncology_rct") else "**Answer**: higher"))
    ok, logs = run("oncology")
    assert ok
    again = {lg.eval.model + lg.eval.task: str(lg.location) for lg in logs}
    key_a = next(k for k in again if k.startswith(models[0]))
    assert again[key_a] == first[key_a]  # the finished run was reused, not run again
    resumed = read_eval_log(next(v for k, v in again.items() if k.startswith(models[1])))
    assert resumed.status == "success" and len(resumed.samples) == 6
    answers = {s.id: s.output.completion for s in resumed.samples}
    assert {i for i, text in answers.items() if text == "POSITIVE"} == done  # kept
    assert {i for i, text in answers.items() if text == "NEGATIVE"} == set(answers) - done

    # one report and one gate over the whole store (both workers' folders)
    # (the report's function, with fewer resamples than the command's 200: the command itself
    # over S3 is test_report_command_reads_a_log_named_by_its_uri)
    from med_evals.commands.report import build_report

    report = build_report([store], tmp_path / "report", n_boot=20)
    # the killed log is named as left for the finished log of its eval (same task id)
    assert [line.split(": ")[0] for line in report.skipped] == [killed]
    assert "ignored (status started): the finished log of the same eval" in report.skipped[0]
    assert {(r.task, r.label) for r in report.headline} == {
        (t, f"{m} (replayed)") for t in ("oncology_rct", "medevidence")
        for m in ("model-a.jsonl", "model-b.jsonl")}
    baseline = tmp_path / "baseline.json"
    assert cli_main(["baseline", store, "-o", str(baseline)]) == 0
    capsys.readouterr()
    assert {(r["task"], r["model"]) for r in json.loads(baseline.read_text())["runs"]} == {
        (t, m) for t in ("oncology_rct", "medevidence") for m in models}
    # the gate over the store (its function, 20 resamples instead of the command's 1,000: the
    # bootstrap of four runs is most of the time; the command over S3 is run above, in
    # test_baseline_and_regress_over_s3_match_a_local_copy)
    rows, notes = regress(read_baseline(str(baseline)), [store], n_boot=20)
    assert {(r.task, r.model) for r in rows} == {
        (t, m) for t in ("oncology_rct", "medevidence") for m in models}
    assert [n.split(": ")[0] for n in notes] == [killed]  # named as ignored, as in the report
    assert decide(rows).code == 0 and len(rows) == 12  # 3 headline numbers x 4 runs
