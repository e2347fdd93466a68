"""``med-evals run TASK --processes N``: a task's shards in N ``inspect eval`` processes into one
log folder, read back as one run; run again, it resumes only the shards that did not finish. And
the team recipe's Slurm and Kubernetes forms (docs/scale.md): ``-T shard=i/N`` from the job's
index, several processes into one S3 store, then report, baseline and gate over the store.
Loopback only (the fake OpenAI-compatible server, moto's S3 server)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import psutil
import pytest
from inspect_ai.log import read_eval_log

from med_evals.commands.cli import main as cli_main
from med_evals.commands.regress import decide, make_baseline, regress
from med_evals.commands.report import build_report
from med_evals.commands.run import (
    RUN_KEY,
    Outcome,
    ShardLog,
    call_settings,
    check_before,
    closing_line,
    commands,
    progress_line,
    run_key,
)
from med_evals.logs.runs import load_runs
from med_evals.study.params import Shard

from .support import N_BOOT
from .support.fake_openai import FakeOpenAIServer
from .support.healthfc_claims import healthfc_csv, verdict_reply

REPO = Path(__file__).resolve().parents[1]
FAKE = ["--model", "openai-api/fake/fake"]


def _err(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("flags, line", [
    (["-T", "shard=2/4"], "-T shard=2/4: med-evals run gives each process its shard; leave it "
     "out (or run inspect eval -T shard=i/N yourself)"),
    (["--limit", "10"], "--limit: each process runs its whole shard; choose the samples with "
     "-T subset=..."),
    (["--sample-id=healthfc-1"], "--sample-id=healthfc-1: each process runs its whole shard; "
     "choose the samples with -T subset=..."),
])
def test_flags_it_sets_itself_are_refused(flags, line, capsys, tmp_path):
    assert cli_main(["run", "healthfc", "--log-dir", str(tmp_path), *flags]) == 2
    assert _err(capsys) == f"med-evals run: error: {line}"
    assert not list(tmp_path.iterdir())  # refused before anything was started


def test_a_task_it_cannot_shard_is_one_line(capsys, tmp_path):
    assert cli_main(["run", "helthfc", "--log-dir", str(tmp_path)]) == 2
    assert _err(capsys) == ("med-evals run: error: helthfc: not a med_evals task that takes "
                            "-T shard=i/N; did you mean healthfc?")
    assert cli_main(["run", "healthfc", "--processes", "0", "--log-dir", str(tmp_path)]) == 2
    assert _err(capsys) == "med-evals run: error: --processes 0: at least 1"


def _claims(tmp_path: Path, n: int = 3) -> list[str]:
    """-T arguments of a HealthFC run on ``n`` made-up claims (no ROUGE-L or BERTScore)."""
    return ["-T", f"data_file={healthfc_csv(tmp_path / 'claims.csv', n=n)}", "-T",
            "generation_scoring=false"]


@pytest.mark.parametrize("flags, line", [
    # an unknown Inspect flag: exit 2, as `--help` says, not 1 after every shard failed
    (["--bogus"], "--bogus: not an option of inspect eval (did you mean --tags?); med-evals run "
     "hands every flag after the task to inspect eval"),
    (["--max-connections", "x"], "Invalid value for '--max-connections': 'x' is not a valid "
     "integer. (a flag for inspect eval: med-evals run hands every flag after the task to "
     "inspect eval)"),
    # no model: the reason was only in each shard's log, and a re-run "resumed" it for ever
    ([], "no model: give --model PROVIDER/MODEL (or set INSPECT_EVAL_MODEL); without one each "
     "shard's log would end with status error"),
    (["--model", "openai/a,openai/b"], "--model openai/a,openai/b: med-evals run runs one "
     "model; run each model by itself, each into its own log folder"),
    ([*FAKE, "medreqal"], "medreqal: med-evals run runs one task (an argument after the task "
     "goes to inspect eval as another task); run each task by itself"),
    # the task's own refusal, made here
    ([*FAKE, "-T", "prompt=nope"], "healthfc: -T prompt=nope: unknown prompt 'nope'; choose "
     "from chat, mistral, alpaca (or a group: all)"),
    # more processes than items: each extra shard would be empty
    ([*FAKE, "--processes", "4"], "--processes 4: the run has 3 question(s) after its other "
     "selections, so at most 3 processes (one shard each)"),
])
def test_what_can_be_checked_is_checked_before_any_process(flags, line, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.delenv("INSPECT_EVAL_MODEL", raising=False)
    monkeypatch.setattr("med_evals.commands.run.default_processes", lambda: 2)
    logs = tmp_path / "logs"
    assert cli_main(["run", "healthfc", "--log-dir", str(logs), *_claims(tmp_path),
                     *flags]) == 2
    assert _err(capsys) == f"med-evals run: error: {line}"
    assert not logs.exists()  # refused before anything was started


def test_processes_have_an_upper_bound_and_a_default_of_at_most_the_items(tmp_path,
                                                                          monkeypatch, capsys):
    monkeypatch.setattr("med_evals.commands.run.default_processes", lambda: 2)
    assert cli_main(["run", "healthfc", "--processes", "9", *_claims(tmp_path), *FAKE]) == 2
    assert _err(capsys) == (
        "med-evals run: error: --processes 9: at most 8 on this machine (4 per core, 2 cores): "
        "each process is a whole inspect eval, with its own start-up, memory and "
        "--max-connections; for more requests at once raise --max-connections")
    monkeypatch.setattr("med_evals.commands.run.default_processes", lambda: 8)
    said: list[str] = []
    spec, count = check_before("healthfc", [*_claims(tmp_path), *FAKE], None, said.append)
    assert (spec, count) == ("med_evals/healthfc", 3)  # 8 cores, 3 claims: 3 shards
    assert said == [  # the task's own warning, once, before anything starts
        f"warning: {tmp_path / 'claims.csv'}: counts differ from the published dataset: 3 rows, "
        "not 750; 1 SUPPORTED, not 202; 0 REFUTED, not 125; 2 NOT ENOUGH INFORMATION, not "
        "423. Results are not comparable with the paper's."]


def test_a_model_in_the_environment_or_a_dotenv_file_counts(tmp_path, monkeypatch):
    monkeypatch.delenv("INSPECT_EVAL_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("INSPECT_EVAL_MODEL=openai-api/fake/fake\n")
    assert check_before("healthfc", _claims(tmp_path), 1, lambda line: None)[1] == 1
    assert "INSPECT_EVAL_MODEL" not in os.environ  # read, not set here
    (tmp_path / ".env").unlink()
    monkeypatch.setenv("INSPECT_EVAL_MODEL", "openai-api/fake/fake")
    assert check_before("healthfc", _claims(tmp_path), 1, lambda line: None)[1] == 1


@pytest.mark.slow
def test_a_shard_that_stops_before_its_log_is_named_without_a_resume(tmp_path, monkeypatch,
                                                                     capsys):
    """A cause the command cannot check (the provider's API key not set) stops every shard
    before it writes a log: its words (which --display none silenced) are in the one line, and
    no resume is offered, which would only stop them again."""
    monkeypatch.delenv("FAKE_API_KEY", raising=False)
    logs = tmp_path / "logs"
    assert cli_main(["run", "healthfc", "--processes", "2", "--log-dir", str(logs),
                     *_claims(tmp_path), *FAKE, "--model-base-url", "http://127.0.0.1:9/v1"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "shards 1/2 and 2/2 of healthfc stopped before they wrote a log (exit 1): ERROR: Unable "
        "to initialise fake client | No FAKE_API_KEY defined in the environment. (their output: "
        f"{logs / '.med-evals-run'})",
        "2 of 2 shards stopped before they wrote a log; fix the cause above first (as it is, the "
        "same command would stop them the same way)"]
    assert re.fullmatch(r"healthfc: 0 samples, 0 of 2 shards running, 2 did not finish, \d+ s",
                        err.strip().splitlines()[-1])


def test_the_progress_line_counts_only_finished_shards_as_finished():
    assert progress_line("healthfc", (30, 40), 0, 1, 2, 12.0, unfinished=1) == (
        "healthfc: 30 of 40 samples (75%), 0 of 2 shards running, 1 finished, 1 did not "
        "finish, 12 s")


def test_the_closing_line_offers_a_resume_only_to_the_shards_that_can_resume():
    both = Outcome(failed=["shard 1/4 ..."], stopped=["shards 2/4 and 3/4 ..."], not_started=2)
    assert closing_line(both, 4) == (
        "1 of 4 shards did not finish (running the same command again resumes it) and 2 "
        "stopped before they wrote a log: fix the cause above first (as it is, the same "
        "command would stop them the same way)")
    assert closing_line(Outcome(failed=["a", "b"]), 4) == (
        "2 of 4 shards did not finish; run the same command again to resume them (the finished "
        "shards are kept)")


def test_the_run_key_ignores_only_call_settings():
    flags = ["-T", "subset=ci", *FAKE, "--max-connections", "32", "--timeout=60"]
    assert call_settings(flags) == (["-T", "subset=ci", *FAKE],
                                    ["--max-connections", "32", "--timeout=60"])
    key = run_key("med_evals/healthfc", flags, 4, {})
    # a resumed run may change how calls are made, nothing else
    assert run_key("med_evals/healthfc", ["-T", "subset=ci", *FAKE, "--max-connections", "8"],
                   4, {}) == key
    for other in (["-T", "subset=smoke", *FAKE], ["-T", "subset=ci", "--model", "openai/x"],
                  ["-T", "subset=ci", *FAKE, "--temperature", "0.5"]):
        assert run_key("med_evals/healthfc", other, 4, {}) != key
    assert run_key("med_evals/healthfc", flags, 2, {}) != key  # another partition
    assert run_key("med_evals/medreqal", flags, 4, {}) != key
    assert run_key("med_evals/healthfc", flags, 4, {"INSPECT_EVAL_MODEL": "openai/x"}) != key


def test_each_shard_is_reused_resumed_or_run(tmp_path):
    """The plan of a run again: a finished shard's log is reused (no process), an unfinished
    one resumed with ``inspect eval-retry`` (keeping its samples), a shard with no log run."""
    logs = {
        1: [ShardLog("a.eval", Shard(1, 3), "started", "1", "t1"),
            ShardLog("b.eval", Shard(1, 3), "success", "2", "t1")],
        2: [ShardLog("file:///l/c.eval", Shard(2, 3), "started", "1", "t2")],
    }
    flags = [*FAKE, "--max-connections", "8", "-T", "subset=ci"]
    todo, done = commands("med_evals/healthfc", 3, flags, "/l", "rKEY", logs, tmp_path)
    assert [d.path for d in done] == ["b.eval"]
    assert [p.shard for p in todo] == [Shard(2, 3), Shard(3, 3)]
    assert todo[0].resumes == "/l/c.eval"
    # each runs Inspect through the shard process, which ends it with this command, and each
    # shard into its own folder (Inspect's shard layout), its retry too
    assert all(p.command[:4] == [sys.executable, "-m", "med_evals.commands.shard_process",
                                 str(os.getpid())] for p in todo)
    assert todo[0].command[4:] == ["eval-retry", "--log-dir", "/l/healthfc-rKEY.shards/2",
                                   "--no-log-realtime",
                                   "--no-score-display", "--display", "none",
                                   "--max-connections", "8", "/l/c.eval"]
    assert todo[1].command[4:] == [
        "eval", "med_evals/healthfc", "-T", "shard=3/3", "--log-dir",
        "/l/healthfc-rKEY.shards/3", "--metadata",
        f"{RUN_KEY}=rKEY", "--no-log-realtime", "--no-score-display", "--display", "none",
        *flags]


def test_the_progress_line():
    assert progress_line("healthfc", (412, 750), 2, 0, 2, 14.2) == (
        "healthfc: 412 of 750 samples (54%), 2 of 2 shards running, 14 s")
    assert progress_line("healthfc", (0, 0), 2, 0, 2, 0) == (
        "healthfc: 0 samples, 2 of 2 shards running, 0 s")  # no log written yet
    # an s3:// log folder: its logs are not read while the run runs
    assert progress_line("healthfc", None, 1, 3, 4, 30.4) == (
        "healthfc: 1 of 4 shards running, 3 finished, 30 s")


def _headline(line: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(\w+) (\d\.\d{3})", line.split(": ", 2)[2])}


@pytest.mark.slow
def test_two_processes_finish_750_claims_as_one_run(tmp_path, monkeypatch, capsys):
    """HealthFC's size (750 claims in its schema) in two processes against the fake server:
    one log per shard, one merged headline, which report and baseline read as one run. Run
    again, it starts nothing."""
    monkeypatch.setenv("FAKE_API_KEY", "local")
    claims = healthfc_csv(tmp_path / "claims.csv")
    logs = tmp_path / "logs"
    with FakeOpenAIServer(reply=verdict_reply) as server:
        argv = ["run", "healthfc", "--processes", "2", "--log-dir", str(logs), "-T",
                f"data_file={claims}", "-T", "generation_scoring=false", *FAKE, "--model-base-url",
                server.base_url, "--max-connections", "32"]
        assert cli_main(argv) == 0
        out, err = capsys.readouterr()
        assert server.counts["ok"] == 750
        # Inspect's shard layout: each shard's log in its folder, the merged log beside them
        key = run_key("med_evals/healthfc", argv[6:], 2)
        files = sorted(logs.glob(f"healthfc-{key}.shards/*/*.eval"))
        assert [f.parent.name for f in files] == ["1", "2"]
        merged = logs / f"healthfc-{key}.eval"
        assert f"merged log (what inspect view shows): {merged}" in out
        assert _viewer_listing(logs) == [merged.name]  # inspect view: one run
        assert len(read_eval_log(str(merged)).samples or []) == 750
        records = [read_eval_log(str(f), header_only=True).eval.metadata["shard"] for f in files]
        assert sorted((r["shard"], r["samples"], r["partition_samples"]) for r in records) == [
            ("1/2", 375, 750), ("2/2", 375, 750)]
        # one progress line for the whole run (its last one, here not a terminal)
        assert err.strip().splitlines()[-1].startswith(
            "healthfc: 750 of 750 samples (100%), 0 of 2 shards running, 2 finished, ")
        [headline] = [x for x in out.splitlines() if x.startswith("healthfc / ")]
        assert headline.startswith("healthfc / openai-api/fake/fake: 750 samples in 2 shard "
                                   "log(s), read as one run: accuracy_all ")
        [run], skipped = load_runs([logs])
        assert run.partial is None and len(run.values) == 750 and len(run.logs()) == 2
        assert [s.split(": ")[0] for s in skipped] == [str(merged)]  # read from its shards
        assert _headline(headline) == {k: round(v, 3) for k, v in run.headline_values().items()}
        report = build_report([logs], tmp_path / "report", n_boot=10)
        assert [(r.label, r.n) for r in report.headline] == [("openai-api/fake/fake", 750)]
        base = make_baseline([logs])
        assert len(base["runs"]) == 1 and len(base["runs"][0]["samples"]) == 750
        # run again: both shards finished, reused; nothing is asked again
        assert cli_main(argv) == 0
        out, _ = capsys.readouterr()
        assert server.counts["ok"] == 750
        assert sorted(x.split(": ")[0] for x in out.splitlines() if "(reused)" in x) == [
            "merged log (what inspect view shows)", "shard 1/2 finished before",
            "shard 2/2 finished before"]
        assert headline in out
        assert f"merged log (what inspect view shows): {merged} (reused)" in out


def _viewer_listing(folder: Path) -> list[str]:
    """What ``inspect view`` lists of a folder (Inspect's own rule for shard logs a merged
    log covers)."""
    from inspect_ai.log import list_eval_logs

    from med_evals.inspect_internals.compat import without_merged_shards

    return sorted(Path(i.name.removeprefix("file://")).relative_to(folder).as_posix()
                  for i in without_merged_shards(list_eval_logs(str(folder))))


def _samples_logged(folder: Path, shard: str) -> int:
    for path in folder.rglob("*.eval"):
        try:
            header = read_eval_log(str(path), header_only=True)
            if header.eval.task_args.get("shard") == shard:
                with zipfile.ZipFile(path) as z:
                    return sum(1 for n in z.namelist() if n.startswith("samples/"))
        except Exception:  # noqa: BLE001 - not written far enough yet
            continue
    return 0


@pytest.mark.slow
def test_a_killed_shard_is_named_then_resumed(tmp_path, monkeypatch, capsys):
    """Shard 2's process is killed mid-way: the command names it with its log and exits 1; the
    same command again reuses shard 1, resumes shard 2 from its log (its kept samples are not
    asked again) and reads the whole run."""
    monkeypatch.setenv("FAKE_API_KEY", "local")
    claims = healthfc_csv(tmp_path / "claims.csv", n=40)
    logs = tmp_path / "logs"
    result: list[int] = []
    with FakeOpenAIServer(reply=verdict_reply, latency=0.3) as server:
        argv = ["run", "healthfc", "--processes", "2", "--log-dir", str(logs), "-T",
                f"data_file={claims}", "-T", "generation_scoring=false", *FAKE, "--model-base-url",
                server.base_url, "--max-connections", "1", "--log-buffer", "3"]
        thread = threading.Thread(target=lambda: result.append(cli_main(argv)))
        thread.start()
        deadline = time.time() + 120
        while _samples_logged(logs, "2/2") < 6 and time.time() < deadline:
            time.sleep(0.1)
        [victim] = [p for p in psutil.Process().children(recursive=True)
                    if "shard=2/2" in p.cmdline()]
        victim.kill()
        server.latency = 0.0  # shard 1 may now finish quickly
        thread.join(timeout=180)
        assert result == [1]
        out, err = capsys.readouterr()
        # the killed shard is never counted as finished
        assert re.match(r"healthfc: \d+ of 40 samples \(\d+%\), 0 of 2 shards running, 1 "
                        r"finished, 1 did not finish, \d+ s$", err.strip().splitlines()[-1])
        [killed] = [str(p) for p in logs.rglob("*.eval")
                    if read_eval_log(str(p), header_only=True).status == "started"]
        assert Path(killed).parent.name == "2" and Path(killed).parent.parent.suffix == ".shards"
        # no merged log: the viewer shows the shards
        assert not list(logs.glob("*.eval")) and len(_viewer_listing(logs)) == 2
        kept = len(read_eval_log(killed).samples or [])
        assert kept >= 6
        [line] = [x for x in out.splitlines() if x.startswith("shard 2/2")]
        assert line.startswith(f"shard 2/2 of healthfc did not finish: log {killed} (status "
                               "started), exit -9; its output")
        assert out.splitlines()[-1] == ("1 of 2 shards did not finish; run the same command "
                                        "again to resume it (the finished shards are kept)")
        # again: shard 1 reused, shard 2 resumed
        asked = server.counts["ok"]
        assert cli_main(argv) == 0
        out, err = capsys.readouterr()
        # the progress counts the reused shard's samples and the resumed one's, each once
        assert err.strip().splitlines()[-1].startswith(
            "healthfc: 40 of 40 samples (100%), 0 of 2 shards running, 2 finished, ")
        assert any(x.startswith("shard 1/2 finished before: ") and x.endswith("(reused)")
                   for x in out.splitlines())
        assert f"shard 2/2 resumed from {killed} (inspect eval-retry)" in out
        assert server.counts["ok"] - asked == 20 - kept
        assert "healthfc / openai-api/fake/fake: 40 samples in 2 shard log(s)" in out
        # what its attempts paid: two shards, one of them twice (shards are not attempts)
        assert out.splitlines()[-1].startswith("paid over 2 shards in 3 attempts: input tokens "
                                               "at least ")
    [merged] = [str(p) for p in logs.glob("*.eval")]
    assert f"merged log (what inspect view shows): {merged}" in out
    # the retry's log is beside the killed one, in shard 2's folder; the viewer shows one run
    assert _viewer_listing(logs) == [Path(merged).name]
    [run], skipped = load_runs([logs])
    assert run.partial is None and len(run.values) == 40
    assert sorted(s.split(": ")[0] for s in skipped) == sorted([killed, merged])


#: the shard of a job from its index, as docs/scale.md gives it (Slurm array, Indexed Job)
SLURM = "-T shard=$((SLURM_ARRAY_TASK_ID + 1))/$N"
KUBERNETES = "-T shard=$((JOB_COMPLETION_INDEX + 1))/$N"


def _recipes() -> tuple[str, dict]:
    """docs/scale.md's Slurm script (the bash block that reads ``SLURM_ARRAY_TASK_ID``) and
    Indexed Job (its YAML block)."""
    import yaml

    blocks = re.findall(r"```(\w+)\n(.*?)```", (REPO / "docs" / "scale.md").read_text(), re.S)
    [slurm] = [b for lang, b in blocks if lang == "bash" and "SLURM_ARRAY_TASK_ID" in b]
    [job] = [yaml.safe_load(b) for lang, b in blocks if lang == "yaml" and "Indexed" in b]
    assert SLURM in slurm
    return slurm, job


@pytest.mark.slow
def test_the_slurm_and_kubernetes_recipes_into_one_store(tmp_path, monkeypatch):
    """docs/scale.md's Slurm script and Indexed Job, as written there, run at once as the two
    shards of one run (array task 0 of 2; completion index 1 of 2), into one S3 store; report,
    baseline and gate over the store read one run, the numbers of the run made in one
    piece."""
    import os

    from med_evals.tasks.oncology_rct import oncology_rct

    from .oncology_support import big_fixture_csv, install_fixture
    from .support.evals import inspect_eval
    from .support.s3 import s3_server

    slurm, job = _recipes()
    spec = job["spec"]
    [container] = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert spec["completionMode"] == "Indexed" and env["N"] == str(spec["completions"])
    assert container["command"] == ["bash", "-c"] and KUBERNETES in container["args"][0]
    install_fixture(tmp_path / "onc", monkeypatch, big_fixture_csv(tmp_path, copies=2))
    monkeypatch.setenv("FAKE_API_KEY", "local")
    with s3_server() as s3, FakeOpenAIServer() as server:
        store = s3.make_bucket("team-evals") + "/2026-12/oncology-fake"
        # the job's environment (the Job's own for the pod), the model and store ours
        ours = {"MODEL": "openai-api/fake/fake", "STORE": store,
                "FAKE_BASE_URL": server.base_url}
        jobs = [(slurm, {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"}),
                (container["args"][0], {**env, "N": "2", "JOB_COMPLETION_INDEX": "1"})]
        procs = [subprocess.Popen(["bash", "-c", script], env={**os.environ, **job_env, **ours},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for script, job_env in jobs]
        for p in procs:
            out, _ = p.communicate(timeout=240)
            assert p.returncode == 0, out
        assert {k.split("/")[2] for k in s3.keys(store) if k.endswith(".eval")} == {
            "shard-0", "shard-1"}
        [whole] = inspect_eval(oncology_rct(condition="study"), model="openai-api/fake/fake",
                               model_base_url=server.base_url, log_dir=str(tmp_path / "whole"),
                               display="none")
        assert whole.status == "success"
        [run], _ = load_runs([store])
        [local], _ = load_runs([tmp_path / "whole"])
        assert run.partial is None and len(run.values) == 60 and len(run.logs()) == 2
        assert run.values == local.values
        report = build_report([store], tmp_path / "report", n_boot=10)
        assert {(r.label, r.n) for r in report.headline} == {("openai-api/fake/fake", 12)}
        assert len(report.headline) == 5 and not any("partial" in w for w in report.warnings)
        assert [len(r["samples"]) for r in make_baseline([store])["runs"]] == [60]
        rows, _ = regress(make_baseline([tmp_path / "whole"]), [store], n_boot=N_BOOT)
        assert decide(rows).code == 0
