"""One ``med-evals run`` per log folder at a time, and shards that end with their command
(issue 44, item 11): the folder's lock (med_evals.commands.lock), local and on S3, each case with
the line a user sees; a command killed with SIGKILL takes its shards with it, and the same
command run again at once resumes them, paying only for the samples no log kept; two identical
runs into one store pay once. Loopback only (the fake OpenAI-compatible server counting calls,
moto's S3 server)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from inspect_ai.log import read_eval_log

import med_evals.commands.lock as lock_module
from med_evals.commands.cli import main as cli_main
from med_evals.commands.lock import FOLDER, NAME, Owner, lock_for
from med_evals.outputs.exit_codes import CommandError

from .support.fake_openai import FakeOpenAIServer
from .support.healthfc_claims import healthfc_csv, verdict_reply
from .support.s3 import s3_server

FAKE = ["--model", "openai-api/fake/fake"]
#: holds the lock file as a shard process of a command that has ended would: flock, then the
#: record (the command: a pid that is gone; the holder itself among the shard processes)
HOLDER = textwrap.dedent("""
    import fcntl, json, os, sys, time
    import psutil
    path, command, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    me = os.getpid()
    record = {"id": "x", "host": os.uname().nodename, "pid": command or me,
              "command": "med-evals run healthfc", "started": "2026-12-01 10:00:00",
              "processes": {str(command or me): 1.0, str(me): psutil.Process().create_time()}}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    print("held", flush=True)
    time.sleep(seconds)
""")


def _gone_pid() -> int:
    """The pid of a process that has ended."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _holder(folder: Path, command: int, seconds: float) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder / FOLDER / NAME),
                          str(command), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _in_use(where: str, pid: int, started: str) -> str:
    return (f"{where}: another med-evals run is writing into this log folder (pid {pid}, "
            f"started {started}); one run per log folder at a time: wait for it to end, or "
            f"stop it (kill {pid}) and run the same command again to resume")


# --- the local lock ----------------------------------------------------------------------------

def test_a_folder_a_live_command_holds_is_refused(tmp_path):
    holder = _holder(tmp_path, 0, 60)  # the command itself, running
    try:
        with pytest.raises(CommandError) as refused:
            lock_for(str(tmp_path), "med-evals run ...", print)
        assert refused.value.code == 2
        assert str(refused.value) == _in_use(str(tmp_path), holder.pid, "2026-12-01 10:00:00")
    finally:
        holder.kill()
        holder.wait()


def test_the_shards_of_a_command_that_ended_are_waited_for(tmp_path):
    gone = _gone_pid()
    holder = _holder(tmp_path, gone, 1.5)
    said: list[str] = []
    lock = lock_for(str(tmp_path), "med-evals run healthfc", said.append)
    try:
        assert holder.wait(timeout=5) == 0  # taken once the holder had ended
        assert said == [
            "waiting for the shard processes of an earlier med-evals run of this log folder to "
            f"end (its command, pid {gone}, has ended; pids {holder.pid})"]
        record = Owner.read((tmp_path / FOLDER / NAME).read_text())
        assert record is not None and record.pid == os.getpid()
    finally:
        lock.release()


def test_shards_that_outlast_the_wait_are_named(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_module, "GRACE", 1.0)
    gone = _gone_pid()
    holder = _holder(tmp_path, gone, 60)
    try:
        with pytest.raises(CommandError) as refused:
            lock_for(str(tmp_path), "med-evals run healthfc", lambda line: None)
        assert str(refused.value) == (
            f"{tmp_path}: the lock of an earlier med-evals run is still held 1 s after its "
            f"command (pid {gone}) ended; stop them (kill {holder.pid}) and run the same command "
            "again")
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_owners_lock_file_is_no_lock(tmp_path):
    """The file a killed run leaves names a dead pid, but nothing holds it: taken at once,
    without a word."""
    (tmp_path / FOLDER).mkdir()
    gone = Owner("x", os.uname().nodename, _gone_pid(), "med-evals run", "2026-12-01 10:00:00")
    (tmp_path / FOLDER / NAME).write_text(gone.text())
    said: list[str] = []
    lock = lock_for(str(tmp_path), "med-evals run healthfc", said.append)
    try:
        assert said == []
        record = Owner.read((tmp_path / FOLDER / NAME).read_text())
        assert record is not None and record.pid == os.getpid()
    finally:
        lock.release()
    # released: the next run takes it
    lock_for(str(tmp_path), "again", said.append).release()


def test_the_lock_is_held_by_the_processes_it_is_handed_to(tmp_path):
    """A shard process keeps the command's descriptor: the lock is the run's until the last of
    its processes has ended, the command's release notwithstanding."""
    lock = lock_for(str(tmp_path), "med-evals run healthfc", print)
    [fd] = lock.inherit()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             pass_fds=(fd,))
    lock.started([child.pid])
    lock.release()
    try:
        with pytest.raises(CommandError, match="another med-evals run is writing"):
            lock_for(str(tmp_path), "second", print)
    finally:
        child.kill()
        child.wait()
    lock_for(str(tmp_path), "third", print).release()


