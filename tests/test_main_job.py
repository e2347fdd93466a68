"""``med-evals compare``: a model run here and recorded replies, beside the published table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from inspect_ai.log import read_eval_log

from med_evals.commands.cli import main
from med_evals.commands.compare import format_table, run_compare
from med_evals.data.datasets import git_blob_sha1_of, sha256_of
from med_evals.outputs.exit_codes import CommandError

from .conftest import REPO
from .oncology_support import FIXTURE_CSV, install_fixture
from .support import free_port
from .support.fake_openai import FakeOpenAIServer

SHARED_REFERENCE = REPO.parent / "shared" / "reference"
HEADLINE = ("valid_rate", "accuracy_valid", "macro_f1_valid")


def _recorded_fixture(tmp_path: Path, monkeypatch) -> Path:
    """The fixture trials, and a recorded table in the study group's wide layout for them
    (laid out as dataset oncology-rct-250 behind a pinned manifest)."""
    data = install_fixture(tmp_path, monkeypatch)
    trials = pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False)
    wide = trials[["doi", "Annotation_accept"]].copy()
    # m1: right on every trial; m2: NEGATIVE everywhere, one reply not a label
    wide["m1_title_abstract_response_raw"] = wide["Annotation_accept"]
    wide["m2_title_abstract_response_raw"] = ["NEGATIVE"] * (len(wide) - 1) + ["NEGATIVE."]
    wide["m1_conclusion_response_raw"] = "POSITIVE"
    wide["m2_conclusion_response_raw"] = "POSITIVE"
    folder = data / "oncology-rct-250"
    folder.mkdir()
    table = folder / "trials_with_predictions.csv"
    wide.iloc[::-1].to_csv(table, index=False)  # matched to trials by DOI, not row order
    manifest = {
        "name": "oncology-rct-250",
        "local_dir": "oncology-rct-250",
        "revision": "fixture",
        "source": {"repository": "tests"},
        "license": "test fixture",
        "files": {
            table.name: {"sha256": sha256_of(table), "git_blob_sha1": git_blob_sha1_of(table)}
        },
    }
    (tmp_path / "manifests" / "oncology-rct-250.yaml").write_text(yaml.safe_dump(manifest))
    return data


def _logged_headline(path: str) -> dict[str, float]:
    log = read_eval_log(path, header_only=True)
    assert log.results is not None
    return {
        name: metric.value
        for score in log.results.scores
        for name, metric in score.metrics.items()
        if name in HEADLINE
    }


@pytest.mark.slow
def test_recorded_replies_beside_each_other_with_the_logged_numbers(tmp_path, monkeypatch):
    _recorded_fixture(tmp_path, monkeypatch)
    empty = tmp_path / "no-reference"
    empty.mkdir()
    c = run_compare(
        model="none",
        recorded=["m1", "m2"],
        subset=None,
        log_dir=tmp_path / "logs",
        reference=str(empty),
    )
    assert [r.label for r in c.runs] == ["m1 (replayed)", "m2 (replayed)"]  # no known model name
    m1, m2 = c.runs
    assert m1.n == m2.n == 6
    # the numbers are the study's headline, as the logs hold them
    assert m1.values == {"valid_rate": 1.0, "accuracy_valid": 1.0, "macro_f1_valid": 1.0}
    assert m2.values["valid_rate"] == pytest.approx(5 / 6)
    for r in c.runs:
        assert r.values == _logged_headline(r.log)
    # each replayed run is named for its recorded model (inspect view's list shows the name),
    # its replay file in the model args; the rows are labelled as the report labels the runs
    from med_evals.logs.labels import model_name
    from med_evals.logs.runs import load_run
    from med_evals.logs.usage import REPLAYED

    logs = [read_eval_log(r.log, header_only=True) for r in c.runs]
    assert [lg.eval.model for lg in logs] == ["replay/m1", "replay/m2"]
    assert [lg.eval.model_args for lg in logs] == [
        {"file": str(tmp_path / "logs" / "replays" / f"{m}.jsonl")} for m in ("m1", "m2")]
    assert [r.label for r in c.runs] == [model_name(load_run(r.log)) for r in c.runs]
    # tokens: none recorded in these replay files; cost: the recording's, not ours
    for r in c.runs:
        assert [role.usage for role in r.usage.roles] == [None]
        assert r.usage.total.source == r.usage.per_answer.source == REPLAYED
    # the replay files were derived at run time in the run's folder
    assert sorted(p.name for p in (tmp_path / "logs" / "replays").iterdir()) == [
        "m1.jsonl",
        "m2.jsonl",
    ]
    assert c.report is not None and c.report.is_file()
    assert c.published == [] and "not shown beside ours" in c.published_note
    text = format_table(c)
    assert "m2 (replayed)" in text and "0.833" in text
    assert "published rows not shown" in text
    usage = text[text.index("Tokens and cost"):].splitlines()
    assert [line.split()[:2] for line in usage if line.startswith("m")] == [
        ["m1", "(replayed)"], ["m2", "(replayed)"]]
    assert all(line.split()[-4:] == ["none", "(replayed)", "none", "(replayed)"]
               for line in usage if line.startswith("m"))
    assert f"inspect view --log-dir {tmp_path / 'logs'}" in text


@pytest.mark.skipif(
    not (SHARED_REFERENCE / "oncology-table1-published.csv").is_file(),
    reason="the published Table 1 is not beside the checkout",
)
def test_published_rows_of_the_condition_printed_as_published(tmp_path, monkeypatch):
    _recorded_fixture(tmp_path, monkeypatch)
    c = run_compare(
        model="none",
        recorded=["m1"],
        subset=None,
        log_dir=tmp_path / "logs",
        reference=str(SHARED_REFERENCE),
    )
    assert [p["Model"] for p in c.published] == ["GPT-5.2", "Gemini 3 Flash", "Claude Opus 4.5"]
    assert {p["Condition"] for p in c.published} == {"Baseline"}
    text = format_table(c)
    assert "GPT-5.2 (published)" in text and "0.96 (0.94-0.99)" in text
    assert "other models (GPT-5.2, Gemini 3 Flash, Claude Opus 4.5)" in " ".join(text.split())


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--recorded", "m3"], "--recorded m3: not in trials_with_predictions.csv"),
        (["--condition", "doi_only"], "--condition doi_only: m1 has no recorded replies"),
        # an unknown condition was blamed on the recording ("m1 has no recorded replies for it")
        (
            ["--condition", "title-abstract"],
            "--condition title-abstract: unknown condition; did you mean title_abstract? "
            "(conditions: title_abstract, ",
        ),
        # exited 1 (a failed run's code) through the exception hook
        (["--model", "foo/bar"], "--model foo/bar: unknown model provider 'foo' (providers: "),
        (["--recorded", "none"], "nothing to compare"),
        (["-M", "choices"], "-M 'choices': expected NAME=VALUE"),
        (["--model", "embedded/no-such-model"], "--model embedded/no-such-model: embedded/"),
        # a traceback (Inspect's ValueError from the provider)
        (["--model", "openai-api/x"], "--model openai-api/x: openai-api model names must include "
         "a service prefix (e.g. 'openai-api/service/model')"),
        (["--timeout", "0"], "--timeout 0: must be at least 1 (seconds)"),
        (["--max-retries", "-1"], "--max-retries -1: must be at least 0"),
    ],
)
def test_bad_requests_are_one_line(tmp_path, monkeypatch, capsys, argv, says):
    _recorded_fixture(tmp_path, monkeypatch)
    base = ["compare", "--model", "none", "--recorded", "m1", "--subset", "all"]
    base += ["--log-dir", str(tmp_path / "logs")]
    if argv[0] == "-M":
        base[2] = "embedded/smollm2-135m"
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("med-evals compare: error: ") and says in err[-1]


def test_a_missing_api_key_is_one_plain_line(tmp_path, monkeypatch, capsys):
    """Inspect's message is rich markup in lines: it was printed with `[bold][blue]` and `\\n`."""
    _recorded_fixture(tmp_path, monkeypatch)
    monkeypatch.delenv("LOCAL_API_KEY", raising=False)
    argv = ["compare", "--model", "openai-api/local/x", "--recorded", "m1", "--subset", "all",
            "--log-dir", str(tmp_path / "logs")]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "med-evals compare: error: --model openai-api/local/x: ERROR: Unable to initialise local "
        "client No LOCAL_API_KEY defined in the environment."
    )


