"""``med-evals run TASK --processes N [inspect eval flags]``: every core on one run.

Starts ``N`` ``inspect eval`` processes on this machine, one shard each (``-T shard=i/N``:
:mod:`med_evals.study.shards`), into one log folder (Inspect's shard layout: shard ``k`` in
``<log_dir>/<task>-<run key>.shards/<k>/``, and once every shard finished the merged log
``<log_dir>/<task>-<run key>.eval`` beside them, which ``inspect view`` shows as the run:
:mod:`med_evals.commands.merge_shards`), with the settings measured fastest (``--no-log-
realtime``, ``--no-score-display``, ``--display none``: docs/performance.md); the flags given
after the task go to every process unchanged (a flag given there wins over ours). While they
run, one progress line for the whole run, from the samples the shards' logs hold so far (each
``.eval`` log is a zip file written whole at each flush: its ``samples/`` entries are counted,
nothing is decompressed). At the end: exit 0 and the merged run's headline when every shard
finished (its logs read back as one run, as ``med-evals report`` reads them); else exit 1 naming
each shard that did not finish, its log and the end of its output.

**Run again to resume.** The processes' logs carry the run's key (``--metadata
med_evals_run=<key>``: :func:`run_key`, a digest of the task and every flag given but those
that only say how calls are made, :data:`CALL_OPTIONS`). Run the same command again and each
shard is, by its logs in the folder: finished (a log with status ``success``): reused, no
process started; unfinished (killed, cancelled, errored): resumed with ``inspect eval-retry``,
which keeps the samples its log holds and runs the others; absent: run. A command with another
flag (another model, temperature, ``-T`` argument) is another run, with its own key.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from inspect_ai.log import read_eval_log

from med_evals.commands.interrupts import sigterm_as_ctrl_c
from med_evals.commands.merge_shards import (
    merge_shard_set,
    merged_log_path,
    read_back,
    shard_folder,
    shards_dir,
)
from med_evals.logs.files import LogPathError, exists, is_remote, list_log_files, log_name, mtime
from med_evals.logs.runs import shard_of
from med_evals.outputs.exit_codes import FAILED, OK, CommandError
from med_evals.outputs.text import terminal
from med_evals.study.params import Shard
from med_evals.study.shards import SHARD_ARG
from med_evals.tasks import STUDIES

#: the tasks of this package that take ``-T shard=i/N`` (each study, and the counterfactual
#: builder)
SHARDED_TASKS = (*STUDIES, "counterfactual_build")
#: what every process is given first (docs/performance.md: the fastest settings that keep the
#: log every reader needs); a flag of the user's given after them wins
FASTEST = ("--no-log-realtime", "--no-score-display", "--display", "none")
#: the eval metadata key holding the run's key (:func:`run_key`)
RUN_KEY = "med_evals_run"
#: options (with a value) that say how calls are made, not what is computed: left out of the
#: run's key (a resumed run may change them) and passed to ``inspect eval-retry`` too
CALL_OPTIONS = frozenset({
    "--max-connections", "--max-samples", "--max-subprocesses", "--max-sandboxes",
    "--max-retries", "--timeout", "--attempt-timeout", "--log-buffer", "--log-level",
    "--display",
})
#: flags (no value) of the same kind
CALL_FLAGS = frozenset({"--no-log-realtime", "--no-score-display", "--traceback-locals"})
#: Inspect's options that choose samples: each process runs its whole shard
REFUSED = {
    "--limit": "each process runs its whole shard; choose the samples with -T subset=...",
    "--sample-id": "each process runs its whole shard; choose the samples with -T subset=...",
}
#: seconds between progress lines: in place on a terminal, else one line now and then
PROGRESS_TTY, PROGRESS_PIPE = 1.0, 30.0
#: lines of a failed process's output shown
TAIL_LINES = 3
#: the folder of each process's output (in the log folder, or here for an s3:// one)
OUTPUTS = ".med-evals-run"


def task_spec(task: str) -> str:
    """The task as ``inspect eval`` takes it: ``healthfc`` -> ``med_evals/healthfc``; a
    package task of another name, a file (``x.py@task``) or another package's task as given."""
    if "/" in task or "@" in task or task.endswith(".py"):
        return task
    if task in SHARDED_TASKS:
        return f"med_evals/{task}"
    close = difflib.get_close_matches(task, SHARDED_TASKS, n=1)
    hint = f"; did you mean {close[0]}?" if close else f" ({', '.join(SHARDED_TASKS)})"
    raise CommandError(f"{task}: not a med_evals task that takes -T shard=i/N{hint}")


