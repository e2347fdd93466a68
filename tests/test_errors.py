"""What a user sees from `inspect eval` for bad input: one short message, a non-zero exit.

Each kind of failure runs the real command in a subprocess (as a user would), outside the
checkout: a bad parameter, a bad data file, a missing dataset, a bad replay file (when the model
is created and when the task is built), a failed run (``inspect eval``), a misspelt parameter.
The other messages of a kind already run so are checked in process (:func:`in_process_error`:
the same ``-T`` parsing, task build and model, without a new interpreter's 5 s of imports), as
are ``inspect eval-set``'s verdict on a failed run and the ``--limit 0`` notice, which come from
Inspect's ``eval_set()`` and from the hook that runs after every eval. Mistakes that Inspect's
own option parsing meets (a ``-T`` value YAML rejects, ``--epochs 0``) run Inspect's command
line in process (:func:`inspect_cli_error`, through click's test runner).
"""

import contextvars
import json
import os
import subprocess
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log

from med_evals.inspect_internals.compat import InputError, parse_cli_config

from .oncology_support import FIXTURE_CSV
from .support import INSPECT
from .support.evals import eval_set, inspect_eval


def inspect_run(tmp: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``inspect <args>`` in ``tmp``."""
    return subprocess.run(
        [INSPECT, *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=180,
        # a wide console: each message is one line, whatever the terminal
        env={**os.environ, "COLUMNS": "300", **(env or {})},
    )


def inspect_cmd(tmp: Path, *args: str, env: dict | None = None) -> tuple[int, str]:
    """Run ``inspect <args>`` in ``tmp``; (exit code, stdout + stderr)."""
    proc = inspect_run(tmp, *args, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def stderr_line(tmp: Path, *args: str, display: str = "none") -> str:
    """The one line a run that must fail before it starts prints: exit 1, nothing on stdout,
    one line on stderr, whatever the display."""
    proc = inspect_run(tmp, *args, "--display", display)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert not proc.stdout.strip() and len(lines) == 1, proc.stdout + proc.stderr
    return lines[0]


def in_process_error(tmp: Path, task: str, *task_args: str, model: str = "mockllm/model") -> str:
    """The message ``inspect eval <task> -T <task_args> --model <model>`` stops with before any
    sample runs, found in process: ``-T`` values parsed by Inspect's own CLI parser, the run
    started by ``inspect_ai.eval``; returned as the command prints it (``med_evals: <message>``,
    one line: ``_compat.uncaught_message``). No log is written."""
    logs = tmp / "in-process-logs"
    with pytest.raises(InputError) as err:
        inspect_eval(
            task,
            task_args=parse_cli_config(task_args, None),
            model=model,
            display="none",
            log_dir=str(logs),
        )
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message, message
    assert not list_eval_logs(str(logs))
    return f"med_evals: {message}"


ONCOLOGY = "med_evals/oncology_rct"


def test_bad_parameters_print_one_line(tmp_path):
    trials = f"trials_file={FIXTURE_CSV}"
    cases = [
        (["-T", "data_dir=/nowhere/at/all"], "-T data_dir=/nowhere/at/all: does not exist"),
        (["-T", "condition="], "-T condition=: is empty; choose from title_abstract, title_only"),
        (["-T", "seed=abc", "-T", trials], "-T seed=abc: must be an integer"),
        (
            ["-T", "flip_pairs=title_abstract:nosuch", "-T", trials],
            "'title_abstract:nosuch' names an unknown condition 'nosuch'; choose from",
        ),
        (["-T", f"trials_file={tmp_path}"], f"-T trials_file={tmp_path}: is a directory"),
    ]
    # found in process: the command prints such a message as one line on stderr, exit 1
    # (test_the_message_reaches_stderr_once_whatever_the_display)
    for args, message in cases:
        assert message in in_process_error(tmp_path, ONCOLOGY, *args[1::2])
    assert "healthfc: -T evidence=maybe: must be true or false" in in_process_error(
        tmp_path, "med_evals/healthfc", "evidence=maybe"
    )


def test_a_header_only_file_is_named(tmp_path):
    header_only = tmp_path / "header.csv"
    header_only.write_text(FIXTURE_CSV.read_text().splitlines()[0] + "\n")
    msg = in_process_error(tmp_path, ONCOLOGY, f"trials_file={header_only}")
    assert msg == f"med_evals: {header_only}: no data rows (the file holds a header only)"


def test_missing_medreqal_names_every_way_to_provide_it(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    from_cli = in_process_error(tmp_path, "med_evals/medreqal", f"data_dir={tmp_path / 'data'}")
    monkeypatch.setenv("MED_EVALS_DATA_DIR", str(tmp_path / "data"))
    from_env = in_process_error(tmp_path, "med_evals/medreqal")
    for msg, source in [(from_cli, "from -T data_dir"), (from_env, "from MED_EVALS_DATA_DIR")]:
        assert "file 'MedREQAL.csv' is not in the data directory" in msg and source in msg
        for way in ("MED_EVALS_DATA_DIR=<dir>", "-T data_dir=<dir>", "-T data_file=<file>"):
            assert way in msg


def test_unreadable_replay_recording(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "reply": "POSITIVE"}\nnot json\n')
    # in process (a replay file refused as the command prints it: the test of such files below)
    msg = in_process_error(tmp_path, ONCOLOGY, f"trials_file={FIXTURE_CSV}", model=f"replay/{bad}")
    assert msg == f"med_evals: {bad}: line 2: not JSON (Expecting value)"


def recording(tmp: Path, rows: list[dict]) -> Path:
    path = tmp / "replay.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_a_failed_run_exits_non_zero_with_the_documented_command(tmp_path):
    """`inspect eval` exits 0 even when its log's status is error; `inspect eval-set` does not
    (its eval_set() reports the failure, which the command turns into exit 1).

    docs/ci.md recommends `inspect eval-set --retry-attempts 0` (and `med-evals regress`) for
    CI; this is the case it guards against: a replay file that lacks a record.
    """
    replay = recording(tmp_path, [{"id": "doi_only-000", "reply": "POSITIVE"}])  # 1 of 6
    args = [ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "-T", "condition=doi_only"]
    args += ["--model", f"replay/{replay}", "--display", "plain"]
    code, out = inspect_cmd(tmp_path, "eval", *args, "--log-dir", "eval")
    [info] = list_eval_logs(str(tmp_path / "eval"))
    log = read_eval_log(info.name, header_only=True)
    # the command found the task through the package's entry point (no task file)
    assert (log.eval.task_registry_name, log.eval.task_file) == (ONCOLOGY, None)
    assert log.status == "error" and "sample 'doi_only-001', epoch 1 (no record)" in out
    assert code == 0  # Inspect's behaviour, hence the recommendation below
    # `inspect eval-set` exits 1 when its eval_set() reports failure (its command: `ctx.exit(0 if
    # success else 1)`), run in process; in a context of its own, as a command has: eval_set
    # leaves the model it ran active in the caller's context
    success, [log] = contextvars.copy_context().run(
        eval_set, ONCOLOGY, log_dir=str(tmp_path / "s"), model=f"replay/{replay}",
        task_args={"trials_file": str(FIXTURE_CSV), "condition": "doi_only"},
        retry_attempts=0, display="none",
    )  # fmt: skip
    assert not success and log.status == "error"


def test_provider_errors_raise_fails_the_gate(tmp_path):
    """With provider_errors=raise a provider failure is a sample error: the log's status is
    error (Inspect's default --fail-on-error), which `inspect eval-set` turns into exit 1 (the
    test before, as a command); with the default provider_errors=score it is scored ERROR and
    the run succeeds. Both in process."""
    ids = [f"doi_only-{i:03d}" for i in range(6)]
    rows = [{"id": i, "reply": "NEGATIVE"} for i in ids[1:]]
    replay = recording(tmp_path, [{"id": ids[0], "reply": None, "error": "HTTP 500"}, *rows])
    args = {"trials_file": str(FIXTURE_CSV), "condition": "doi_only"}
    [log] = inspect_eval(
        ONCOLOGY, task_args={**args, "provider_errors": "raise"}, model=f"replay/{replay}",
        display="none", log_dir=str(tmp_path / "raise"),
    )  # fmt: skip
    assert log.status == "error" and "HTTP 500" in str(log.error)
    [log] = inspect_eval(
        ONCOLOGY, task_args=args, model=f"replay/{replay}", display="none",
        log_dir=str(tmp_path / "score"),
    )  # fmt: skip
    assert log.status == "success"
    predictions = [s.scores["trial_outcome"].value["prediction"] for s in log.samples]
    assert predictions.count("ERROR") == 1


@pytest.mark.slow
def test_the_message_reaches_stderr_once_whatever_the_display(tmp_path):
    """Inspect prints a PrerequisiteError through its console, which `--display none` silences
    (the run exited 1 and printed nothing); ours print themselves, once, on stderr."""
    args = ["eval", ONCOLOGY, "-T", "seed=abc", "--model", "mockllm/model"]
    for display in ("none", "full"):  # Inspect's console silent, and at its fullest
        line = stderr_line(tmp_path, *args, display=display)
        assert line == "med_evals: oncology_rct: -T seed=abc: must be an integer"


@pytest.mark.slow
def test_a_misspelt_parameter_stops_the_run(tmp_path):
    """Inspect warned "param 'conditon' not used", ran the default condition and exited 0."""
    trials = f"trials_file={FIXTURE_CSV}"
    expected = (
        "med_evals: oncology_rct: -T conditon=doi_only: unknown parameter; "
        "did you mean -T condition?"
    )
    # `inspect eval-set` as a command; `inspect eval`'s path in process (its printing of such a
    # message: test_the_message_reaches_stderr_once_whatever_the_display)
    args = ["eval-set", ONCOLOGY, "-T", "conditon=doi_only", "-T", trials]
    args += ["--model", "mockllm/model", "--log-dir", "logs-eval-set"]
    assert stderr_line(tmp_path, *args) == expected
    assert not list_eval_logs(str(tmp_path / "logs-eval-set"))  # no sample ran
    assert in_process_error(tmp_path, ONCOLOGY, "conditon=doi_only", trials) == expected


@pytest.mark.slow
def test_a_log_dir_that_is_a_file_is_one_line(tmp_path):
    """`--log-dir README.md` was Inspect's FileExistsError when it made the folder: 209 lines of
    traceback from `inspect eval` (the task is built first: our line now comes before), 51 from
    `inspect eval-set` (which makes the folder before any task: our exception hook's line)."""
    readme = tmp_path / "README.md"
    readme.write_text("# a file\n")
    run = [ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "--model", "mockllm/model"]
    assert stderr_line(tmp_path, "eval", *run, "--log-dir", "README.md") == (
        "med_evals: oncology_rct: --log-dir README.md: is a file, not a folder; give the folder "
        "for the run's logs"
    )
    assert stderr_line(tmp_path, "eval-set", *run, "--log-dir", "README.md") == (
        "med_evals: --log-dir README.md: is a file, not a folder; give the folder for the run's "
        "logs"
    )
    assert readme.read_text() == "# a file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]


def test_a_file_in_the_log_dirs_way_is_named(tmp_path, monkeypatch):
    """A file above the folder (`README.md/logs`: Inspect's NotADirectoryError), the folder from
    INSPECT_LOG_DIR, and Inspect's default ./logs when that is a file; a folder that can be
    made passes."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INSPECT_LOG_DIR", raising=False)
    (tmp_path / "README.md").write_text("# a file\n")
    run = ["eval", ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "--model", "mockllm/model",
           "--limit", "0"]
    end = "not a folder; give the folder for the run's logs"
    ex = inspect_cli_error(tmp_path, *run, "--log-dir", "README.md/logs")
    assert printed_for(ex) == (
        f"med_evals: oncology_rct: --log-dir README.md/logs: README.md is a file, {end}"
    )
    monkeypatch.setenv("INSPECT_LOG_DIR", "README.md")
    assert printed_for(_without_log_dir(run)) == (
        f"med_evals: oncology_rct: INSPECT_LOG_DIR=README.md: is a file, {end}"
    )
    monkeypatch.delenv("INSPECT_LOG_DIR")
    (tmp_path / "logs").write_text("")
    assert printed_for(_without_log_dir(run)) == (
        f"med_evals: oncology_rct: --log-dir ./logs (Inspect's default): is a file, {end}"
    )
    assert inspect_cli_error(tmp_path, *run, "--log-dir", "new/logs") is None


def _without_log_dir(args: list[str]) -> BaseException | None:
    """The exception ``inspect <args> --display none``, with no ``--log-dir``, stops with (None
    when it ends normally), run in process."""
    from click.testing import CliRunner

    from med_evals.inspect_internals.compat import inspect_command

    result = contextvars.copy_context().run(
        CliRunner().invoke, inspect_command(), [*args, "--display", "none"],
        catch_exceptions=True,
    )
    return None if isinstance(result.exception, SystemExit) else result.exception


def test_limit_0_says_that_nothing_ran(tmp_path, capfd):
    """Inspect runs no sample and exits 0 (nothing of ours can stop it); the run says so, on
    stderr (in process: the hook that says it runs after every eval, as in a command)."""
    [log] = inspect_eval(
        ONCOLOGY, task_args={"trials_file": str(FIXTURE_CSV)}, model="mockllm/model", limit=0,
        display="none", log_dir=str(tmp_path / "l"),
    )  # fmt: skip
    out, err = capfd.readouterr()
    assert log.status == "success" and not out.strip()
    location = log.location.removeprefix("file://")
    assert [line for line in err.splitlines() if "med_evals" in line] == [
        f"med_evals: oncology_rct: 0 samples (--limit 0): nothing was evaluated; log {location}"
    ]


def test_a_run_of_some_samples_says_nothing_of_ours(tmp_path, capfd):
    """The other side of ``--limit 0`` (in process: the same hook runs after every eval)."""
    [log] = inspect_eval(
        ONCOLOGY, task_args={"trials_file": str(FIXTURE_CSV)}, model="mockllm/model", limit=1,
        display="none", log_dir=str(tmp_path / "l1"),
    )  # fmt: skip
    out, err = capfd.readouterr()
    assert log.status == "success" and "med_evals" not in out + err


@pytest.mark.slow
def test_replay_files_that_cannot_serve_the_task(tmp_path):
    """Each was found only during the run (every sample failing, exit 0) or, for a file that is
    not UTF-8, as 239 lines of traceback; now one line before any sample."""
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "title_abstract-000", "reply": "POSIT\xe9VE"}\n')
    (tmp_path / "empty.jsonl").write_text("\n")
    other = recording(tmp_path, [{"task": "medevidence", "id": "evidence-1-1", "reply": "x"}])
    ids = other.with_name("ids.jsonl")
    ids.write_text(json.dumps({"id": "closed_book-1-1", "reply": "x"}) + "\n")
    expected = {
        latin: f"med_evals: {latin}: line 1: not UTF-8 text (byte 0xe9); a replay file holds "
        "JSON lines in UTF-8",
        tmp_path / "empty.jsonl": f"med_evals: {tmp_path / 'empty.jsonl'}: no record (the file "
        "is empty or blank); a replay file holds one JSON line per recorded call",
        other: f"med_evals: replay: {other} has no record for task 'oncology_rct': its records "
        "are for medevidence",
        ids: f"med_evals: replay: {ids} has no record for any sample of this oncology_rct run: "
        "it records ids such as 'closed_book-1-1', the run's are such as 'title_abstract-000' "
        "(sample ids: docs/models.md)",
    }
    # the command line prints one refused when the model is created and one refused when the
    # task is built (one line on stderr, exit 1, no log); the others are found in process
    for path in (latin, other):
        args = ["eval", ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "--model", f"replay/{path}"]
        assert stderr_line(tmp_path, *args, "--log-dir", "l") == expected[path]
    assert not list_eval_logs(str(tmp_path / "l"))
    for path in (tmp_path / "empty.jsonl", ids):
        assert in_process_error(
            tmp_path, ONCOLOGY, f"trials_file={FIXTURE_CSV}", model=f"replay/{path}"
        ) == expected[path]


def test_a_one_trial_file_names_the_file(tmp_path):
    import pandas as pd
    import pytest

    from med_evals.data.datasets import DatasetError
    from med_evals.tasks.oncology_rct import oncology_rct

    from .oncology_support import FIXTURE_CSV

    one = tmp_path / "one.csv"
    pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False).head(1).to_csv(one, index=False)
    with pytest.raises(DatasetError, match=r"one\.csv: 1 trial\(s\); the task needs at least two"):
        oncology_rct(trials_file=str(one))


@pytest.mark.slow
def test_a_misspelt_provider_is_one_line(tmp_path):
    """Inspect raised it inside a task group: 213 lines of exception group, exit 1."""
    line = stderr_line(tmp_path, "eval", ONCOLOGY, "--model", "opnai/gpt-4o")
    assert line.startswith(
        "med_evals: --model opnai/gpt-4o: unknown model provider 'opnai'; "
        "did you mean openai/gpt-4o? (providers: "
    )


def test_only_the_unknown_provider_error_is_shortened():
    from med_evals.inspect_internals.compat import unknown_provider_message

    error = ValueError("Model API nosuch of model 'nosuch/m' not recognized.")
    group = BaseExceptionGroup("in a task group", [ExceptionGroup("inner", [error])])
    for ex in (error, group):
        message = unknown_provider_message(ex)
        assert message is not None
        assert message.startswith("--model nosuch/m: unknown model provider 'nosuch' (")
    assert "did you mean replay/x?" in unknown_provider_message(
        ValueError("Model API replya of model 'replya/x' not recognized.")
    )
    for other in (ValueError("something else"), KeyError("Model API x of model 'x/y' not "
                  "recognized."), ExceptionGroup("two", [error, ValueError("another")])):
        assert unknown_provider_message(other) is None


# --- mistakes Inspect itself meets first (issue 27) -------------------------------------------
# Inspect's own command line, in process (click's test runner): its option parsing, then the
# run, without a new interpreter. The exception it stops with is what the command's exception
# hook receives; `uncaught_message` is what our hook prints for it (None: Inspect's traceback).


def inspect_cli_error(tmp: Path, *args: str) -> BaseException | None:
    """The exception ``inspect <args> --display none --log-dir <tmp>/cli`` stops with (None when
    it ends normally), run in process by Inspect's own command line (``args``' own
    ``--log-dir``, if any, instead of ``<tmp>/cli``)."""
    from click.testing import CliRunner

    from med_evals.inspect_internals.compat import inspect_command

    argv = [*args, "--display", "none"]
    argv += [] if "--log-dir" in args else ["--log-dir", str(tmp / "cli")]
    result = contextvars.copy_context().run(
        CliRunner().invoke, inspect_command(), argv, catch_exceptions=True
    )
    return None if isinstance(result.exception, SystemExit) else result.exception


def printed_for(ex: BaseException | None) -> str | None:
    from med_evals.inspect_internals.compat import uncaught_message

    assert ex is not None, "the command ended without an error"
    message = uncaught_message(ex)
    return None if message is None else f"med_evals: {message}"


def test_a_task_argument_inspect_cannot_read_is_one_line(tmp_path):
    """Inspect reads each -T value as YAML before any task is loaded: 2020-13-45 looks like a
    YAML date and YAML's date constructor raised 'month must be in 1..12' (69 lines of
    traceback)."""
    run = ["eval", ONCOLOGY, "--model", "mockllm/model"]
    ex = inspect_cli_error(tmp_path, *run, "-T", "published_after=2020-13-45")
    assert printed_for(ex) == "med_evals: -T published_after=2020-13-45: not a date (YYYY-MM-DD)"
    ex = inspect_cli_error(tmp_path, *run, "-T", "published_after=2021-02-30")
    assert printed_for(ex) == "med_evals: -T published_after=2021-02-30: not a date (YYYY-MM-DD)"
    # any value YAML rejects, named with its flag: a model argument too
    ex = inspect_cli_error(tmp_path, *run, "-M", "choices=[POSITIVE")
    assert printed_for(ex) == (
        "med_evals: -M choices=[POSITIVE: Inspect reads the value as YAML and cannot read it "
        "(expected ',' or ']', but got '<stream end>'); "
        """to pass it as text, quote it: -M 'choices="[POSITIVE"'"""
    )


def test_a_misspelt_task_name_names_the_closest_task(tmp_path):
    """Inspect said "No inspect tasks were found at the specified paths." and nothing else."""
    from med_evals.inspect_internals.compat import PrerequisiteError

    with pytest.raises(PrerequisiteError) as err:
        inspect_eval("med_evals/oncology_rtc", model="mockllm/model", display="none",
                     log_dir=str(tmp_path / "l"))  # fmt: skip
    assert printed_for(err.value) == (
        "med_evals: no task med_evals/oncology_rtc; did you mean med_evals/oncology_rct?"
    )
    with pytest.raises(PrerequisiteError) as err:
        inspect_eval("med_evals/nothing_like_it", model="mockllm/model", display="none",
                     log_dir=str(tmp_path / "l"))  # fmt: skip
    message = printed_for(err.value)
    assert message is not None and message.startswith(
        "med_evals: no task med_evals/nothing_like_it (med_evals's tasks: "
    )
    assert "med_evals/oncology_rct" in message and "med_evals/medevidence" in message


def test_a_misspelt_role_provider_names_the_role():
    """It was reported as `--model opnai/gpt-4o`, the flag of the model under evaluation."""
    with pytest.raises(ValueError) as err:
        inspect_eval(ONCOLOGY, model="mockllm/model", model_roles={"grader": "opnai/gpt-4o"},
                     task_args={"trials_file": str(FIXTURE_CSV)}, display="none")  # fmt: skip
    message = printed_for(err.value)
    assert message is not None and message.startswith(
        "med_evals: --model-role grader=opnai/gpt-4o: unknown model provider 'opnai'; "
        "did you mean openai/gpt-4o? (providers: "
    )


def test_vllm_without_a_server_says_how_to_give_one(tmp_path, monkeypatch):
    """Inspect started every sample, each failed asking to `pip install vllm` (a 155-line panel
    of raw `[bold]` markup), and exited 0."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here: Inspect would start a server")
    pytest.importorskip("openai")
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    trials = f"trials_file={FIXTURE_CSV}"
    msg = in_process_error(tmp_path, ONCOLOGY, trials, model="vllm/Qwen/Qwen2.5-7B-Instruct")
    assert msg == (
        "med_evals: --model vllm/Qwen/Qwen2.5-7B-Instruct: no vLLM server to send requests to "
        "(VLLM_BASE_URL is not set) and vllm is not installed here to start one: set "
        "VLLM_BASE_URL=http://<host>:<port>/v1 (or pass --model-base-url, or -M port=<port> for "
        "a server on this machine), or pip install vllm on a GPU machine and Inspect starts the "
        "server (docs/models.md)"
    )