def test_a_log_dir_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    _recorded_fixture(tmp_path, monkeypatch)
    readme = tmp_path / "README.md"
    readme.write_text("not a folder\n")
    argv = ["compare", "--model", "none", "--recorded", "m1", "--subset", "all"]
    assert main([*argv, "--log-dir", str(readme)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"med-evals compare: error: --log-dir {readme}: is a file, not a folder"
    )
    assert readme.read_text() == "not a folder\n"


def _served(tmp_path, monkeypatch, base_url: str, *extra: str) -> list[str]:
    """``med-evals compare`` of an OpenAI-compatible model at ``base_url`` on the fixture's six
    trials, with no recorded replies."""
    _recorded_fixture(tmp_path, monkeypatch)
    monkeypatch.setenv("LOCAL_API_KEY", "local-dummy")
    return ["compare", "--model", "openai-api/local/x", "-M", f"base_url={base_url}",
            "--recorded", "none", "--subset", "all", "--log-dir", str(tmp_path / "logs"), *extra]


def test_an_unreachable_model_is_one_line_within_seconds(tmp_path, monkeypatch, capsys):
    """It printed one line, then nothing until killed: Inspect retries a refused connection
    without end, its waits growing to 30 minutes; the log stayed `started`."""
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    argv = _served(tmp_path, monkeypatch, url)
    start = time.monotonic()
    assert main(argv) == 1
    assert time.monotonic() - start < 10
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"med-evals compare: error: --model openai-api/local/x: cannot reach {url} (connection "
        "refused); nothing was run"
    )
    assert not list((tmp_path / "logs").glob("*.eval"))


