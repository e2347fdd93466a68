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
nothing is decompressed); a shard counts as finished only once its log says ``success``. At the
end: exit 0 and the merged run's headline when every shard finished (its logs read back as one
run, as ``med-evals report`` reads them; after a resume, what its attempts paid); else exit 1
naming each shard that did not finish, its log and the end of its output, and whether running
the same command again resumes it.

**Checked before any process starts** (:func:`check_before`), each a one-line error, exit 2:
the flags this command sets itself or that would leave samples out of a shard; ``--processes``
above :func:`max_processes`; every flag as ``inspect eval`` parses it (an unknown option, a
bad value); a second task or model; no model for a task of ours; and, for a task of ours, the
task built here with its ``-T`` arguments (a bad argument or data file is its own line), which
also gives the run's items: more processes than items is refused (without ``--processes``, the
run takes one process per item at most).

**One writer per log folder** (:mod:`med_evals.commands.lock`): the command takes the folder's
lock before it reads the folder's logs, and its shard processes hold it too; a second run into
the folder is refused while the first runs (exit 2), and a dead owner's lock is released (a
local one by the kernel, an ``s3://`` one when its heartbeat stops). The shard processes end
with the command, however it ends (:mod:`med_evals.commands.shard_process`).

**Run again to resume.** The processes' logs carry the run's key (``--metadata
med_evals_run=<key>``: :func:`run_key`, a digest of the task and every flag given but those
that only say how calls are made, :data:`CALL_OPTIONS`). Run the same command again and each
shard is, by its logs in the folder: finished (a log with status ``success``): reused, no
process started; unfinished (killed, cancelled, errored): resumed with ``inspect eval-retry``,
which keeps the samples its log holds and runs the others; absent: run. A shard whose process
stopped before it wrote any log (a cause the command could not check: an API key or base URL
not set) is not offered a resume: running it again as it is would stop it the same way. A
command with another flag (another model, temperature, ``-T`` argument) is another run, with its
own key.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect as pyinspect
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from inspect_ai.log import read_eval_log

from med_evals.commands.interrupts import sigterm_as_ctrl_c
from med_evals.commands.lock import FolderLock, lock_for
from med_evals.commands.merge_shards import (
    merge_shard_set,
    merged_log_path,
    read_back,
    shard_folder,
    shards_dir,
)
from med_evals.logs.files import LogPathError, exists, is_remote, list_log_files, log_name, mtime
from med_evals.logs.runs import load_runs, shard_of
from med_evals.outputs.exit_codes import FAILED, OK, USAGE, CommandError
from med_evals.outputs.text import terminal
from med_evals.study.params import Shard
from med_evals.study.shards import SHARD_ARG
from med_evals.tasks import STUDIES
from med_evals.tasks.counterfactual import counterfactual_build
from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

#: the tasks of this package that take ``-T shard=i/N`` (each study, and the counterfactual
#: builder), by name: built here before any process starts (:func:`check_task`)
TASKS: dict[str, Callable[..., Any]] = {
    "oncology_rct": oncology_rct, "medevidence": medevidence, "medreqal": medreqal,
    "healthfc": healthfc, "counterfactual_build": counterfactual_build,
}
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
#: processes per core at most: each is a whole ``inspect eval`` (its start-up, its memory, its
#: own ``--max-connections``), so more requests at once come from ``--max-connections``
PER_CORE = 4
#: seconds between progress lines: in place on a terminal, else one line now and then
PROGRESS_TTY, PROGRESS_PIPE = 1.0, 30.0
#: lines of a failed process's output shown
TAIL_LINES = 3
#: the folder of each process's output (in the log folder, or here for an s3:// one)
OUTPUTS = ".med-evals-run"
#: seconds a shard has to close its log after a Ctrl-C before it is killed
STOP_GRACE = 60


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


def task_name(spec: str) -> str:
    """``med_evals/healthfc`` -> ``healthfc``; ``x.py@mine`` -> ``mine``."""
    return spec.split("@")[-1].split("/")[-1].removesuffix(".py")


def _option(arg: str) -> str:
    return arg.split("=", 1)[0]


def default_processes() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def max_processes() -> int:
    """The most processes one run starts here: :data:`PER_CORE` per core."""
    return PER_CORE * default_processes()