# --- the lock on S3 -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


def test_s3_lock_refused_taken_over_and_released(s3, monkeypatch):
    uri = s3.make_bucket("run-lock") + "/healthfc"
    key = f"{uri}/{FOLDER}/{NAME}"
    said: list[str] = []
    first = lock_for(uri, "med-evals run healthfc", said.append)
    assert s3.keys(uri) == [f"healthfc/{FOLDER}/{NAME}"]
    with pytest.raises(CommandError) as refused:  # its owner is this process, alive
        lock_for(uri, "second", said.append)
    assert str(refused.value) == _in_use(uri, os.getpid(), first.owner.started)
    first.beat()
    assert not first.lost
    first.release()
    assert s3.keys(uri) == []  # released: deleted
    # an owner on another machine, heartbeat fresh: refused, saying when it is taken over
    elsewhere = Owner("y", "elsewhere", 4242, "med-evals run", "2026-12-01 10:00:00")
    s3.put(key, elsewhere.text().encode())
    with pytest.raises(CommandError) as refused:
        lock_for(uri, "third", said.append)
    text = str(refused.value)
    assert text.startswith(f"{uri}: another med-evals run is writing into this log folder (pid "
                           "4242 on elsewhere, started 2026-12-01 10:00:00, last heartbeat ")
    assert text.endswith(" s ago; a lock whose heartbeat stops is taken over after 120 s); one "
                         "run per log folder at a time: wait for it to end, or stop it on "
                         "elsewhere and run the same command again to resume")
    # its heartbeat stopped: stale, taken over
    monkeypatch.setattr(lock_module, "EXPIRY", 1.0)
    time.sleep(2.5)
    taken = lock_for(uri, "fourth", said.append)
    try:
        [note] = said
        age = note.split("its last heartbeat ")[1].split(" s ago")[0]
        assert note == (f"note: took over the lock {key} of an earlier med-evals run (pid 4242 on "
                        f"elsewhere, started 2026-12-01 10:00:00): its last heartbeat {age} s ago "
                        "(stale after 1 s)")
        assert int(age) >= 2
        assert json.loads(s3.client().get_object(Bucket="run-lock", Key=key.split("run-lock/")[1])
                          ["Body"].read())["id"] == taken.owner.id
        # taken over from under its owner: the owner's next heartbeat says so
        s3.put(key, elsewhere.text().encode())
        taken.beat()
        assert taken.lost
    finally:
        taken.release()
    assert s3.keys(uri) == [f"healthfc/{FOLDER}/{NAME}"]  # not ours to delete any more
    # an owner of this machine none of whose processes is running: taken over at once
    gone = Owner("z", os.uname().nodename, _gone_pid(), "med-evals run", "2026-12-01 11:00:00")
    s3.put(key, gone.text().encode())
    said.clear()
    monkeypatch.setattr(lock_module, "EXPIRY", 120.0)
    lock_for(uri, "fifth", said.append).release()
    assert said == [f"note: took over the lock {key} of an earlier med-evals run (pid {gone.pid}, "
                    "started 2026-12-01 11:00:00): none of its processes is running"]


# --- whole runs ---------------------------------------------------------------------------------

def _run_argv(claims: Path, logs: str, server: FakeOpenAIServer, *extra: str) -> list[str]:
    return ["run", "healthfc", "--processes", "2", "--log-dir", logs, "-T", f"data_file={claims}",
            "-T", "generation_scoring=false", *FAKE, "--model-base-url", server.base_url,
            "--max-connections", "1", *extra]