@pytest.mark.slow
def test_a_server_that_never_answers_ends_within_the_timeout(tmp_path, monkeypatch, capsys):
    """A server that takes each request and never answers (its `HEAD` answers: the probe before
    the run passes): each request gives up after --timeout, and the run says so, naming its
    log, instead of printing a table of six ERROR replies."""
    with FakeOpenAIServer(hang_rate=1.0, hang_seconds=60) as server:
        argv = _served(tmp_path, monkeypatch, server.base_url, "--timeout", "2")
        start = time.monotonic()
        assert main(argv) == 1
        took = time.monotonic() - start
        assert server.counts["hung"] == 6  # one attempt each: the timeout includes retries
    assert took < 20, took
    out, err = capsys.readouterr()
    assert out == ""
    (log,) = (tmp_path / "logs").glob("*.eval")
    assert err.splitlines()[1:] == [
        f"med-evals compare: waiting for openai-api/local/x ({server.base_url}): each request "
        f"gives up after 2 s, at most 2 retries (--timeout, --max-retries); logs in "
        f"{tmp_path / 'logs'}",
        "med-evals compare: error: openai-api/local/x: no reply: all 6 requests failed after "
        "Inspect's retries (AttemptTimeoutError: attempt_timeout '2' exceeded.); nothing "
        f"compared (log {log})",
    ]
    logged = read_eval_log(str(log))
    assert logged.eval.model_generate_config.timeout == 2
    assert logged.eval.model_generate_config.attempt_timeout == 2
    assert logged.eval.model_generate_config.max_retries == 2


@pytest.mark.slow
def test_failed_requests_are_named_beside_the_table(tmp_path, monkeypatch, capsys):
    """A request that still fails after the retries is scored ERROR, as the study scored a
    failed call: the table's valid rate counts it, and a line says so."""
    failing = "Adjuvant Drug A Versus Placebo"  # one of the six trials
    with FakeOpenAIServer(fail=lambda text: 500 if failing in text else None) as server:
        argv = _served(tmp_path, monkeypatch, server.base_url, "--max-retries", "0")
        assert main(argv) == 0
    out = capsys.readouterr().out
    (log,) = (tmp_path / "logs").glob("*.eval")
    (line,) = [line for line in out.splitlines() if "failed after" in line]
    assert line == (
        "openai-api/local/x: 1 of 6 requests failed after Inspect's retries, scored ERROR as the "
        "study scored a failed call (InternalServerError: Error code: 500 - injected 500); log "
        f"{log}"
    )
    row = next(r for r in out.splitlines() if r.startswith("openai-api/local/x, base_url="))
    assert row.split()[-5:-1] == ["6", "1.000", "1.000", "0.833"]  # then: beats trivial


@pytest.mark.slow
@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["", "sigint-ignored"])
def test_a_killed_run_closes_its_log_and_names_it(tmp_path, monkeypatch, sigint):
    """`timeout 300 med-evals compare ...` killed it with SIGTERM: Python's default ended the
    process at once and the log stayed `started`. Now Inspect cancels the run, as on Ctrl-C,
    and one line names the log, exit 1 (it printed an empty table and exited 0 on Ctrl-C).
    Also when the command started with SIGINT ignored (`med-evals compare ... &` in a script;
    a test worker that inherited it): the SIGINT that cancels was dropped and it ran on."""
    with FakeOpenAIServer(hang_rate=1.0, hang_seconds=60) as server:
        argv = _served(tmp_path, monkeypatch, server.base_url)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "med_evals.commands.cli", *argv], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
        )
        deadline = time.monotonic() + 60
        while server.counts["hung"] < 6 and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    (log,) = (tmp_path / "logs").glob("*.eval")
    assert err.splitlines()[-1] == (
        "med-evals compare: error: interrupted: the runs were cancelled and nothing was "
        f"compared; their logs (status cancelled): {log}"
    )
    assert read_eval_log(str(log), header_only=True).status == "cancelled"
    assert out == ""