def test_a_vllm_server_given_any_way_passes_the_check(monkeypatch):
    from inspect_ai.model import get_model

    from med_evals.models.providers import vllm_server_problem

    pytest.importorskip("openai")
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    vllm = "vllm/Qwen/Qwen2.5-7B-Instruct"
    assert vllm_server_problem(get_model(vllm, memoize=False)) is not None
    for model in (
        get_model(vllm, base_url="http://gpu:8000/v1", memoize=False),  # --model-base-url
        get_model(vllm, port=8000, memoize=False),  # -M port=8000
    ):
        assert vllm_server_problem(model) is None
    monkeypatch.setenv("VLLM_BASE_URL", "http://gpu:8000/v1")
    assert vllm_server_problem(get_model(vllm, memoize=False)) is None
    assert vllm_server_problem(get_model("mockllm/model")) is None


def test_an_epochs_reducer_other_than_the_studys_is_refused(tmp_path):
    """Before: ``--epochs 3 --epochs-reducer mean`` reduced the study's dict-valued label scores
    by Inspect's mean, silently, exit 0 (issue 44)."""
    from med_evals.inspect_internals.compat import InputError

    run = ["eval", ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "--model", "mockllm/model",
           "--epochs", "3"]
    ex = inspect_cli_error(tmp_path, *run, "--epochs-reducer", "mean")
    assert isinstance(ex, InputError), ex
    assert printed_for(ex) == (
        "med_evals: oncology_rct: --epochs-reducer mean: this task reduces its epochs with its "
        "own majority_label (the study's definition); Inspect's reducers would reduce each "
        "label score apart, giving numbers of another definition; drop the flag"
    )
    ex = inspect_cli_error(tmp_path, *run, "--no-epochs-reducer")
    assert isinstance(ex, InputError), ex
    assert printed_for(ex) == (
        "med_evals: oncology_rct: --no-epochs-reducer: this task reduces its epochs with its own "
        "majority_label (the study's definition); drop the flag"
    )
    assert not list_eval_logs(str(tmp_path / "cli"))
    # the study's own reducer, named, runs (here with --limit 0: no sample)
    assert inspect_cli_error(tmp_path, *run, "--epochs-reducer", "majority_label",
                             "--limit", "0") is None


