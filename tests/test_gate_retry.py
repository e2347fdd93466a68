"""The regression gate, ``med-evals baseline`` and the report after a kill (of an ``inspect eval``
command), ``inspect log recover`` and ``inspect eval-retry`` (in process): the finished log of
the eval is read, the killed and the ``-recovered`` log beside it are named as ignored. Loopback
only (the fake OpenAI-compatible server), bounded."""

import signal
import subprocess
import time
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log, recover_eval_log

from med_evals.commands.cli import main as cli_main
from med_evals.commands.report import build_report

from .oncology_support import big_fixture_csv, install_fixture
from .support import INSPECT, NB
from .support.evals import eval_retry, inspect_eval
from .support.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # subprocesses and a kill


@pytest.fixture(scope="module")
def retried(tmp_path_factory):
    """``logs/``: a run killed mid-way (status ``started``), Inspect's recovery of it
    (``-recovered``, status ``error``) and the eval-retry of that (``success``), one eval;
    ``base/``: a separate finished run of the same task."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("retried")
    install_fixture(tmp, mp, csv=big_fixture_csv(tmp, copies=6))  # 36 trials
    mp.setenv("FAKE_API_KEY", "sk-test")
    logdir, basedir = tmp / "logs", tmp / "base"
    try:
        with FakeOpenAIServer(latency=0.2) as server:
            common = ["--model", "openai-api/fake/fake", "--model-base-url", server.base_url,
                      "--display", "none"]
            # the separate finished run, in process (the same task, model and options)
            [base] = inspect_eval("med_evals/oncology_rct", model="openai-api/fake/fake",
                                  model_base_url=server.base_url, log_dir=str(basedir),
                                  max_connections=8, display="none")
            assert base.status == "success"
            served = server.counts["ok"]
            proc = subprocess.Popen(
                [INSPECT, "eval", "med_evals/oncology_rct", "--log-dir", str(logdir),
                 "--max-connections", "2", "--log-buffer", "4", *common],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            deadline = time.time() + 120
            while (server.counts["ok"] < served + 18 and time.time() < deadline
                   and proc.poll() is None):
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            server.latency = 0.0  # the kill is done: what follows need not be slow
            [killed] = [i.name.removeprefix("file://") for i in list_eval_logs(str(logdir))]
            # what `inspect log recover <killed>` does, in process (its defaults)
            recovered = killed.removesuffix(".eval") + "-recovered.eval"
            assert recover_eval_log(killed).location.removeprefix("file://") == recovered
            # what `inspect eval-retry <recovered>` does, in process (the kill needed a process)
            [retry] = eval_retry(recovered, log_dir=str(logdir), display="none",
                                 max_connections=8)
            paid_calls = server.counts["ok"] - served  # both attempts of the retried eval
    finally:
        mp.undo()
    assert retry.status == "success", retry.error
    statuses = {
        Path(i.name).name: read_eval_log(i.name, header_only=True).status
        for i in list_eval_logs(str(logdir))
    }
    assert sorted(statuses.values()) == ["error", "started", "success"], statuses
    assert statuses[Path(recovered).name] == "error"
    return {"logs": logdir, "base": basedir, "killed": killed, "recovered": recovered,
            "finished": next(n for n, s in statuses.items() if s == "success"),
            "paid_calls": paid_calls}


def test_the_retry_runs_each_sample_once(retried):
    """The killed log kept some samples (flushed every 4); the retry of its recovery holds
    every trial once: none lost, none run twice into the log."""
    killed = read_eval_log(retried["killed"])
    assert killed.status == "started" and 0 < len(killed.samples or []) < 36
    finished = read_eval_log(str(retried["logs"] / retried["finished"]))
    ids = [s.id for s in finished.samples]
    assert len(ids) == 36 == len(set(ids))


def test_select_logs_reads_the_finished_log_of_the_eval(retried):
    from med_evals.logs.runs import select_logs

    sel = select_logs([retried["logs"]])
    assert [Path(p).name for p in sel.finished] == [retried["finished"]]
    assert not sel.unfinished and not sel.unreadable
    assert len(sel.superseded) == 2
    for path, status in ((retried["killed"], "started"), (retried["recovered"], "error")):
        [line] = [s for s in sel.superseded if s.startswith(path + ":")]
        assert f"ignored (status {status})" in line and retried["finished"] in line


def test_regress_gates_the_finished_log_and_names_the_others(retried, tmp_path, capsys):
    baseline = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(retried["base"]), "-o", str(baseline)]) == 0
    capsys.readouterr()
    assert cli_main(["regress", *NB, "--baseline", str(baseline), str(retried["logs"])]) == 0
    out, err = capsys.readouterr()
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and all("ignored (status" in n for n in notes), err
    assert "pass: 3 gated metric(s) tested" in out
    # without the finished log, the killed or the recovered log alone cannot be gated
    for path in (retried["killed"], retried["recovered"]):
        assert cli_main(["regress", *NB, "--baseline", str(baseline), path]) == 3
        out, _ = capsys.readouterr()
        assert "undecided: oncology_rct / openai-api/fake/fake" in out
        assert "run did not complete" in out
        # the hint is the command that finishes the run into its own folder (eval-retry
        # alone writes to ./logs, where gating this folder again would not find it)
        folder = Path(path).parent.resolve()
        assert f"resume it with `inspect eval-retry --log-dir {folder} {path}`" in out


def test_baseline_and_report_read_the_finished_log(retried, tmp_path, capsys):
    baseline = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(retried["logs"]), "-o", str(baseline)]) == 0
    err = capsys.readouterr().err
    assert err.count("skipped: ") == 2 and err.count("ignored (status") == 2, err
    assert cli_main(["baseline", retried["killed"], "-o", str(baseline)]) == 2
    assert "finished runs only" in capsys.readouterr().err
    result = build_report([retried["logs"]], tmp_path / "report", n_boot=10)
    assert len(result.skipped) == 2 and all("ignored (status" in s for s in result.skipped)
    assert not [w for w in result.warnings if "also in" in w]  # no overlapping samples merged


#: the fake server's usage of every call (FakeOpenAIServer without word_usage)
CALL_TOKENS = (10, 1)
#: calls a kill can leave in no log: in flight (--max-connections 2) and answered since the
#: last flush (--log-buffer 4)
UNLOGGED_AT_MOST = 2 + 4


def _paid_against_server(run, server_calls: int) -> None:
    """A resumed run's figures against the server's count: what the finished run used is every
    sample once (36 calls' worth, as an uninterrupted run), what the eval paid is every call a
    log shows (each sample record once), at most a kill's worth below the server's count, and
    the part no log shows is named."""
    from med_evals.logs.usage import KILLED, paid_line, total_usage

    used = total_usage(run.usage().roles)
    assert (used.input_tokens, used.output_tokens) == (36 * CALL_TOKENS[0], 36 * CALL_TOKENS[1])
    paid = run.paid_usage()
    assert paid is not None and paid.unknown == KILLED and paid.attempts >= 2
    total = total_usage(paid.roles)
    logged_calls = total.input_tokens // CALL_TOKENS[0]
    assert total.output_tokens == logged_calls * CALL_TOKENS[1]
    assert 36 <= logged_calls <= server_calls <= logged_calls + UNLOGGED_AT_MOST
    line = paid_line(paid, run.usage())
    assert line.startswith(f"paid over {paid.attempts} attempts of the eval: input tokens at "
                           f"least {total.input_tokens:,} (used by the finished run: 360)")
    assert line.endswith(f"; unknown: {KILLED}")


def test_a_resumed_run_counts_every_attempt_and_shows_no_saving(retried, tmp_path, capsys):
    """Killed, recovered and retried with ``inspect eval-retry``: the report and the gate count
    what every attempt paid apart from what the finished run used; the gate compares what was
    used, so a resume is never a saving."""
    from med_evals.logs.runs import load_runs

    [run], _ = load_runs([retried["logs"]])
    _paid_against_server(run, retried["paid_calls"])
    baseline = tmp_path / "baseline.json"
    assert cli_main(["baseline", str(retried["base"]), "-o", str(baseline)]) == 0
    capsys.readouterr()
    assert cli_main(["regress", *NB, "--baseline", str(baseline), str(retried["logs"])]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines()
              if x.startswith("  oncology_rct / ") and "input tokens" in x]
    assert "input tokens 360 -> 360 (+0); output tokens 36 -> 36 (+0)" in line
    assert "; paid over 3 attempts of the eval: input tokens at least " in line
    result = build_report([retried["logs"]], tmp_path / "report", n_boot=10)
    assert "paid over 3 attempts of the eval: input tokens at least" in (
        result.markdown.read_text())


@pytest.fixture(scope="module")
def eval_set_resumed(tmp_path_factory):
    """``inspect eval-set`` killed mid-way, then the same command again (docs/scale.md)."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("eval_set")
    install_fixture(tmp, mp, csv=big_fixture_csv(tmp, copies=6))  # 36 trials
    mp.setenv("FAKE_API_KEY", "sk-test")
    logdir = tmp / "logs"
    try:
        with FakeOpenAIServer(latency=0.2) as server:
            command = [INSPECT, "eval-set", "med_evals/oncology_rct", "--log-dir", str(logdir),
                       "--max-connections", "2", "--log-buffer", "4", "--model",
                       "openai-api/fake/fake", "--model-base-url", server.base_url,
                       "--display", "none"]
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            deadline = time.time() + 120
            while server.counts["ok"] < 18 and time.time() < deadline and proc.poll() is None:
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            server.latency = 0.0  # the kill is done: the resume need not be slow
            again = subprocess.run(command, capture_output=True, text=True, timeout=300)
            calls = server.counts["ok"]
    finally:
        mp.undo()
    assert again.returncode == 0, again.stderr[-2000:]
    return {"logs": logdir, "calls": calls}


def test_a_resumed_eval_set_counts_every_attempt(eval_set_resumed):
    """The same ``eval-set`` command run again after a kill: the same figures as after
    ``eval-retry`` (what was used; what was paid, with the part no log shows named)."""
    from med_evals.logs.runs import load_runs

    [run], _ = load_runs([eval_set_resumed["logs"]])
    _paid_against_server(run, eval_set_resumed["calls"])