@pytest.mark.slow
def test_the_main_job_on_the_fixture_trials(tmp_path, monkeypatch, capsys):
    """The README's command on the fixture: the embedded model with its reply restricted to the
    study's two labels, beside recorded replies; every printed number is the log's."""
    pytest.importorskip("transformers")
    from med_evals.inspect_internals.compat import PrerequisiteError
    from med_evals.models.embedded import resolve_gguf

    try:
        resolve_gguf("smollm2-135m")
    except PrerequisiteError as ex:
        pytest.skip(str(ex.message))
    _recorded_fixture(tmp_path, monkeypatch)
    logs = tmp_path / "logs"
    code = main(["compare", "--recorded", "m1", "--subset", "all", "--log-dir", str(logs)])
    assert code == 0
    out = capsys.readouterr().out
    assert "embedded/smollm2-135m, choices=POSITIVE,NEGATIVE" in out
    assert "our decoding option, not the study's" in " ".join(out.split())
    # the trivial rows beside them (the README's table): 3 positive and 3 negative trials, the
    # tie to POSITIVE; F1 2*3/9 for it, 0 for NEGATIVE; accuracy 3/6
    lines = out.splitlines()
    assert lines[2].split()[-2:] == ["beats", "trivial"]
    trivial = {line[:line.index("   ")]: line.split()[-4:] for line in lines
               if line.startswith("trivial: ")}
    assert trivial["trivial: majority class (POSITIVE)"] == ["6", "0.333", "0.500", "1.000"]
    assert trivial["trivial: always NEGATIVE"] == ["6", "0.333", "0.500", "1.000"]
    paths = sorted(str(p) for p in logs.glob("*.eval"))
    assert len(paths) == 2
    for path in paths:
        log = read_eval_log(path)
        assert log.status == "success"
        logged = _logged_headline(path)
        for name in HEADLINE:  # the console shows the logged value, to its 3 decimals
            assert f"{logged[name]:.3f}" in out
        if log.eval.model.startswith("embedded/"):
            assert log.eval.model_args["choices"] == "POSITIVE,NEGATIVE"
            assert logged["valid_rate"] == 1.0  # by construction
            for s in log.samples:
                lps = s.output.metadata["choice_logprobs"]
                assert set(lps) == {"POSITIVE", "NEGATIVE"}
                assert s.output.completion == max(lps, key=lps.get)
                (call,) = [e.call for e in s.events if e.event == "model"]
                assert call.request["choices"] == ["POSITIVE", "NEGATIVE"]
                decoding = call.request["decoding"]  # long strings are stored once
                decoding = s.attachments.get(decoding.removeprefix("attachment://"), decoding)
                assert "ours, not a study's setting" in decoding
    assert (logs / "report" / "report.html").is_file()
    assert json.loads((logs / "replays" / "m1.jsonl").read_text().splitlines()[0])["model"] == "m1"


def test_the_viewer_line_names_the_log_folder_absolutely(tmp_path, monkeypatch):
    """Inspect's viewer answers 403 for a --log-dir with `..` in it: the line printed must work
    as printed, from any folder."""
    from med_evals.commands.compare import Comparison

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    c = Comparison("title_abstract", "compare", [], [], "", Path("runs/../logs"), None)
    assert format_table(c).splitlines()[-1] == f"logs:   inspect view --log-dir {tmp_path / 'logs'}"


def test_run_labels_name_the_model_args_given():
    from med_evals.commands.compare import model_label

    assert model_label("embedded/smollm2-135m", {"choices": "POSITIVE,NEGATIVE"}) == (
        "embedded/smollm2-135m, choices=POSITIVE,NEGATIVE"
    )
    # -M choices= is the model's own default (free replies): nothing to name
    assert model_label("embedded/smollm2-135m", {"choices": ""}) == "embedded/smollm2-135m"