# --- checked before any process starts ---------------------------------------------------------

def check_processes(processes: int) -> None:
    """:class:`CommandError` for ``--processes`` below 1 or above :func:`max_processes`."""
    if processes < 1:
        raise CommandError(f"--processes {processes}: at least 1")
    if processes > (most := max_processes()):
        raise CommandError(
            f"--processes {processes}: at most {most} on this machine ({PER_CORE} per core, "
            f"{default_processes()} cores): each process is a whole inspect eval, with its own "
            "start-up, memory and --max-connections; for more requests at once raise "
            "--max-connections")


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


@contextmanager
def dotenv_environ() -> Iterator[None]:
    """The environment ``inspect eval`` sees: this process's, and the values of the ``.env``
    file it loads (the first one up the folder tree) that the process does not set itself."""
    from dotenv import dotenv_values, find_dotenv

    found = find_dotenv(usecwd=True)
    added = {k: v for k, v in (dotenv_values(found) if found else {}).items()
             if v is not None and k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class InspectHelp(Exception):  # noqa: N818 - not an error: --help among the flags
    """``--help`` among the flags: Inspect printed its help (``code``: its exit code)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def inspect_params(spec: str, flags: Sequence[str]) -> dict[str, Any]:
    """The flags as ``inspect eval`` parses them (its own command line, in this process; its
    environment variables and ``.env`` too): the name of each option -> its value. Bad flags
    are a :class:`CommandError`: click's own words."""
    import click

    from med_evals.inspect_internals.compat import inspect_eval_command

    command = inspect_eval_command()
    try:
        ctx = command.make_context("inspect eval", [spec, *flags],
                                   auto_envvar_prefix="INSPECT_EVAL")
    except click.exceptions.Exit as ex:  # --help
        raise InspectHelp(ex.exit_code) from None
    except click.exceptions.NoSuchOption as ex:
        close = f" (did you mean {', '.join(sorted(ex.possibilities))}?)" if ex.possibilities \
            else ""
        raise CommandError(f"{ex.option_name}: not an option of inspect eval{close}; "
                           "med-evals run hands every flag after the task to inspect eval") \
            from None
    except click.UsageError as ex:
        raise CommandError(f"{ex.format_message()} (a flag for inspect eval: med-evals run "
                           "hands every flag after the task to inspect eval)") from None
    return dict(ctx.params)


def check_model(name: str, params: Mapping[str, Any]) -> None:
    """:class:`CommandError` for more than one task or model (each process would run them
    all), or no model for a task of ours (each shard's log would end with status ``error``)."""
    tasks = list(params.get("tasks") or ())
    if len(tasks) > 1:
        raise CommandError(f"{tasks[1]}: med-evals run runs one task (an argument after the task "
                           "goes to inspect eval as another task); run each task by itself")
    model, specs = params.get("model"), list(params.get("model_spec") or ())
    if (model and "," in model) or len(specs) > 1:
        given = f"--model {model}" if model else "--model-spec"
        raise CommandError(f"{given}: med-evals run runs one model; run each model by itself, "
                           "each into its own log folder")
    if name in SHARDED_TASKS and not (model or specs or params.get("run_config")):
        raise CommandError("no model: give --model PROVIDER/MODEL (or set INSPECT_EVAL_MODEL); "
                           "without one each shard's log would end with status error")


def _accepted(fn: Callable[..., Any], args: dict[str, Any]) -> dict[str, Any]:
    """The arguments a task function takes (all of them where it takes ``**kwargs``), as
    Inspect hands them (it drops, with a warning, a parameter the task does not take)."""
    params = pyinspect.signature(fn).parameters.values()
    if any(p.kind is pyinspect.Parameter.VAR_KEYWORD for p in params):
        return dict(args)
    names = {p.name for p in params}
    return {k: v for k, v in args.items() if k in names}


@dataclass
class Items:
    """The run's items (what a shard holds whole: a trial, a question, a sample) and what
    one is called."""

    count: int
    item: str


def check_task(name: str, params: Mapping[str, Any], processes: int,
               say: Callable[[str], None]) -> Items | None:
    """A task of ours (:data:`TASKS`) built here with its ``-T`` arguments as shard 1 of
    ``processes``: what it would refuse (a bad argument, a data file) is a
    :class:`CommandError`, its warnings are ``warning:`` lines; returns the run's items (None:
    not a task of ours, not built)."""
    from med_evals.inspect_internals.compat import PrerequisiteError, parse_cli_config

    fn = TASKS.get(name)
    if fn is None:
        return None
    try:
        args = parse_cli_config(params.get("t"), params.get("task_config"))
    except Exception as ex:  # noqa: BLE001 - a --task-config Inspect cannot read
        raise CommandError(f"-T / --task-config: {ex}") from None
    if SHARD_ARG in args:
        raise CommandError("--task-config names shard: med-evals run gives each process its "
                           "shard; leave it out")
    args = {**_accepted(fn, args), SHARD_ARG: f"1/{processes}"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            task = fn(**args)
        except PrerequisiteError as ex:  # InputError too: a bad argument or data file
            text = str(ex) if isinstance(ex, ValueError) else str(getattr(ex, "message", ex))
            raise CommandError(text.removeprefix("med_evals: ")) from None
        except Exception as ex:  # noqa: BLE001 - what the task's processes would stop on too
            raise CommandError(f"{name} cannot be built with these arguments "
                               f"({type(ex).__name__}: {ex}); no process was started") from None
    for line in dict.fromkeys(str(w.message) for w in caught):
        say(f"warning: {line}")
    record = (task.metadata or {}).get(SHARD_ARG) or {}
    if "partition_items" not in record:
        return None
    return Items(int(record["partition_items"]), str(record.get("item") or "item"))


def check_before(task: str, flags: Sequence[str], processes: int | None,
                 say: Callable[[str], None]) -> tuple[str, int]:
    """Everything that can be checked before any process starts (the module's docstring);
    returns (the task as ``inspect eval`` takes it, the processes to start)."""
    if processes is not None:
        check_processes(processes)
    check_flags(flags)
    spec = task_spec(task)
    name = task_name(spec)
    count = processes if processes is not None else min(default_processes(), max_processes())
    with dotenv_environ():
        params = inspect_params(spec, flags)
        check_model(name, params)
        items = check_task(name, params, count, say)
    if items is not None and count > items.count:
        if processes is not None:
            raise CommandError(
                f"--processes {processes}: the run has {items.count} {items.item}(s) after its "
                f"other selections, so at most {items.count} processes (one shard each)")
        count = items.count
    return spec, count


# --- the run's key and its logs ----------------------------------------------------------------

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
    #: the first line of the error a log with status ``error`` ended with
    error: str | None = None


#: path -> (its write time, the shard log it is, or None: not a log of a shard of the run)
HeaderCache = dict[str, tuple[float, ShardLog | None]]


def shard_logs(log_dir: str, key: str, cache: HeaderCache | None = None) -> dict[
        int, list[ShardLog]]:
    """Shard index -> the logs of this run's shard in ``log_dir`` (headers only), oldest
    first; ``cache``: headers read before, read again only when the file changed."""
    out: dict[int, list[ShardLog]] = {}
    try:
        found = list_log_files([log_dir])
    except LogPathError as ex:  # a store that cannot be listed (s3://: unreachable, refused)
        raise CommandError(str(ex)) from None
    for log_file in found:
        known = cache.get(log_file.name) if cache is not None else None
        if known is not None and known[0] == log_file.mtime and log_file.mtime:
            log = known[1]
        else:
            log = _shard_log(log_file.name, key)
            if cache is not None:
                cache[log_file.name] = (log_file.mtime, log)
        if log is not None:
            out.setdefault(log.shard.index, []).append(log)
    for logs in out.values():
        logs.sort(key=lambda x: x.created)
    return out


def _shard_log(path: str, key: str) -> ShardLog | None:
    try:
        header = read_eval_log(path, header_only=True)
    except Exception:  # noqa: BLE001 - a file that is not a log of ours is not a shard
        return None
    if (header.eval.metadata or {}).get(RUN_KEY) != key:
        return None
    shard = shard_of({"task_args": header.eval.task_args})
    if shard is None:
        return None
    error = header.error.message.strip().splitlines()[0] if header.error and \
        header.error.message.strip() else None
    return ShardLog(path, shard, header.status, header.eval.created or "", header.eval.task_id,
                    error)


def finished(logs: Sequence[ShardLog]) -> ShardLog | None:
    done = [x for x in logs if x.status == "success"]
    return done[-1] if done else None


def _local(path: str) -> str:
    return path.removeprefix("file://")


# --- the processes -----------------------------------------------------------------------------

@dataclass
class Process:
    """A shard's process: its command, its output file, and the log it resumes, if any."""

    shard: Shard
    command: list[str]
    output: Path
    resumes: str | None = None
    proc: subprocess.Popen[bytes] | None = None


def shard_command() -> list[str]:
    """A shard's process: this environment's Inspect (the one med_evals is installed in), run
    by :mod:`med_evals.commands.shard_process`, which ends it with this process."""
    return [sys.executable, "-m", "med_evals.commands.shard_process", str(os.getpid())]


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
            todo.append(Process(shard, [*shard_command(), "eval-retry", "--log-dir", folder,
                                        *FASTEST, *call, resumes], output, resumes))
        else:
            todo.append(Process(shard, [
                *shard_command(), "eval", task, "-T", f"{SHARD_ARG}={shard}",
                "--log-dir", folder, "--metadata", f"{RUN_KEY}={key}", *FASTEST, *flags,
            ], output))
    return todo, done


def start(processes: Sequence[Process], env: Mapping[str, str],
          keep: Sequence[int] = ()) -> None:
    """Start each process, its output into its file; ``keep``: descriptors each keeps open
    (the folder's lock)."""
    for p in processes:
        p.output.parent.mkdir(parents=True, exist_ok=True)
        with p.output.open("wb") as out:
            # a session of its own: a Ctrl-C at the terminal reaches this command only, which
            # passes it on once (a second one would stop Inspect before it closes its log)
            p.proc = subprocess.Popen(p.command, stdout=out, stderr=subprocess.STDOUT,
                                      env=dict(env), stdin=subprocess.DEVNULL,
                                      start_new_session=True, pass_fds=tuple(keep))


def _stop(processes: Sequence[Process]) -> None:
    """Ctrl-C (or a SIGTERM) to every running shard: Inspect closes its log as cancelled."""
    for p in processes:
        if p.proc is not None and p.proc.poll() is None:
            p.proc.send_signal(signal.SIGINT)
    for p in processes:
        if p.proc is not None:
            try:
                p.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait()


# --- while they run ----------------------------------------------------------------------------

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
    headers: HeaderCache = field(default_factory=dict)

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

    def shard_finished(self, process: Process) -> bool:
        """Whether an ended process's shard finished: its process exited 0 and its log says
        ``success`` (Inspect exits 0 for a run that ended with an error, or cancelled)."""
        if process.proc is None or process.proc.returncode != 0:
            return False
        logs = shard_logs(self.log_dir, self.key, self.headers)
        return finished(logs.get(process.shard.index, [])) is not None


def progress_line(task: str, samples: tuple[int, int] | None, running: int, finished_: int,
                  count: int, elapsed: float, unfinished: int = 0) -> str:
    """``healthfc: 412 of 750 samples (54%), 2 of 2 shards running, 14 s`` (``samples``: done
    and known so far; None: not read, a remote log folder); ``finished_``: the shards whose
    log says ``success``, ``unfinished``: those whose process ended otherwise."""
    parts = [f"{running} of {count} shards running"]
    if finished_:
        parts.append(f"{finished_} finished")
    if unfinished:
        parts.append(f"{unfinished} did not finish")
    if samples is not None:
        done, known = samples
        of = f" of {known} samples ({100 * done // known}%)" if known else " samples"
        parts.insert(0, f"{done}{of}")
    return f"{task}: {', '.join(parts)}, {elapsed:.0f} s"


class LockLost(Exception):  # noqa: N818 - the event, as the command names it
    """Another run took the folder's lock over while this one ran."""


def wait(processes: Sequence[Process], progress: Progress, task: str, count: int,
         stream: IO[str], interval: float | None = None,
         lost: Callable[[], bool] = lambda: False) -> None:
    """Wait for every process, printing the progress line every ``interval`` seconds (in
    place on a terminal); :class:`LockLost` where ``lost()`` says the lock is no longer this
    run's."""
    tty = stream.isatty()
    every = interval if interval is not None else (PROGRESS_TTY if tty else PROGRESS_PIPE)
    begun = time.monotonic()
    last = 0.0
    finished_before = count - len(processes)
    ended: dict[int, bool] = {}  # shard index -> finished

    def show(final: bool = False) -> None:
        for p in processes:
            if p.proc is not None and p.proc.poll() is not None and p.shard.index not in ended:
                ended[p.shard.index] = progress.shard_finished(p)
        logged = progress.done()
        samples = (logged[0] + progress.base, logged[1] + progress.base) if logged else None
        running = sum(1 for p in processes if p.proc is not None and p.proc.poll() is None)
        ok = sum(ended.values())
        line = progress_line(task, samples, running, finished_before + ok, count,
                             time.monotonic() - begun, len(ended) - ok)
        stream.write(("\r" + line + ("\n" if final else "")) if tty else line + "\n")
        stream.flush()

    while any(p.proc is not None and p.proc.poll() is None for p in processes):
        if lost():
            raise LockLost
        now = time.monotonic()
        if now - last >= every:
            show()
            last = now
        time.sleep(0.2)
    show(final=True)


# --- at the end --------------------------------------------------------------------------------

def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [x.strip() for x in text.splitlines() if x.strip()]
    return " | ".join(kept[-lines:])


def _names(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


@dataclass
class Outcome:
    """What the command found at the end: each shard's finished log, one line per shard that
    did not finish and can resume (a log to resume from, or a process killed before it wrote
    one), and the lines of the shards whose process stopped before it wrote a log (the same
    command would stop them the same way), with their number."""

    logs: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    not_started: int = 0
    #: every log of the run's shards (the finished ones' earlier attempts too)
    every_log: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [*self.failed, *self.stopped]


def outcome(task: str, count: int, log_dir: str, key: str,
            processes: Sequence[Process]) -> Outcome:
    """Each shard's finished log, or a line naming the shard, its newest log and the end of
    its process's output; shards whose process stopped before it wrote a log, one line per
    cause."""
    logs = shard_logs(log_dir, key)
    by_shard = {p.shard.index: p for p in processes}
    out = Outcome(every_log=[x.path for i in sorted(logs) for x in logs[i]])
    causes: dict[tuple[int, str], list[Process]] = {}
    for i in range(1, count + 1):
        mine = logs.get(i, [])
        if (log := finished(mine)) is not None:
            out.logs.append(log.path)
            continue
        proc = by_shard.get(i)
        code = proc.proc.returncode if proc and proc.proc else None
        if not mine and proc is not None and code is not None and code >= 0:
            causes.setdefault((code, _tail(proc.output)), []).append(proc)
            continue
        if mine:
            error = f": {mine[-1].error}" if mine[-1].error else ""
            where = f"log {_local(mine[-1].path)} (status {mine[-1].status}{error})"
        else:
            where = "no log"
        said = ""
        if proc is not None:
            tail = _tail(proc.output)
            said = (f"; its output ({proc.output}) ends: {tail}" if tail
                    else f"; its output: {proc.output}")
        out.failed.append(f"shard {i}/{count} of {task} did not finish: {where}"
                          f"{f', exit {code}' if code else ''}{said}")
    for (code, tail), procs in causes.items():
        shards = _names([str(p.shard) for p in procs])
        one = len(procs) == 1
        what = tail or "it printed nothing"
        whose = (f"its output: {procs[0].output}" if one
                 else f"their output: {procs[0].output.parent}")
        out.stopped.append(
            f"shard{'' if one else 's'} {shards} of {task} stopped before "
            f"{'it' if one else 'they'} wrote a log (exit {code}): {what} ({whose})")
        out.not_started += len(procs)
    return out


def closing_line(result: Outcome, count: int) -> str:
    """The last line of a run that did not finish: a resume offered only for the shards that
    can resume."""
    resumable, stopped = len(result.failed), result.not_started
    them = "it" if resumable == 1 else "them"
    if not stopped:
        return (f"{resumable} of {count} shards did not finish; run the same command again to "
                f"resume {them} (the finished shards are kept)")
    they = "it" if stopped == 1 else "they"
    fix = (f"fix the cause above first (as it is, the same command would stop "
           f"{'it' if stopped == 1 else 'them'} the same way)")
    if not resumable:
        return f"{stopped} of {count} shards stopped before {they} wrote a log; {fix}"
    return (f"{resumable} of {count} shards did not finish (running the same command again "
            f"resumes {them}) and {stopped} stopped before {they} wrote a log: {fix}")


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


def paid_text(every_log: Sequence[str]) -> str | None:
    """What the run paid over its shards' attempts (a shard resumed: its killed attempt's
    calls too), beside what the finished run used (:func:`med_evals.logs.usage.paid_line`);
    None where each shard ran once."""
    from med_evals.logs.usage import paid_line

    [run], _ = load_runs(every_log)
    paid = run.paid_usage()
    return None if paid is None else paid_line(paid, run.usage())


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


# --- the command -------------------------------------------------------------------------------

def run_command(task: str, flags: Sequence[str], processes: int | None = None,
                log_dir: str = "logs", stream: IO[str] | None = None,
                out: Callable[[str], None] = print, interval: float | None = None) -> int:
    """``med-evals run`` (see the module's docstring); returns its exit code. ``processes``:
    None for one per core (at most one per item); ``stream``: where the progress line and the
    ``warning:``, ``note:`` and ``waiting`` lines go (default: stderr); ``out``: the shards'
    lines and the closing one."""
    stream = stream or sys.stderr
    flags = list(flags)

    def say(line: str) -> None:
        stream.write(terminal(line, one_line=True) + "\n")
        stream.flush()

    try:
        spec, count = check_before(task, flags, processes, say)
    except InspectHelp as ex:
        return ex.code
    name = task_name(spec)
    key = run_key(spec, flags, count)
    # one run writes into the folder at a time: the lock before any of its logs is read
    lock = lock_for(log_dir, shlex.join(["med-evals", "run", task, "--processes", str(count),
                                         "--log-dir", log_dir, *flags]), say)
    try:
        return _locked(name, spec, count, flags, log_dir, key, lock, stream, out, interval)
    finally:
        lock.release()


def _locked(name: str, spec: str, count: int, flags: Sequence[str], log_dir: str, key: str,
            lock: FolderLock, stream: IO[str], out: Callable[[str], None],
            interval: float | None) -> int:
    logs = shard_logs(log_dir, key)
    # each process's output: beside its logs, or here for a log folder elsewhere (s3://)
    work = Path.cwd() / OUTPUTS if is_remote(log_dir) else Path(_local(log_dir)) / OUTPUTS
    todo, done = commands(spec, count, flags, log_dir, key, logs, work)
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
                start(todo, os.environ, lock.inherit())
                lock.started([p.proc.pid for p in todo if p.proc is not None])
                wait(todo, progress, name, count, stream, interval, lambda: lock.lost)
        except KeyboardInterrupt:
            _stop(todo)
            result = outcome(name, count, log_dir, key, todo)
            for line in result.lines():
                out(terminal(line))
            out("interrupted: run the same command again to resume")
            return FAILED
        except LockLost:
            _stop(todo)
            raise CommandError(f"{log_dir}: another med-evals run took this log folder's lock "
                               "over while this one ran (its heartbeat had stopped for longer "
                               "than the lock's expiry): stopped every shard; run the same "
                               "command again once the other has ended", FAILED) from None
    result = outcome(name, count, log_dir, key, todo)
    if result.lines():
        for line in result.lines():
            out(terminal(line))
        out(terminal(closing_line(result, count)))
        return FAILED
    if name in STUDIES:
        out(terminal(headline_line(result.logs)))
    else:  # not a study (counterfactual_build, a task of a file): no headline to read
        out(terminal(f"{name}: all {count} shards finished: {', '.join(result.logs)}"))
    out(terminal(merged_line(log_dir, layout_name(spec, key), count, result.logs)))
    if len(result.every_log) > len(result.logs) and name in STUDIES:
        paid = paid_text(result.every_log)
        if paid:
            out(terminal(paid))
    return OK


__all__ = ["USAGE", "run_command"]