def _option(arg: str) -> str:
    return arg.split("=", 1)[0]


def check_flags(flags: Sequence[str]) -> None:
    """:class:`CommandError` for a flag this command sets itself (``-T shard=``) or that would
    leave samples out of a shard (``--limit``, ``--sample-id``)."""
    for i, arg in enumerate(flags):
        if _option(arg) in REFUSED:
            raise CommandError(f"{arg}: {REFUSED[_option(arg)]}")
        value = flags[i + 1] if i + 1 < len(flags) else ""
        if arg in ("-T", "--task-arg") and value.split("=", 1)[0].strip() == SHARD_ARG:
            raise CommandError(f"-T {value}: med-evals run gives each process its shard; "
                               "leave it out (or run inspect eval -T shard=i/N yourself)")


def call_settings(flags: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the flags that say what is computed, the call settings: :data:`CALL_OPTIONS` with
    their values and :data:`CALL_FLAGS`)."""
    run, call = [], []
    i = 0
    while i < len(flags):
        arg = flags[i]
        if arg in CALL_FLAGS:
            call.append(arg)
        elif _option(arg) in CALL_OPTIONS:
            takes = "=" not in arg and i + 1 < len(flags)
            call += flags[i:i + 2] if takes else [arg]
            i += 1 if takes else 0
        else:
            run.append(arg)
        i += 1
    return run, call


def run_key(task: str, flags: Sequence[str], count: int,
            environ: Mapping[str, str] | None = None) -> str:
    """The run's key: a digest of the task, the number of shards, the flags that say what is
    computed (in order; not the call settings: :func:`call_settings`) and Inspect's
    ``INSPECT_EVAL_*`` environment variables (``INSPECT_EVAL_MODEL``, ...)."""
    env = os.environ if environ is None else environ
    inspect_env = sorted((k, v) for k, v in env.items() if k.startswith("INSPECT_EVAL_"))
    run, _ = call_settings(flags)
    text = json.dumps([task, count, run, inspect_env])
    return "r" + hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class ShardLog:
    """One log in the folder of a shard of this run (:func:`shard_logs`)."""

    path: str
    shard: Shard
    status: str
    created: str
    task_id: str


def shard_logs(log_dir: str, key: str) -> dict[int, list[ShardLog]]:
    """Shard index -> the logs of this run's shard in ``log_dir`` (headers only), oldest
    first."""
    out: dict[int, list[ShardLog]] = {}
    try:
        found = list_log_files([log_dir])
    except LogPathError as ex:  # a store that cannot be listed (s3://: unreachable, refused)
        raise CommandError(str(ex)) from None
    for log_file in found:
        try:
            header = read_eval_log(log_file.name, header_only=True)
        except Exception:  # noqa: BLE001 - a file that is not a log of ours is not a shard
            continue
        if (header.eval.metadata or {}).get(RUN_KEY) != key:
            continue
        shard = shard_of({"task_args": header.eval.task_args})
        if shard is None:
            continue
        out.setdefault(shard.index, []).append(ShardLog(
            log_file.name, shard, header.status, header.eval.created or "",
            header.eval.task_id))
    for logs in out.values():
        logs.sort(key=lambda x: x.created)
    return out


def finished(logs: Sequence[ShardLog]) -> ShardLog | None:
    done = [x for x in logs if x.status == "success"]
    return done[-1] if done else None


def _local(path: str) -> str:
    return path.removeprefix("file://")


@dataclass
class Process:
    """A shard's process: its command, its output file, and the log it resumes, if any."""

    shard: Shard
    command: list[str]
    output: Path
    resumes: str | None = None
    proc: subprocess.Popen[bytes] | None = None


def inspect_command() -> list[str]:
    """This environment's Inspect (the one med_evals is installed in)."""
    return [sys.executable, "-m", "inspect_ai"]


def layout_name(task: str, key: str) -> str:
    """The run's name in Inspect's shard layout: ``<task>-<run key>`` (its shards' logs in
    ``<log_dir>/<name>.shards/<k>/``, the merged log ``<log_dir>/<name>.eval``)."""
    return f"{task.split('@')[-1].split('/')[-1].removesuffix('.py')}-{key}"