def test_model_args_are_read_as_inspect_reads_them():
    """``-M max_retries=0`` is the number 0, as ``inspect eval -M`` reads it (it was the text
    "0", and the OpenAI client's traceback); an empty value stays empty (free replies)."""
    from med_evals.commands.compare import _model_args

    assert _model_args(["max_retries=0", "choices=", "choices_b=POSITIVE,NEGATIVE",
                        "flag=true"], "openai-api/x/y") == {
        "max_retries": 0, "choices": "", "choices_b": "POSITIVE,NEGATIVE", "flag": True}
    with pytest.raises(CommandError, match=r"-M 'x=\[1': the value is not valid YAML"):
        _model_args(["x=[1"], "openai-api/x/y")


def test_trivial_rows_the_flag_and_the_ranks_in_the_table():
    """Three runs on 12 trials (6 positive, 6 negative; A right on all, B wrong on the last, C
    right on the first 4 only): the trivial rows, whether each run beats the best of them, and
    the ranks (A and B both separable from C, not from each other: Holm over three exact
    McNemar tests, test_standing.py)."""
    from med_evals.commands.compare import Comparison, RunRow, stand
    from med_evals.tasks import ONCOLOGY_RCT

    gold = "PNPNNP" * 2
    word = {"P": "POSITIVE", "N": "NEGATIVE"}
    flip = {"P": "N", "N": "P"}

    def row(label: str, wrong: set[int]) -> RunRow:
        samples = {}
        for i, g in enumerate(gold):
            p = flip[g] if i in wrong else g
            samples[f"title_abstract-{i:03d}"] = {
                "prediction": word[p], "target": word[g], "valid": True, "correct": int(p == g),
                "condition": "title_abstract", "trial": i, "lenient": word[p]}
        numbers = ONCOLOGY_RCT.headline_values(list(samples.values()))
        return RunRow(label, "made up", 12, numbers, "x.eval", 1.0, None, samples)

    c = stand(Comparison("title_abstract", "compare", [
        row("model-a", set()), row("model-b", {11}), row("model-c", set(range(4, 12)))],
        [], "", Path("logs"), None), n_boot=20)
    lines = format_table(c).splitlines()
    f1_b = (10 / 11 + 12 / 13) / 2
    random = c.trivial[0].rows[-1].numbers
    width = len("trivial: uniform random (mean of 20 draws)")  # the longest name

    def line(name: str, cells: list[str], beats: str = "") -> str:
        out = f"{name:<{width}}  {12:>4}  " + "  ".join(f"{x:>17}" for x in cells)
        return out + (f"  {beats:>13}" if beats else "")

    header = f"{'run':<{width}}  {'n':>4}  " + "  ".join(
        f"{x:>17}" for x in ("Macro-F1", "Accuracy", "Valid rate")) + "  beats trivial"
    assert lines[2:11] == [
        header,
        "-" * len(header),
        line("model-a", ["1.000", "1.000", "1.000"], "yes"),
        line("model-b", [f"{f1_b:.3f}", "0.917", "1.000"], "yes"),
        line("model-c", ["0.333", "0.333", "1.000"], "no"),
        # 6 positive and 6 negative: the tie goes to POSITIVE; F1 2*6/18 for it, 0 for the other
        line("trivial: majority class (POSITIVE)", ["0.333", "0.500", "1.000"]),
        line("trivial: always POSITIVE", ["0.333", "0.500", "1.000"]),
        line("trivial: always NEGATIVE", ["0.333", "0.500", "1.000"]),
        line("trivial: uniform random (mean of 20 draws)",
             [f"{random['macro_f1_valid']:.3f}", f"{random['accuracy_valid']:.3f}", "1.000"]),
    ]
    text = "\n".join(lines)
    b = c.standing["model-c"]
    assert (f"- model-c: NOT better than majority class (POSITIVE) beyond sampling noise: "
            f"macro-F1 0.333 against 0.333, difference +0.000 (95% CI {b['lo']:+.3f} to "
            f"{b['hi']:+.3f}).") in " ".join(text.split())  # the note, wrapped
    i = lines.index("rank  possible  run      cannot be told apart from")
    assert lines[i - 3:i] == [
        "Which runs can be told apart on these 12 trials: McNemar's exact test on correctness "
        "for every pair,",
        "Holm-corrected together (α = 0.05); ranked by macro-F1 (docs/numbers.md):",
        "",
    ]
    assert lines[i + 1:i + 5] == [
        "-" * 50,
        "   1  1-2       model-a  model-b",
        "   2  1-2       model-b  model-a",
        "   3  3         model-c  none",
    ]
