"""What a user sees from `inspect eval` for bad input: one short message, a non-zero exit.

Each case runs the real command in a subprocess (as a user would), outside the checkout.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from inspect_ai.log import list_eval_logs, read_eval_log

from .oncology_support import FIXTURE_CSV

INSPECT = str(Path(sys.executable).parent / "inspect")


def inspect_cmd(tmp: Path, *args: str, env: dict | None = None) -> tuple[int, str]:
    """Run ``inspect <args>`` in ``tmp``; (exit code, stdout + stderr)."""
    proc = subprocess.run(
        [INSPECT, *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=180,
        # a wide console: each message is one line, whatever the terminal
        env={**os.environ, "COLUMNS": "300", **(env or {})},
    )
    return proc.returncode, proc.stdout + proc.stderr


def short_error(tmp: Path, *args: str, env: dict | None = None) -> str:
    """The message of a run that must fail before it starts: exit 1, no traceback, a line or
    two (a list of choices may wrap); returned as one line."""
    code, out = inspect_cmd(tmp, "eval", *args, "--model", "mockllm/model", env=env)
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    assert code == 1, out
    assert "Traceback" not in out and len(lines) <= 2, out
    assert lines[0].startswith("med_evals: ")
    return " ".join(lines)


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
    for args, message in cases:
        assert message in short_error(tmp_path, ONCOLOGY, *args)
    assert "healthfc: -T evidence=maybe: must be true or false" in short_error(
        tmp_path, "med_evals/healthfc", "-T", "evidence=maybe"
    )


def test_a_header_only_file_is_named(tmp_path):
    header_only = tmp_path / "header.csv"
    header_only.write_text(FIXTURE_CSV.read_text().splitlines()[0] + "\n")
    msg = short_error(tmp_path, ONCOLOGY, "-T", f"trials_file={header_only}")
    assert msg == f"med_evals: {header_only}: no data rows (the file holds a header only)"


def test_missing_medreqal_names_every_way_to_provide_it(tmp_path):
    (tmp_path / "data").mkdir()
    for args, env, source in [
        (["-T", "data_dir=data"], None, "from -T data_dir"),
        ([], {"MED_EVALS_DATA_DIR": str(tmp_path / "data")}, "from MED_EVALS_DATA_DIR"),
    ]:
        msg = short_error(tmp_path, "med_evals/medreqal", *args, env=env)
        assert "file 'MedREQAL.csv' is not in the data directory" in msg and source in msg
        for way in ("MED_EVALS_DATA_DIR=<dir>", "-T data_dir=<dir>", "-T data_file=<file>"):
            assert way in msg


def test_unreadable_replay_recording(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "reply": "POSITIVE"}\nnot json\n')
    code, out = inspect_cmd(
        tmp_path, "eval", ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "--model", f"replay/{bad}"
    )
    assert code == 1 and "Traceback" not in out
    assert [line for line in out.splitlines() if line.strip()] == [
        f"med_evals: {bad}: line 2: not JSON (Expecting value)"
    ]


def recording(tmp: Path, rows: list[dict]) -> Path:
    path = tmp / "replay.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_failed_run_exits_non_zero_with_the_documented_command(tmp_path):
    """`inspect eval` exits 0 even when its log's status is error; `inspect eval-set` does not.

    docs/ci.md recommends `inspect eval-set --retry-attempts 0` (and `med-evals regress`) for
    CI; this is the case it guards against: a replay file that lacks a record.
    """
    replay = recording(tmp_path, [{"id": "doi_only-000", "reply": "POSITIVE"}])  # 1 of 6
    args = [ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "-T", "condition=doi_only"]
    args += ["--model", f"replay/{replay}", "--display", "plain"]
    code, out = inspect_cmd(tmp_path, "eval", *args, "--log-dir", "eval")
    [info] = list_eval_logs(str(tmp_path / "eval"))
    log = read_eval_log(info.name, header_only=True)
    assert log.status == "error" and "sample 'doi_only-001', epoch 1 (no record)" in out
    assert code == 0  # Inspect's behaviour, hence the recommendation below
    code, out = inspect_cmd(tmp_path, "eval-set", *args, "--retry-attempts", "0", "--log-dir", "s")
    assert code == 1, out
    assert "Did not successfully complete all tasks" in out


def test_provider_errors_raise_fails_the_gate(tmp_path):
    """With provider_errors=raise a provider failure is a sample error: the log's status is
    error (Inspect's default --fail-on-error) and `inspect eval-set` exits 1; with the default
    provider_errors=score it is scored ERROR and the run succeeds."""
    ids = [f"doi_only-{i:03d}" for i in range(6)]
    rows = [{"id": i, "reply": "NEGATIVE"} for i in ids[1:]]
    replay = recording(tmp_path, [{"id": ids[0], "reply": None, "error": "HTTP 500"}, *rows])
    args = [ONCOLOGY, "-T", f"trials_file={FIXTURE_CSV}", "-T", "condition=doi_only"]
    args += ["--model", f"replay/{replay}", "--display", "plain", "--retry-attempts", "0"]
    code, out = inspect_cmd(tmp_path, "eval-set", *args, "-T", "provider_errors=raise",
                            "--log-dir", "raise")  # fmt: skip
    assert code == 1 and "HTTP 500" in out
    code, out = inspect_cmd(tmp_path, "eval-set", *args, "--log-dir", "score")
    assert code == 0, out


def test_display_none_hides_the_message_but_not_the_exit_code(tmp_path):
    """Inspect's `--display none` silences its console, this message included (docs/ci.md)."""
    code, out = inspect_cmd(
        tmp_path, "eval", ONCOLOGY, "-T", "seed=abc", "--model", "mockllm/model",
        "--display", "none",
    )  # fmt: skip
    assert code == 1 and "seed=abc" not in out and "Traceback" not in out


def test_a_one_trial_file_names_the_file(tmp_path):
    import pandas as pd
    import pytest

    from med_evals.data import DatasetError
    from med_evals.tasks.oncology_rct import oncology_rct

    from .oncology_support import FIXTURE_CSV

    one = tmp_path / "one.csv"
    pd.read_csv(FIXTURE_CSV, dtype=str, keep_default_na=False).head(1).to_csv(one, index=False)
    with pytest.raises(DatasetError, match=r"one\.csv: 1 trial\(s\); the task needs at least two"):
        oncology_rct(trials_file=str(one))