def commands(task: str, count: int, flags: Sequence[str], log_dir: str, key: str,
             logs: Mapping[int, Sequence[ShardLog]], out_dir: Path) -> tuple[
                 list[Process], list[ShardLog]]:
    """(a process for each shard that has not finished, each shard's finished log). Shard
    ``k`` runs (and resumes) into its own folder, ``<log_dir>/<name>.shards/<k>``
    (:func:`layout_name`)."""
    _, call = call_settings(flags)
    todo, done = [], []
    name = layout_name(task, key)
    for i in range(1, count + 1):
        shard = Shard(i, count)
        mine = logs.get(i, [])
        folder = shard_folder(log_dir, name, i)
        output = out_dir / f"{key}-shard-{i}-of-{count}.txt"
        if (log := finished(mine)) is not None:
            done.append(log)
        elif mine:  # killed, cancelled or errored: its samples are kept
            resumes = _local(mine[-1].path)
            todo.append(Process(shard, [*inspect_command(), "eval-retry", "--log-dir", folder,
                                        *FASTEST, *call, resumes], output, resumes))
        else:
            todo.append(Process(shard, [
                *inspect_command(), "eval", task, "-T", f"{SHARD_ARG}={shard}",
                "--log-dir", folder, "--metadata", f"{RUN_KEY}={key}", *FASTEST, *flags,
            ], output))
    return todo, done


@dataclass
class Progress:
    """The samples the shards' logs hold so far: each log's count, read again only when the
    file changed; each log's shard and total, read once from its header."""

    key: str
    log_dir: str
    since: float
    #: the shards running now (the logs of the others are not counted: they are in ``base``)
    shards: set[int] = field(default_factory=set)
    base: int = 0  # samples of the shards already finished before this command
    seen: dict[str, tuple[float, int]] = field(default_factory=dict)
    totals: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (shard, total)
    skip: set[str] = field(default_factory=set)

    def _total(self, path: Path) -> tuple[int, int] | None:
        name = str(path)
        if name in self.skip:
            return None
        if name not in self.totals:
            try:
                header = read_eval_log(name, header_only=True)
            except Exception:  # noqa: BLE001 - not written far enough yet: next time
                return None
            shard = shard_of({"task_args": header.eval.task_args})
            if ((header.eval.metadata or {}).get(RUN_KEY) != self.key or shard is None
                    or shard.index not in self.shards):
                self.skip.add(name)
                return None
            epochs = header.eval.config.epochs or 1
            self.totals[name] = (shard.index, (header.eval.dataset.samples or 0) * epochs)
        return self.totals[name]

    def done(self) -> tuple[int, int] | None:
        """(samples logged, samples known so far) over the shards running now; None for a
        log folder that is not on this machine (``s3://``: not read while the run runs)."""
        if is_remote(self.log_dir):
            return None
        per_shard: dict[int, tuple[int, int]] = {}
        folder = Path(self.log_dir)
        for path in folder.rglob("*.eval") if folder.is_dir() else []:
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            if mtime < self.since:
                continue
            total = self._total(path)
            if total is None:
                continue
            name = str(path)
            old = self.seen.get(name)
            if old is None or old[0] != mtime:
                try:
                    with zipfile.ZipFile(path) as z:  # a sample written again: one entry
                        n = len({x for x in z.namelist() if x.startswith("samples/")})
                except (OSError, zipfile.BadZipFile):
                    n = old[1] if old else 0
                self.seen[name] = (mtime, n)
            n = self.seen[name][1]
            shard, size = total
            best = per_shard.get(shard, (0, size))
            # a retry's log holds the killed one's samples; never more than the shard's
            per_shard[shard] = (min(max(best[0], n), size), size)
        return (sum(n for n, _ in per_shard.values()),
                sum(size for _, size in per_shard.values()))


def progress_line(task: str, samples: tuple[int, int] | None, running: int, finished_: int,
                  count: int, elapsed: float) -> str:
    """``healthfc: 412 of 750 samples (54%), 2 of 2 shards running, 14 s`` (``samples``: done
    and known so far; None: not read, a remote log folder)."""
    parts = [f"{running} of {count} shards running"]
    if finished_:
        parts.append(f"{finished_} finished")
    if samples is not None:
        done, known = samples
        of = f" of {known} samples ({100 * done // known}%)" if known else " samples"
        parts.insert(0, f"{done}{of}")
    return f"{task}: {', '.join(parts)}, {elapsed:.0f} s"


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [x.strip() for x in text.splitlines() if x.strip()]
    return " | ".join(kept[-lines:])


def _stop(processes: Sequence[Process]) -> None:
    """Ctrl-C (or a SIGTERM) to every running shard: Inspect closes its log as cancelled."""
    for p in processes:
        if p.proc is not None and p.proc.poll() is None:
            p.proc.send_signal(signal.SIGINT)
    for p in processes:
        if p.proc is not None:
            try:
                p.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.proc.kill()