def test_epochs_and_connections_below_one_are_refused(tmp_path):
    """`--epochs 0` ran one epoch (Inspect reads 0 as not given); `--max-connections 0` waited
    forever for a connection and sent no request (here with --limit 0, so that a run that is
    not refused ends: it runs no sample)."""
    from med_evals.inspect_internals.compat import InputError

    run = ["eval", ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "--model", "mockllm/model"]
    ex = inspect_cli_error(tmp_path, *run, "--epochs", "0")
    assert isinstance(ex, InputError), ex
    assert printed_for(ex) == (
        "med_evals: oncology_rct: --epochs 0: must be at least 1 (Inspect reads 0 as not given "
        "and would run the task's own number of epochs)"
    )
    ex = inspect_cli_error(tmp_path, *run, "--max-connections", "0", "--limit", "0")
    assert isinstance(ex, InputError), ex
    assert printed_for(ex) == (
        "med_evals: oncology_rct: --max-connections 0: must be at least 1 (with 0 no request is "
        "ever sent: the run waits forever)"
    )
    assert not list_eval_logs(str(tmp_path / "cli"))
    # a Python caller's max_connections=0 (Inspect refuses epochs=0 itself)
    with pytest.raises(InputError, match=r"oncology_rct: max_connections=0: must be at least 1"):
        inspect_eval(
            ONCOLOGY, task_args={"trials_file": str(FIXTURE_CSV)}, model="mockllm/model",
            max_connections=0, limit=0, display="none", log_dir=str(tmp_path / "p"),
        )  # fmt: skip