def _command(argv: list[str]) -> subprocess.Popen[str]:
    """``med-evals ARGV`` in a process of its own (its own session: killed alone)."""
    return subprocess.Popen([sys.executable, "-m", "med_evals.commands.cli", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _owner_is(read, pid: int, timeout: float = 120) -> Owner:  # noqa: ANN001
    """The lock's record once it names ``pid`` and its two shard processes."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            record = Owner.read(read())
        except Exception:  # noqa: BLE001 - not there yet (a file, an S3 object)
            record = None
        if record is not None and record.pid == pid and len(record.processes) == 3:
            return record
        time.sleep(0.2)
    raise AssertionError(f"the lock never named pid {pid}")


@pytest.mark.slow
def test_a_second_run_into_a_folder_is_refused_and_the_first_pays_once(tmp_path, monkeypatch,
                                                                        capsys):
    monkeypatch.setenv("FAKE_API_KEY", "local")
    claims = healthfc_csv(tmp_path / "claims.csv", n=20)
    logs = tmp_path / "logs"
    with FakeOpenAIServer(reply=verdict_reply, latency=0.3) as server:
        argv = _run_argv(claims, str(logs), server)
        first = _command(argv)
        record = _owner_is(lambda: (logs / FOLDER / NAME).read_text(), first.pid)
        assert cli_main(argv) == 2  # the same command again, while the first runs
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            "med-evals run: error: " + _in_use(str(logs), first.pid, record.started))
        server.latency = 0.0  # refused: the first run may now finish quickly
        out, _ = first.communicate(timeout=240)
        assert first.returncode == 0, out
        assert server.counts["ok"] == 20  # paid once
    # two shard logs (Inspect's shard layout: <name>.shards/<k>/) and the merged log
    assert len(list(logs.glob("*.shards/*/*.eval"))) == 2 and len(list(logs.glob("*.eval"))) == 1


def _samples_in(folder: Path) -> list[int]:
    """The samples each shard's log holds so far (each in its own folder)."""
    import zipfile

    counts = []
    for path in folder.glob("*.shards/*/*.eval"):
        try:
            with zipfile.ZipFile(path) as z:
                counts.append(sum(1 for x in z.namelist() if x.startswith("samples/")))
        except (OSError, zipfile.BadZipFile):
            counts.append(0)
    return counts


@pytest.mark.slow
def test_a_killed_command_takes_its_shards_with_it_and_a_rerun_resumes_them(tmp_path,
                                                                            monkeypatch, capsys):
    """SIGKILL to the command: its shards end too (each log closed as cancelled, its samples
    kept); the same command at once resumes both, asking only for the samples no log kept."""
    monkeypatch.setenv("FAKE_API_KEY", "local")
    claims = healthfc_csv(tmp_path / "claims.csv", n=40)
    logs = tmp_path / "logs"
    with FakeOpenAIServer(reply=verdict_reply, latency=0.3) as server:
        argv = _run_argv(claims, str(logs), server, "--log-buffer", "2")
        command = _command(argv)
        _owner_is(lambda: (logs / FOLDER / NAME).read_text(), command.pid)
        shards = psutil.Process(command.pid).children()
        assert len(shards) == 2
        deadline = time.time() + 120
        # both shards well under way (a shard killed while Inspect still starts aborts before
        # its log can say cancelled: under load one shard can start long after the other)
        while not ((c := _samples_in(logs)) and len(c) == 2 and min(c) >= 3) \
                and time.time() < deadline:
            time.sleep(0.1)
        os.kill(command.pid, signal.SIGKILL)
        command.communicate(timeout=30)
        _, alive = psutil.wait_procs(shards, timeout=90)
        assert alive == []  # the shards ended with their command
        statuses = sorted(read_eval_log(str(p), header_only=True).status
                          for p in logs.glob("*.shards/*/*.eval"))
        assert statuses == ["cancelled", "cancelled"]  # each closed as Ctrl-C closes it
        # the samples each cancelled log kept done (one in flight at the cancel is logged too,
        # with its error: a retry runs it again)
        done = [s for p in logs.glob("*.shards/*/*.eval")
                for s in read_eval_log(str(p)).samples or []]
        kept = sum(1 for s in done if s.error is None)
        assert kept >= 6 - 2
        server.latency = 0.0  # the re-run need not be slow: nothing is killed in it
        asked = server.counts["ok"]
        assert cli_main(argv) == 0  # at once: nothing of the killed run still runs
        out, _ = capsys.readouterr()
        assert server.counts["ok"] - asked == 40 - kept  # only what no log kept
        assert sum("(inspect eval-retry)" in line for line in out.splitlines()) == 2
        assert "healthfc / openai-api/fake/fake: 40 samples in 2 shard log(s)" in out
        # what the run paid over its shards' attempts: shards are not attempts
        assert out.splitlines()[-1].startswith("paid over 2 shards in 4 attempts: input tokens "
                                               "at least ")


@pytest.mark.slow
def test_two_identical_runs_into_one_store_pay_once(tmp_path, monkeypatch, capsys, s3):
    monkeypatch.setenv("FAKE_API_KEY", "local")
    claims = healthfc_csv(tmp_path / "claims.csv", n=20)
    store = s3.make_bucket("team-runs") + "/healthfc"
    monkeypatch.chdir(tmp_path)  # the shards' output files: here, for an s3:// folder
    with FakeOpenAIServer(reply=verdict_reply, latency=0.3) as server:
        argv = _run_argv(claims, store, server)
        first = _command(argv)
        bucket, _, key = f"{store}/{FOLDER}/{NAME}".removeprefix("s3://").partition("/")

        def read() -> bytes:
            return s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()

        record = _owner_is(read, first.pid)
        assert cli_main(argv) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            "med-evals run: error: " + _in_use(store, first.pid, record.started))
        server.latency = 0.0  # refused: the first run may now finish quickly
        out, _ = first.communicate(timeout=240)
        assert first.returncode == 0, out
        assert server.counts["ok"] == 20
    logs = [k for k in s3.keys(store) if k.endswith(".eval")]
    # one run: two shards (each in <name>.shards/<k>/) and their merged log
    assert len([k for k in logs if ".shards/" in k]) == 2 and len(logs) == 3
    assert not any(k.endswith(f"{FOLDER}/{NAME}") for k in s3.keys(store))  # released