def start(processes: Sequence[Process], env: Mapping[str, str]) -> None:
    for p in processes:
        p.output.parent.mkdir(parents=True, exist_ok=True)
        with p.output.open("wb") as out:
            # a session of its own: a Ctrl-C at the terminal reaches this command only, which
            # passes it on once (a second one would stop Inspect before it closes its log)
            p.proc = subprocess.Popen(p.command, stdout=out, stderr=subprocess.STDOUT,
                                      env=dict(env), stdin=subprocess.DEVNULL,
                                      start_new_session=True)


def wait(processes: Sequence[Process], progress: Progress, task: str, count: int,
         stream: IO[str], interval: float | None = None) -> None:
    """Wait for every process, printing the progress line every ``interval`` seconds (in
    place on a terminal)."""
    tty = stream.isatty()
    every = interval if interval is not None else (PROGRESS_TTY if tty else PROGRESS_PIPE)
    begun = time.monotonic()
    last = 0.0
    finished_before = count - len(processes)

    def show(final: bool = False) -> None:
        logged = progress.done()
        samples = (logged[0] + progress.base, logged[1] + progress.base) if logged else None
        running = sum(1 for p in processes if p.proc is not None and p.proc.poll() is None)
        ended = finished_before + len(processes) - running
        line = progress_line(task, samples, running, ended, count, time.monotonic() - begun)
        stream.write(("\r" + line + ("\n" if final else "")) if tty else line + "\n")
        stream.flush()

    while any(p.proc is not None and p.proc.poll() is None for p in processes):
        now = time.monotonic()
        if now - last >= every:
            show()
            last = now
        time.sleep(0.2)
    show(final=True)


@dataclass
class Outcome:
    """What the command found at the end: each shard's finished log, the shards that did not
    finish (one line each), and the lines to print."""

    logs: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def outcome(task: str, count: int, log_dir: str, key: str,
            processes: Sequence[Process]) -> Outcome:
    """Each shard's finished log, or a line naming the shard, its newest log and the end of
    its process's output."""
    logs = shard_logs(log_dir, key)
    by_shard = {p.shard.index: p for p in processes}
    out = Outcome()
    for i in range(1, count + 1):
        mine = logs.get(i, [])
        if (log := finished(mine)) is not None:
            out.logs.append(log.path)
            continue
        proc = by_shard.get(i)
        where = f"log {_local(mine[-1].path)} (status {mine[-1].status})" if mine else "no log"
        code = (f", exit {proc.proc.returncode}" if proc and proc.proc
                and proc.proc.returncode else "")
        said = ""
        if proc is not None:
            tail = _tail(proc.output)
            said = (f"; its output ({proc.output}) ends: {tail}" if tail
                    else f"; its output: {proc.output}")
        out.failed.append(f"shard {i}/{count} of {task} did not finish: {where}{code}{said}")
    return out


def headline_line(logs: Sequence[str]) -> str:
    """The merged run's headline (its logs read back as one run, as ``med-evals report``
    does), or :class:`CommandError` (exit 1) when they are not one whole run."""
    runs, skipped = read_back(logs)
    if len(runs) != 1 or runs[0].partial:
        why = "; ".join([*(f"{r.task} / {r.model}: {r.partial or 'a run'}" for r in runs),
                         *skipped]) or "no run read"
        raise CommandError(f"the shards' logs do not read back as one whole run: {why}", FAILED)
    run = runs[0]
    values = run.headline_values()
    numbers = ", ".join(f"{h.name} {values[h.name]:.3f}" for h in run.study.headline
                        if h.name in values)
    return (f"{run.task} / {run.model}: {len(run.values)} samples in {len(logs)} shard log(s), "
            f"read as one run: {numbers}")


def launch(task: str, processes: int, flags: Sequence[str], log_dir: str,
           stream: IO[str] | None = None, out: Callable[[str], None] = print,
           interval: float | None = None) -> int:
    """The command (see the module's docstring); returns its exit code. ``stream``: where the
    progress line goes (default: stderr)."""
    if processes < 1:
        raise CommandError(f"--processes {processes}: at least 1")
    check_flags(flags)
    spec = task_spec(task)
    name = spec.split("@")[-1].split("/")[-1].removesuffix(".py")
    key = run_key(spec, flags, processes)
    logs = shard_logs(log_dir, key)
    # each process's output: beside its logs, or here for a log folder elsewhere (s3://)
    work = Path.cwd() / OUTPUTS if is_remote(log_dir) else Path(log_dir) / OUTPUTS
    todo, done = commands(spec, processes, flags, log_dir, key, logs, work)
    for log in done:
        out(terminal(f"shard {log.shard} finished before: {_local(log.path)} (reused)"))
    for p in todo:
        if p.resumes:
            out(terminal(f"shard {p.shard} resumed from {p.resumes} (inspect eval-retry)"))
    if todo:
        progress = Progress(key, log_dir, time.time() - 1.0, {p.shard.index for p in todo})
        progress.base = sum(_samples(x.path) for x in done)
        try:
            with sigterm_as_ctrl_c():
                start(todo, os.environ)
                wait(todo, progress, name, processes, stream or sys.stderr, interval)
        except KeyboardInterrupt:
            _stop(todo)
            result = outcome(name, processes, log_dir, key, todo)
            for line in result.failed:
                out(terminal(line))
            out("interrupted: run the same command again to resume")
            return FAILED
    result = outcome(name, processes, log_dir, key, todo)
    if result.failed:
        for line in result.failed:
            out(terminal(line))
        out(terminal(f"{len(result.failed)} of {processes} shards did not finish; run the same "
                     "command again to resume them (the finished shards are kept)"))
        return FAILED
    if name in STUDIES:
        out(terminal(headline_line(result.logs)))
    else:  # not a study (counterfactual_build, a task of a file): no headline to read
        out(terminal(f"{name}: all {processes} shards finished: {', '.join(result.logs)}"))
    out(terminal(merged_line(log_dir, layout_name(spec, key), processes, result.logs)))
    return OK


def merged_line(log_dir: str, name: str, count: int, logs: Sequence[str]) -> str:
    """The merged log (Inspect's shard layout: :mod:`med_evals.commands.merge_shards`)
    written, or kept where it already covers the finished shard logs ``logs`` (a run again);
    else why none was written (a shard's finished log outside its folder: a run begun before
    this layout)."""
    folder = shards_dir(log_dir, name)
    merged = merged_log_path(folder)
    try:
        header = read_eval_log(merged, header_only=True) if exists(merged) else None
    except Exception:  # noqa: BLE001 - an unreadable merged log is written again
        header = None
    if header is not None and header.status == "success" and header.eval.shards and sorted(
            e.log for e in header.eval.shards.ledger) == sorted(log_name(p) for p in logs) and (
            mtime(merged) > max(mtime(p) for p in logs)):
        return f"merged log (what inspect view shows): {_local(merged)} (reused)"
    try:
        written = merge_shard_set(folder, count)
    except CommandError as ex:
        return f"no merged log written: {ex}"
    return f"merged log (what inspect view shows): {_local(written)}"


def _samples(path: str) -> int:
    """The samples (times epochs) of a finished log, from its header."""
    try:
        header = read_eval_log(path, header_only=True)
    except Exception:  # noqa: BLE001 - only the progress line's count
        return 0
    return (header.eval.dataset.samples or 0) * (header.eval.config.epochs or 1)


# --- the command line --------------------------------------------------------------------------

def default_processes() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a task in N processes, one shard each, into one log folder; run again to "
        "resume",
        description="Run a task in N `inspect eval` processes on this machine, one shard each "
        "(-T shard=i/N), into one log folder, with the fastest settings (--no-log-realtime, "
        "--no-score-display, --display none); one progress line; the merged run's headline at "
        "the end. Run the same command again to resume: finished shards are kept, unfinished "
        "ones resumed (inspect eval-retry).",
        epilog="Flags after the task go to every `inspect eval` process (--model, -T, "
        "--max-connections, ...). Exit 0 when every shard finished, 1 when one did not "
        "(named, with its log), 2 for a bad argument. docs/scale.md",
    )
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help=f"processes, one shard each (default: this machine's cores, "
                   f"{default_processes()})")
    p.add_argument("--log-dir", default=None,
                   help="folder for the shards' logs (default $INSPECT_LOG_DIR, else ./logs)")
    p.add_argument("task", help="the task: healthfc, med_evals/healthfc, ...")
    p.add_argument("inspect_flags", nargs=argparse.REMAINDER,
                   help="inspect eval flags, given to every process")
    p.set_defaults(func=cli)


def _own_options(flags: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """``--processes`` and ``--log-dir`` given after the task, and the other flags."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    own.add_argument("--processes", type=int)
    own.add_argument("--log-dir")
    args, rest = own.parse_known_args(list(flags))
    return args, rest


def cli(args: argparse.Namespace) -> int:
    own, flags = _own_options(args.inspect_flags)
    given = [n for n in (own.processes, args.processes) if n is not None]
    processes = given[0] if given else default_processes()
    log_dir = own.log_dir or args.log_dir or os.environ.get("INSPECT_LOG_DIR") or "logs"
    return launch(args.task, processes, flags, log_dir)

