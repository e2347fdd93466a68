"""Read our tasks' runs back from Inspect logs: per-sample score values and what produced them.

Per-sample values are the log's own epoch reductions (``EvalLog.reductions``: what Inspect's
metrics were computed from); a log without them (one epoch, older Inspect) is reduced here with
the same :func:`~med_evals.scorers.reducers.majority_label`. Which scorer describes a task's
predictions comes from its study spec (:mod:`med_evals.tasks`).

Which logs are read (:func:`select_logs`, for ``med-evals report``, ``baseline`` and ``regress``
alike): one per eval. A run killed and resumed with ``inspect eval-retry`` leaves its killed log
(status ``started``), possibly Inspect's ``<name>-recovered.eval`` (status ``error``) and the
finished log of the retry, all with the eval's ``task_id``; the finished log (status
``success``, the newest if several) is read and the others are named as ignored. An eval with no
finished log is *unfinished*.

How a log is read, through Inspect's own functions: listed by ``list_eval_logs``, its header by
``read_eval_log(header_only=True)`` (the reductions come with it), its samples a chunk at a time
by ``read_eval_log_samples_by_id``, each within the read limit
(:mod:`med_evals.logs.files`); what a run keeps of each sample (:class:`_Kept`) is taken as it
comes, and the sample is let go. Not through ``inspect_ai.analysis``, where it does not give
the same values or costs more (issue 42, figures from ``python bench/bench_readback.py
--readers`` on its 10,000-sample log):

- ``samples_df`` reads the sample summaries: their score values are ours once parsed from the
  JSON text it gives, but a summary holds no reply, no message sent and no model call, and
  thins metadata (strings over 1,000 characters shortened, whitespace collapsed); every
  command needs those (the report's per-sample differences, the gate's digests, tokens per
  call), so the samples are read all the same, and ``evals_df`` with ``samples_df`` took
  6.2 s of CPU and 426 MB at peak beside 18.5 s and 357 MB for this whole reader: on top of
  it, not instead (2026-12-03; docs/performance.md, "Reading a run back");
- ``evals_df`` flattens the header into columns: a task argument given as ``None`` reads as
  pandas' ``NA`` (``{"subset": None}`` is not ``{"subset": NA}``: another setup), the
  generation settings of the plan (``log.plan.config``: temperature, max_tokens, a system
  message) are in no column, and model roles and scorer options are JSON text: a run's
  setup (:func:`provenance`) is read from the ``EvalLog`` header instead."""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai.event import ModelEvent
from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import ChatMessage, ContentText
from inspect_ai.scorer import Score

from med_evals.logs.comparable import DISPLAY_ONLY_MODEL_ARGS, setup_key, setup_of
from med_evals.logs.files import (
    attachment_text,
    is_remote,
    list_log_files,
    missing,
    mtime,
    read_header,
    read_limit,
    read_samples,
)

# expand_log_paths: re-exported (callers list logs as this module did)
from med_evals.logs.files import expand_log_paths as expand_log_paths
from med_evals.logs.usage import (
    REPLAY_PREFIX,
    Paid,
    Prices,
    RecordUsage,
    RoleUsage,
    RunUsage,
    UsageSums,
    is_reused,
    merged_paid,
    merged_roles,
    paid_run_usage,
    paid_usage,
    record_key,
    run_usage,
    when,
)
from med_evals.scorers.classification import metric_values
from med_evals.scorers.reducers import majority_label
from med_evals.study.params import Shard, parse_shard
from med_evals.study.shards import SHARD_ARG
from med_evals.study.spec import NON_SETUP_ARGS
from med_evals.tasks import STUDIES, Study, spec


class LogSkipped(ValueError):
    """A log that cannot be used (errored, cancelled, another task's, no scores).

    ``task`` and ``model``: the run's, when the log is a run of a med_evals study (``None``
    for another task's)."""

    def __init__(self, message: str, task: str | None = None, model: str | None = None):
        super().__init__(message)
        self.task = task
        self.model = model


class LogUnreadable(LogSkipped):
    """A log whose samples cannot be read (a corrupted sample record, a store that dropped
    between the header and the samples, a truncated file). Never another task's log: the gate
    and the baseline stop on it (exit 2), the report names it and exits 1. ``task`` and
    ``model`` are its header's where the header could be read."""


@dataclass
class Run:
    """One task run of one model: per-sample values and its provenance."""

    path: str
    task: str
    model: str
    values: dict[str, dict[str, Any]]  # sample id -> reduced score value
    provenance: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    #: other scorers' reduced values: scorer -> sample id -> value
    others: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: when the log was last written (seconds since the epoch), from Inspect's listing of the
    #: log's folder; ``None``: not listed yet (:meth:`written` asks Inspect)
    mtime: float | None = None
    #: sample id -> what the model saw and said, for the report's per-sample differences and
    #: the gate (:meth:`_Kept.texts`): ``input`` (the start of the last user message),
    #: ``input_sha`` (:func:`input_digest`), ``call_sha`` (:func:`call_digest`), ``sent``
    #: (:func:`sent_messages`), ``reply``, its
    #: length ``reply_chars``, the ``epoch`` shown and the sample's ``epochs``
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: each role's tokens (:func:`med_evals.logs.usage.role_usages`), read with the log's header:
    #: the report, baseline and regress price them without reading the log again (a merged
    #: run: every shard's, summed); ``None``: not read (a run built by hand)
    roles: list[RoleUsage] | None = None
    #: a replayed run's recorded model: the model names its replies carry
    #: (:meth:`_Kept.recorded`); ``None``: not replayed, or its replies name none
    recorded: str | None = None
    #: what the eval paid for over every attempt whose log was read (a killed run resumed:
    #: :func:`med_evals.logs.usage.paid_usage`); ``None``: not read (a run built by hand)
    paid: Paid | None = None
    #: ``None`` when the run holds every sample of its dataset, else what is missing
    #: (:func:`coverage`: a forgotten or killed shard, ``--limit``): a partial run
    partial: str | None = None

    def logs(self) -> list[str]:
        """The log files the run was read from: its own, or each shard's
        (:func:`merge_shards`)."""
        return list(self.provenance.get("shards") or [self.path])

    def usage(
        self, prices: Prices | None = None, values: Sequence[dict[str, Any]] | None = None
    ) -> RunUsage:
        """The run's tokens and cost (:func:`med_evals.logs.usage.run_usage`) over ``values``
        (default: all of its samples), priced with ``prices``: from the roles read with its log,
        else from its logs' headers."""
        source = list(self.roles) if self.roles is not None else self.logs()
        vals = list(self.values.values()) if values is None else values
        return run_usage(source, self.study, vals, prices)

    def paid_usage(
        self, prices: Prices | None = None, values: Sequence[dict[str, Any]] | None = None
    ) -> RunUsage | None:
        """What the eval paid for over all its attempts
        (:func:`med_evals.logs.usage.paid_run_usage`: a resumed run's killed attempts too),
        ``None`` where it is what the run used (one attempt of the eval or of each shard,
        nothing unknown) or was not read."""
        if self.paid is None or self.paid.once():
            return None
        vals = list(self.values.values()) if values is None else values
        return paid_run_usage(self.paid, self.study, vals, prices)

    def written(self) -> float:
        """When the log was last written (seconds since the epoch; 0.0 when unknown)."""
        if self.mtime is None:
            self.mtime = mtime(self.path)
        return self.mtime

    @property
    def study(self) -> Study:
        return spec(self.task)

    @property
    def setup(self) -> dict[str, Any]:
        """What produced the run's numbers (:func:`med_evals.logs.comparable.setup_of`): two runs
        are comparable when :func:`med_evals.logs.comparable.setup_changes` finds no difference."""
        return setup_of(self.provenance)

    @property
    def task_args(self) -> dict[str, Any]:
        """The run's task arguments; ``shard`` only for a run of one shard (a task that names
        the parameter records ``shard: None`` for a run of no shard, one that takes it through
        ``**unknown`` records nothing: the same run)."""
        args = dict(self.provenance.get("task_args") or {})
        if args.get(SHARD_ARG, "") is None:
            del args[SHARD_ARG]
        return args

    def headline_values(self, values: list[dict[str, Any]] | None = None) -> dict[str, float]:
        """The study's headline numbers over ``values`` (default: all of the run's samples)."""
        vals = list(self.values.values()) if values is None else values
        return self.study.headline_values(vals, self.task_args)

    def by_condition(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for v in self.values.values():
            out[str(v.get("condition", ""))].append(v)
        return dict(out)


@dataclass
class LogSelection:
    """Which logs to read: :func:`select_logs`."""

    #: the finished log (status ``success``) of each eval, in the order given
    finished: list[str] = field(default_factory=list)
    #: one line per log left out because its eval has a finished log
    superseded: list[str] = field(default_factory=list)
    #: (path, task, model, line) for each eval with no finished log: its newest log
    unfinished: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: one line per file that is not a readable Inspect log
    unreadable: list[str] = field(default_factory=list)
    #: each log's write time from Inspect's listing (seconds since the epoch)
    mtimes: dict[str, float] = field(default_factory=dict)
    #: each log's task and model as its header names them (the logs whose header was read)
    headers: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: the header of each finished log as read here, handed to :func:`load_selected_run` (and
    #: dropped there), so that a log's header is parsed once per command
    finished_headers: dict[str, EvalLog] = field(default_factory=dict)
    #: finished log -> the other logs of its eval (killed, recovered, errored attempts): what
    #: the eval paid for before its finished attempt (:func:`med_evals.logs.usage.paid_usage`)
    attempts: dict[str, list[str]] = field(default_factory=dict)


def select_logs(paths: Iterable[str | Path], strict: bool = False) -> LogSelection:
    """One log per eval: the finished log where the eval has one, else its newest log.

    A merged log of Inspect's shard layout (``<name>.eval`` with ``eval.shards``, beside
    ``<name>.shards/<k>/``) is left out, named in ``superseded``, when a log of its shard folder
    is listed too: the run is read from its shards (:func:`merge_shards`, the numbers of the
    same shards given flat in one folder); given alone, it is the run.

    Logs of one eval share its ``task_id`` (Inspect keeps it across ``inspect eval-retry`` and
    in a ``-recovered`` log). Newest: by creation time, ties broken by the file's write time
    (as Inspect's listing gives it: local or remote alike). Reads log headers only. Paths are
    anything Inspect reads logs from (``s3://...`` too); ``strict``: see
    :func:`med_evals.logs.files.list_log_files`."""
    out = LogSelection()
    read_limit()  # a bad MED_EVALS_READ_LIMIT_MB: one LogPathError before any log is read
    by_eval: dict[str, list[tuple[str, EvalLog]]] = defaultdict(list)
    for log_file in list_log_files(paths, strict):
        out.mtimes.setdefault(log_file.name, log_file.mtime)
    for path in out.mtimes:
        try:
            header = read_header(path)
        except Exception as ex:  # noqa: BLE001 - an unreadable file is reported, not fatal
            why = missing(path) or _one_line(ex)  # s3://: a missing key reads as "no recorder"
            out.unreadable.append(f"{path}: unreadable log ({why})")
            continue
        by_eval[header.eval.task_id or path].append((path, header))
        out.headers[path] = (task_name(header), header.eval.model)
    for key, logs in list(by_eval.items()):
        if any(_covers_listed(path, header, out.mtimes) for path, header in logs):
            for path, header in logs:
                out.superseded.append(
                    f"{path}: ignored (status {header.status}): the merged log of the shard "
                    f"logs in {shards_folder(path)}, which are read instead")
            del by_eval[key]
    for logs in by_eval.values():
        logs.sort(key=lambda pl: (pl[1].eval.created or "", out.mtimes[pl[0]]))
        done = [pl for pl in logs if pl[1].status == "success"]
        keep = (done or logs)[-1]
        if done:
            out.finished.append(keep[0])
            out.finished_headers[keep[0]] = keep[1]
            out.attempts[keep[0]] = [p for p, _ in logs if p != keep[0]]
        else:
            path, header = keep
            out.unfinished.append(
                (path, task_name(header), header.eval.model,
                 f"{path}: run did not complete (status {header.status}) and no finished log "
                 "of this eval was given")
            )
        for path, header in logs:
            if path != keep[0]:
                why = "the finished log" if done else "the newest log"
                out.superseded.append(
                    f"{path}: ignored (status {header.status}): {why} of the same eval "
                    f"(task_id {header.eval.task_id}) is {keep[0]}"
                )
    return out


def _one_line(ex: BaseException) -> str:
    text = " ".join(str(ex).split())
    return text[:300] or type(ex).__name__


#: the suffix of Inspect's shard folder beside a merged log (``<name>.eval`` ->
#: ``<name>.shards/<k>/``: Inspect's ``log_layout``)
SHARDS_SUFFIX = ".shards"


def shards_folder(path: str) -> str:
    """The shard folder Inspect's layout puts beside a merged log: ``<dir>/<name>.eval`` (or
    ``<name>-recovered.eval``) -> ``<dir>/<name>.shards``."""
    base = path.removesuffix(".eval").removesuffix("-recovered")
    return base + SHARDS_SUFFIX


def _covers_listed(path: str, header: EvalLog, listed: Mapping[str, float]) -> bool:
    """Whether ``path`` is a merged log of shards (its header's ``eval.shards``: Inspect's
    layout, :mod:`med_evals.commands.merge_shards`) and a log of its shard folder is listed
    too: the run is read from its shard logs (:func:`merge_shards`, the numbers of the shards
    given flat in one folder), the merged log not read a second time. A merged log given
    without its shards is the run."""
    if header.eval.shards is None:
        return False
    def where(name: str) -> str:
        return name if is_remote(name) else os.path.abspath(name)

    folder = where(shards_folder(path)) + ("/" if is_remote(path) else os.sep)
    return any(where(p).startswith(folder) for p in listed)


def task_name(log: EvalLog) -> str:
    return log.eval.task.split("/")[-1]


def provenance(log: EvalLog) -> dict[str, Any]:
    """What produced a run: data revision and checksum, task arguments, scorer, settings."""
    md = log.eval.metadata or {}
    data = md.get("data") or {}
    gen = log.plan.config if log.plan else None
    return {
        "task": task_name(log),
        "task_version": log.eval.task_version,
        "model": log.eval.model,
        "dataset": data.get("dataset"),
        "revision": data.get("revision"),
        "data_checksum": data.get("sha256") or data.get("git_blob_sha1"),
        "task_args": dict(log.eval.task_args or {}),
        "prompt": md.get("prompt"),
        # what the gated numbers depend on in the study's code
        # (med_evals.study.spec.Study.behaviour)
        "behaviour": md.get("behaviour"),
        "scorers": [s.name for s in (log.results.scores if log.results else [])],
        # the scorers' own arguments as Inspect recorded them (encoder, layer, reference, ...)
        "scorer_settings": {s.name: dict(s.options or {}) for s in (log.eval.scorers or [])},
        "temperature": gen.temperature if gen else None,
        "max_tokens": gen.max_tokens if gen else None,
        "epochs": log.eval.config.epochs,
        "created": log.eval.created,
        # every generation setting and the evaluation settings (med_evals.logs.comparable compares
        # them)
        "generation": gen.model_dump(exclude_none=True) if gen else {},
        "eval_config": log.eval.config.model_dump(exclude_none=True),
        # each model role bound to the run and its model (a grader, a jury's graders)
        "model_roles": model_roles(log),
        # the provider's options (-M): e.g. the embedded model's decoding option
        "model_args": dict(log.eval.model_args or {}),
        # which samples the run was asked for (--limit N or a range a-b, --sample-id): a run
        # split into sample ranges over several processes is one run (:func:`merge_shards`)
        "limit": _plain(log.eval.config.limit),
        "sample_id": _plain(log.eval.config.sample_id),
        # the samples of the task's dataset (subset) before --limit / --sample-id: a run of
        # fewer is partial (:func:`coverage`)
        "dataset_samples": log.eval.dataset.samples,
        # a run of one shard (-T shard=i/N): which, and the samples of the whole partition
        # (med_evals.study.shards.shard_record); None for a run of no shard
        "shard": md.get(SHARD_ARG),
    }


def model_roles(log: EvalLog) -> dict[str, str]:
    """Each model role bound to a run and its model (with its settings where it was given
    some: ``openai/gpt-4o {"temperature": 0}``; a role bound to several models: theirs, joined
    by ``, ``)."""
    out = {}
    for role, binding in (log.eval.model_roles or {}).items():
        configs = binding if isinstance(binding, list) else [binding]
        shown = []
        for cfg in configs:
            extra = {k: v for k, v in (("config", cfg.config.model_dump(exclude_none=True)),
                                       ("args", cfg.args)) if v}
            shown.append(cfg.model + (f" {json.dumps(extra, sort_keys=True, default=str)}"
                                      if extra else ""))
        out[role] = ", ".join(shown)
    return out


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple | list) else value


def load_run(
    path: str, scorer: str | None = None, attempts: Sequence[str] = (),
    header: tuple[str, str] | None = None, read: EvalLog | None = None,
) -> Run:
    """A run from one log, or :class:`LogSkipped` saying why it cannot be used
    (:class:`LogUnreadable`: its header or samples cannot be read, or a record is over the read
    limit: :func:`med_evals.logs.files.read_samples`; ``header``: its task and model as its
    header named them). The header is read first (a log of another task is skipped unread),
    then its samples one chunk at a time (:class:`_Kept`: what the run keeps of each).
    ``attempts``: the other logs of its eval (a killed attempt before an ``eval-retry``), read
    for what the eval paid for (:attr:`Run.paid`). ``read``: its header, read already (by
    :func:`select_logs`)."""
    task, model = header if header else (None, None)
    try:
        log = read if read is not None else read_header(path)
    except Exception as ex:  # noqa: BLE001 - an unreadable file is reported, not fatal
        raise LogUnreadable(f"{path}: unreadable log ({_one_line(ex)})",
                            task if task in STUDIES else None, model) from None
    name = _scorer_of(log, path, scorer)
    return _run(log, path, name, _records(path, log), attempts)


def run_of(log: EvalLog, path: str, scorer: str | None = None) -> Run:
    """:func:`load_run` of a log already read (``inspect_ai.eval``'s result: samples
    included; a header alone: the values of its reductions, no sample's text or usage), found
    at ``path``."""
    return _run(log, path, _scorer_of(log, path, scorer), log.samples or [])


def _scorer_of(log: EvalLog, path: str, scorer: str | None) -> str:
    """The scorer whose values a run of ``log`` holds (default: its study's), or
    :class:`LogSkipped` for a log that did not finish or is not of a study."""
    task = task_name(log)
    study = task if task in STUDIES else None
    if log.status != "success":
        raise LogSkipped(
            f"{path}: run did not complete (status {log.status})", study, log.eval.model
        )
    if scorer is None:
        if study is None:
            raise LogSkipped(f"{path}: task '{log.eval.task}' is not a med_evals study")
        scorer = spec(task).scorer_name
    return scorer


def _records(path: str, log: EvalLog) -> Iterator[EvalSample]:
    """:func:`~med_evals.logs.files.read_samples` of a log, any failure to read them (a corrupt
    record, a store that drops mid-read, a record over the read limit) a
    :class:`LogUnreadable` naming the log."""
    samples = read_samples(path, log)
    while True:
        try:
            sample = next(samples)
        except StopIteration:
            return
        except Exception as ex:  # noqa: BLE001 - an unreadable log is reported, not fatal
            task = task_name(log)
            raise LogUnreadable(f"{path}: unreadable log ({_one_line(ex)})",
                                task if task in STUDIES else None, log.eval.model) from None
        yield sample


def _run(log: EvalLog, path: str, scorer: str, samples: Iterable[EvalSample],
         attempts: Sequence[str] = ()) -> Run:
    task = task_name(log)
    study = task in STUDIES
    kept = _Kept(log, path, scorer, spec(task).source if study else None)
    for sample in samples:
        kept.add(sample)
    per_scorer = kept.values()
    if scorer not in per_scorer:
        raise LogSkipped(f"{path}: no '{scorer}' scores", task if study else None,
                         log.eval.model)
    values = per_scorer.pop(scorer)
    scores = log.results.scores if log.results else []
    metrics = {key: m.value for s in scores for key, m in s.metrics.items()}
    earlier, unreadable = _earlier(kept, attempts)
    return Run(path, task, log.eval.model, values, provenance(log), metrics, per_scorer,
               samples=kept.texts(values), roles=kept.usage.roles(log),
               recorded=kept.recorded(),
               paid=paid_usage(log, kept.usage, earlier, unreadable, kept.reused))


def _earlier(kept: _Kept, attempts: Sequence[str]) -> tuple[list[list[RecordUsage]], list[str]]:
    """The records of an eval's other attempts (``attempts``: their logs) that ``kept`` (the
    finished log's) does not hold, each attempt's in its order: what the eval paid for before
    its finished attempt (:func:`med_evals.logs.usage.paid_usage`); and the logs that could not
    be read (an attempt counts whole or not at all)."""
    seen = set(kept.keys)
    earlier: list[list[RecordUsage]] = []
    unreadable: list[str] = []
    for other in attempts:
        records, keys = [], set()
        try:
            for s in read_samples(other, read_header(other)):
                key = record_key(s)
                if key is None or (key not in seen and key not in keys):
                    records.append(RecordUsage.of(s))
                    if key is not None:
                        keys.add(key)
        except Exception:  # noqa: BLE001 - named in the run's unknown part
            unreadable.append(other)
            continue
        seen |= keys
        earlier.append(records)
    return earlier, unreadable


#: the model name of a reply whose recording names none (:mod:`med_evals.models.replay`)
REPLAY_PLACEHOLDER = "replay"

#: characters kept of each sample's input: the start of the prompt, enough for a trial's title,
#: a question or a claim (MedEvidence's question follows about 600 characters of instructions)
INPUT_CHARS = 2_000
#: characters kept of each reply (the report shows its start, the rest behind a toggle)
REPLY_CHARS = 20_000


class _Kept:
    """What a run keeps of its log's sample records, given one at a time (:meth:`add`) and let
    go: each scorer's scores where the log holds no reduction of them (to reduce them here), the
    texts of each sample (its first epoch's and the first epoch of each label: the one shown is
    picked once the reduced values are known), the records' tokens (:class:`UsageSums`), the
    model names its replies carry, and what the eval's other attempts need (:attr:`keys`,
    :attr:`reused`). The log's reductions come with its header."""

    def __init__(self, log: EvalLog, path: str, scorer: str, source: str | None) -> None:
        self.path, self.scorer, self.source = path, scorer, source
        self.reductions = {red.scorer: red for red in log.reductions or []}
        #: scorer -> sample id -> each epoch's score value (scorers without a reduction)
        self.scores: dict[str, dict[str, list[Score]]] = defaultdict(lambda: defaultdict(list))
        #: sample id -> (label, text record) of its first epoch and of each label's first epoch
        self.shown: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
        self.epochs: dict[str, int] = defaultdict(int)
        self.usage = UsageSums()
        self.models: set[str] = set()
        #: each record's :func:`record_key` (an earlier attempt's copy of one is not counted)
        self.keys: set[tuple[str, int, str]] = set()
        self.started = when(log.stats.started_at if log.stats else None)
        #: samples the log took over from an earlier attempt (:func:`is_reused`)
        self.reused = 0
        self.replayed = log.eval.model.startswith(REPLAY_PREFIX)

    def add(self, s: EvalSample) -> None:
        sid = str(s.id)
        for name, score in (s.scores or {}).items():
            if name not in self.reductions:
                self.scores[name][sid].append(Score(value=score.value))
        self._text(s, sid)
        self.usage.add(RecordUsage.of(s))
        if (key := record_key(s)) is not None:
            self.keys.add(key)
        self.reused += is_reused(s, self.started)
        model = s.output.model if s.output else None
        if (self.replayed and model and model != REPLAY_PLACEHOLDER
                and not model.startswith(REPLAY_PREFIX)):  # a failed call: the provider's name
            self.models.add(model)

    def _text(self, s: EvalSample, sid: str) -> None:
        self.epochs[sid] += 1
        score = (s.scores or {}).get(self.scorer)
        label = score.value.get("prediction") if score and isinstance(score.value, dict) else None
        kept = self.shown.setdefault(sid, [])
        if any(seen == label for seen, _ in kept):  # that label's first epoch is kept
            return
        reply = s.output.completion if s.output else ""
        kept.append((label, {
            "input": _input_text(s)[:INPUT_CHARS],
            "input_sha": input_digest(s),
            "call_sha": call_digest(s),
            "sent": sent_messages(s),
            "reply": reply[:REPLY_CHARS],
            "reply_chars": len(reply),
            "epoch": s.epoch,
            "epochs": 0,  # counted over every epoch: texts()
            "log": self.path,
            "source": _source(s.metadata, self.source),
        }))

    def values(self) -> dict[str, dict[str, Any]]:
        """scorer -> sample id -> the epoch-reduced score value the log's metrics were computed
        from: the log's own reductions (``log.reductions``) where Inspect wrote them; otherwise
        (one epoch, older Inspect) each sample's scores reduced with :func:`majority_label`,
        which returns a single epoch unchanged."""
        out: dict[str, dict[str, Any]] = {
            name: {str(s.sample_id): _plain_value(s.value) for s in red.samples}
            for name, red in self.reductions.items()
        }
        reduce = majority_label()
        for name, per_sample in self.scores.items():
            out[name] = {sid: _plain_value(reduce(scores).value)
                         for sid, scores in per_sample.items()}
        return out

    def texts(self, values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """sample id -> ``input`` (the first :data:`INPUT_CHARS` of the last user message, or
        of a text input), ``input_sha`` (:func:`input_digest`), ``call_sha``
        (:func:`call_digest`), ``sent`` (:func:`sent_messages`),
        ``reply`` (the first :data:`REPLY_CHARS` of the completion; ``reply_chars``: its whole
        length), ``epoch`` and ``epochs``, ``log``, and ``source``: the sample metadata's value
        under the key ``source`` (the study's :attr:`~med_evals.study.spec.Study.source`: the
        review a MedEvidence question came from), as text (None: no such key). Of several
        epochs, the one shown is the first epoch whose label is the sample's reduced label
        (``values``: the run's reduced values), else the first. Empty for a log read without
        samples."""
        out: dict[str, dict[str, Any]] = {}
        for sid, kept in self.shown.items():
            reduced = values.get(sid)
            shown = kept[0][1]
            if isinstance(reduced, dict):
                want = reduced.get("prediction")
                shown = next((t for label, t in kept if label == want), shown)
            out[sid] = {**shown, "epochs": self.epochs[sid]}
        return out

    def recorded(self) -> str | None:
        """A replayed run's recorded model: the model names its replies carry (``None``: not a
        replayed run, or its replies name none)."""
        return ", ".join(sorted(self.models)) if self.models else None


def _plain_value(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def _input_text(sample: Any) -> str:
    if isinstance(sample.input, str):
        return sample.input
    users = [m for m in sample.input if m.role == "user"]
    return users[-1].text if users else ""


def input_digest(sample: Any) -> str:
    """A digest of everything a sample's input holds (each message's role and text, in order):
    two runs put the same item to the model for a sample when their digests are equal (the gate
    compares them, and :func:`sent_messages`: :func:`med_evals.commands.regress.prompt_changes`)."""
    return _digest([("user", sample.input)] if isinstance(sample.input, str)
                   else [(m.role, m.text) for m in sample.input])


def _digest(messages: Sequence[tuple[str, str]]) -> str:
    return hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:16]


def call_digest(sample: EvalSample) -> str | None:
    """:func:`input_digest`'s digest of the messages of the sample's first call of the model
    under test (each message's role and text as sent, in order: its ``ModelEvent``'s input);
    None where it made none. Where a study's input once held its rendered prompt and now holds
    the item alone (MedREQAL's question, HealthFC's claim, MedEvidence's question: the study's
    solver renders the prompt), a baseline's input digest recorded before equals this digest of
    a run after that sent the same prompt (the gate:
    :func:`med_evals.commands.regress.prompt_changes`)."""
    for e in sample.events or []:
        if isinstance(e, ModelEvent) and e.role is None and not e.pending:
            return _digest([(m.role, _message_text(m, sample.attachments)) for m in e.input])
    return None


def sent_messages(sample: EvalSample) -> list[str]:
    """Every message the sample sent the model under test, as the log records it was sent
    (each model call's input: Inspect's ``ModelEvent``, whatever added the message: the sample's
    input, a ``system_message()`` solver, a template, ``--system-message``), one
    ``<role> <digest of its text>`` each, in order. A message sent again in a later call (the
    same message) is listed once, and the model's own replies fed back are not listed: two runs
    sent the same prompt when these are equal, whatever the model replied. The model under test
    is the call without a model role (a grader's calls are its role's); a sample that calls it
    not at all (a judging task) has none."""
    out: list[str] = []
    seen: set[str] = set()
    for e in sample.events or []:
        if not isinstance(e, ModelEvent) or e.role is not None or e.pending:
            continue
        for m in e.input:
            if m.id is not None:
                if m.id in seen:
                    continue
                seen.add(m.id)
            text = _message_text(m, sample.attachments)
            out.append(f"{m.role} {hashlib.sha256(text.encode()).hexdigest()[:16]}")
        if e.output.message.id is not None:  # the reply, fed back in a later call
            seen.add(e.output.message.id)
    return out


def _message_text(message: ChatMessage, attachments: Mapping[str, str]) -> str:
    """A message's text as sent (its text parts, each attachment resolved:
    :func:`~med_evals.logs.files.attachment_text`), joined as Inspect's ``ChatMessage.text``
    joins them."""
    if isinstance(message.content, str):
        return attachment_text(message.content, attachments)
    return "\n".join(attachment_text(c.text, attachments) for c in message.content
                     if isinstance(c, ContentText))


def changed_messages(old: Sequence[str], new: Sequence[str]) -> list[str]:
    """Which messages sent (:func:`sent_messages` of one sample in two runs) differ: ``the
    system message``, ``the user message``, ``user message 2`` (where a role has several),
    ``message 2 (system -> user)``, or ``the number of messages (2 -> 3)``; empty when they are
    the same."""
    if len(old) != len(new):
        return [f"the number of messages ({len(old)} -> {len(new)})"]
    roles = [m.split(" ", 1)[0] for m in new]
    out = []
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        if a == b:
            continue
        was, role = a.split(" ", 1)[0], roles[i]
        if was != role:
            out.append(f"message {i + 1} ({was} -> {role})")
        elif roles.count(role) == 1:
            out.append(f"the {role} message")
        else:
            out.append(f"{role} message {roles[:i + 1].count(role)}")
    return out


def _source(metadata: Mapping[str, Any] | None, key: str | None) -> str | None:
    value = (metadata or {}).get(key) if key else None
    return None if value is None else str(value)


def load_runs(paths: Iterable[str | Path]) -> tuple[list[Run], list[str]]:
    """Usable runs (the logs :func:`select_logs` picks), and one line per log skipped."""
    loaded = load_all(paths)
    return loaded.runs, loaded.skipped


@dataclass
class Loaded:
    """What :func:`load_all` read: the runs, one line per log left out, and of those the study
    runs that could not be shown (an unreadable log, a run that did not finish, a study log
    without its scores): a report or a gate without them says so."""

    runs: list[Run]
    skipped: list[str]
    not_shown: list[str]


def load_all(paths: Iterable[str | Path]) -> Loaded:
    """:func:`load_selected` of :func:`select_logs`, with the study runs not shown apart."""
    return load_selected(select_logs(paths))


def is_shard(run: Run) -> bool:
    """A run of part of a task's samples: a shard by task parameter (``-T shard=i/N``:
    :mod:`med_evals.study.shards`), Inspect's ``--limit a-b`` (a range) or ``--sample-id`` (a
    list)."""
    p = run.provenance
    return (shard_of(p) is not None or isinstance(p.get("limit"), list)
            or p.get("sample_id") is not None)


def shard_of(provenance: dict[str, Any]) -> Shard | None:
    """The shard (``-T shard=i/N``) a run's log ran, or None."""
    value = (provenance.get("task_args") or {}).get(SHARD_ARG)
    try:
        return parse_shard(value) if value is not None else None
    except ValueError:  # not one of our shards (the task checks the parameter)
        return None


def _shard_key(run: Run) -> str:
    """What the shards of one run share: the task, the model, every task argument (but which
    shard) and model argument, the number of shards, and the setup
    (:func:`med_evals.logs.comparable.setup_of`: data, prompt, version, every generation setting,
    epochs, model roles): everything but which samples it ran."""
    p = run.provenance
    args = {k: v for k, v in (p.get("task_args") or {}).items()
            if k not in (*NON_SETUP_ARGS, SHARD_ARG)}
    model_args = {k: v for k, v in (p.get("model_args") or {}).items()
                  if k not in DISPLAY_ONLY_MODEL_ARGS}
    shard = shard_of(p)
    return json.dumps([run.task, run.model, args, model_args, setup_key(setup_of(p)),
                       shard.count if shard else None], sort_keys=True, default=str)


def _limit_text(limit: Any) -> str:
    if isinstance(limit, list) and len(limit) == 2:
        return f"--limit {int(limit[0]) + 1}-{int(limit[1])}"
    return f"--limit {limit}"


def _ranges(numbers: Sequence[int]) -> str:
    """``1-10, 16-20`` for the sorted numbers given."""
    out: list[str] = []
    start = prev = None
    for n in [*numbers, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    return ", ".join(out)


def listed(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


#: missing shards named one by one up to this many (then as ranges: ``shards 3-40 of 64``)
SHARDS_NAMED = 6


def missing_shards(count: int, present: Iterable[int]) -> str:
    """``shards 2/4 and 4/4 missing`` (``shard 3/4 missing``; ``shards 3-40, 47 of 64
    missing`` for many); empty when none is."""
    have = set(present)
    gone = [i for i in range(1, count + 1) if i not in have]
    if not gone:
        return ""
    word = "shard" if len(gone) == 1 else "shards"
    if len(gone) <= SHARDS_NAMED:
        return f"{word} {listed([f'{i}/{count}' for i in gone])} missing"
    return f"{word} {_ranges(gone)} of {count} missing"


def _shard_coverage(run: Run, members: Sequence[dict[str, Any]]) -> str | None:
    """:func:`coverage` of a run of shards by task parameter (``-T shard=i/N``): its samples
    against the whole partition's (recorded in each shard's log), and the shards it lacks."""
    shards = [s for s in map(shard_of, members) if s is not None]
    count = shards[0].count
    gone = missing_shards(count, (s.index for s in shards))
    records = [r for r in (m.get("shard") for m in members) if isinstance(r, dict)]
    total = records[0].get("partition_samples") if records else None
    have = len(run.values)
    if not isinstance(total, int):  # a log without its record: the shards alone are known
        return f"{gone} (samples of the whole run not recorded)" if gone else None
    if have >= total:
        return None
    if not gone:
        cut = [m for m in members if m.get("limit") is not None or m.get("sample_id")]
        gone = ("every shard ran, but --limit or --sample-id left samples out" if cut
                else "some samples have no score")
    return f"{have} of {total} samples ({gone})"


def coverage(run: Run) -> str | None:
    """``None`` when the run holds a value for every sample of its dataset (or subset, before
    ``--limit`` and ``--sample-id``), else what is missing: ``15 of 20 samples (samples 11-15
    not run: shards --limit 1-10, --limit 16-20)``; for shards by task parameter, ``375 of 750
    samples (shards 2/4 and 4/4 missing)``. ``None`` too where the log does not say how many
    samples the dataset has (a run built by hand)."""
    p = run.provenance
    members = p.get("shard_provenance") or [p]
    if any(shard_of(m) is not None for m in members):
        return _shard_coverage(run, members)
    total = p.get("dataset_samples")
    if not isinstance(total, int) or total <= 0:
        return None
    have = len(run.values)
    if have >= total:
        return None
    limits = [m.get("limit") for m in members]
    how = ""
    if all(isinstance(lim, int | list) for lim in limits):
        covered: set[int] = set()
        for lim in limits:
            lo, hi = (lim[0], lim[1]) if isinstance(lim, list) else (0, lim)
            covered.update(range(int(lo) + 1, min(int(hi), total) + 1))
        gaps = [i for i in range(1, total + 1) if i not in covered]
        starts = [(lim[0] if isinstance(lim, list) else 0, i) for i, lim in enumerate(limits)]
        ran = ", ".join(_limit_text(limits[i]) for _, i in sorted(starts))
        shards = "shards " if len(limits) > 1 else ""
        how = f"samples {_ranges(gaps)} not run: {shards}{ran}" if gaps else ""
    elif any(m.get("sample_id") is not None for m in members):
        how = "--sample-id"
    unscored = "" if how else "some samples have no score"
    return f"{have} of {total} samples ({how or unscored})"


def merge_shards(runs: Sequence[Run]) -> tuple[list[Run], list[str]]:
    """One run for each evaluation that was split into shards: logs of the same task, model,
    task and model arguments and setup (:func:`_shard_key`), each of a sample range (``--limit
    a-b``) or id list (``--sample-id``), whose samples do not overlap (one process each, e.g.
    ``--limit 1-375`` and ``--limit 376-750`` into one log folder: docs/performance.md). The
    merged run holds every shard's samples and is named after the first shard's log (its
    provenance lists them all under ``shards``); its ``metrics`` are the study's headline over
    all of them (each shard's log has its own). Shards of two setups (another temperature,
    seed, system message, epochs or grader) are never merged; nor are shards whose samples
    overlap (a shard run twice).

    Shards by task parameter (``-T shard=i/N``: :mod:`med_evals.study.shards`) are merged the same
    way, shards of the same ``N`` only; the merged run's task arguments name no shard (it is
    the run: :attr:`Run.task_args`). A shard given twice (two logs of ``2/4``: two evals, not
    a killed one and its ``eval-retry``) merges nothing of its run: each log stays a partial
    run of its own, saying which shard has two logs. Whether the shards cover the run's samples is
    :func:`coverage`'s to say (a forgotten or killed shard: a partial run, never a smaller
    whole one). Returns the runs and one note per merged run (or run left unmerged)."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        groups[_shard_key(r) if is_shard(r) else f"single:{id(r)}"].append(r)
    out: list[Run] = []
    notes: list[str] = []
    twice_of: dict[int, str] = {}
    for members in groups.values():
        ids = [set(m.values) for m in members]
        disjoint = sum(map(len, ids)) == len(set().union(*ids))
        twice = _shards_twice(members)
        if twice:
            for m in members:
                twice_of[id(m)] = twice
            notes.append(f"shards of one run of {members[0].task} / {members[0].model} not "
                         f"merged: {twice}")
        if len(members) == 1 or not disjoint or twice:
            out += members
            continue
        members = sorted(members, key=lambda m: (_shard_index(m),
                                                str(m.provenance.get("created") or ""), m.path))
        first = members[0]
        values = {sid: v for m in members for sid, v in m.values.items()}
        others: dict[str, dict[str, Any]] = defaultdict(dict)
        for m in members:
            for scorer, vals in m.others.items():
                others[scorer].update(vals)
        shards = [m.path for m in members]
        task_args = {k: v for k, v in first.task_args.items() if k != SHARD_ARG}
        merged = Run(first.path, first.task, first.model, values,
                     provenance={**first.provenance, "shards": shards, "task_args": task_args,
                                 "shard_provenance": [m.provenance for m in members]},
                     others=dict(others),
                     mtime=max(m.written() for m in members),
                     samples={sid: t for m in members for sid, t in m.samples.items()},
                     roles=(merged_roles([m.roles or [] for m in members])
                            if all(m.roles is not None for m in members) else None),
                     recorded=first.recorded,
                     paid=merged_paid([m.paid for m in members]))
        merged.metrics = metric_values(
            merged.study.metric_set(False, merged.task_args), merged.values)
        out.append(merged)
        notes.append(f"{len(shards)} logs are shards of one run of {first.task} / {first.model} "
                     f"({len(values)} samples), read as one: {', '.join(shards)}")
    for r in out:
        r.partial = coverage(r)
        if id(r) in twice_of:
            r.partial = f"{r.partial or 'its run'}; not merged: {twice_of[id(r)]}"
    return out, notes


def _shard_index(run: Run) -> int:
    shard = shard_of(run.provenance)
    return shard.index if shard else 0


def _shards_twice(members: Sequence[Run]) -> str:
    """``shard 2/4 has 2 logs (a.eval, b.eval); keep one log of each shard`` where shards by
    task parameter of one run are given more than once; empty otherwise."""
    logs: dict[Shard, list[str]] = defaultdict(list)
    for m in members:
        shard = shard_of(m.provenance)
        if shard is not None:
            logs[shard].append(Path(m.path).name)
    parts = [f"shard {s} has {len(names)} logs ({', '.join(sorted(names))})"
             for s, names in sorted(logs.items()) if len(names) > 1]
    return f"{'; '.join(parts)}; keep one log of each shard" if parts else ""


def load_selected(selection: LogSelection) -> Loaded:
    """The runs of a selection's finished logs, one line per log left out (superseded,
    unfinished, unreadable, or not usable: another task's, no scores), and of those the study
    runs that could not be shown (:class:`Loaded`)."""
    runs: list[Run] = []
    not_shown = [*selection.unreadable,
                 *(u[3] for u in selection.unfinished if u[1] in STUDIES)]
    skipped = [*selection.unreadable, *(u[3] for u in selection.unfinished),
               *selection.superseded]
    for path in selection.finished:
        try:
            run = load_selected_run(selection, path)
        except LogSkipped as ex:
            skipped.append(str(ex))
            if isinstance(ex, LogUnreadable) or ex.task is not None:
                not_shown.append(str(ex))
            continue
        runs.append(run)
    runs, _ = merge_shards(runs)
    return Loaded(runs, skipped, not_shown)


def load_selected_run(selection: LogSelection, path: str) -> Run:
    """:func:`load_run` of one finished log of a selection, with its eval's other attempts and
    its header's task and model (for :class:`LogUnreadable`) and write time."""
    run = load_run(path, attempts=selection.attempts.get(path, ()),
                   header=selection.headers.get(path),
                   read=selection.finished_headers.pop(path, None))
    run.mtime = selection.mtimes.get(path)
    return run


def score_values(log_path: str, scorer: str) -> tuple[str, list[dict[str, Any]]]:
    """(model, one score value per sample) of ``scorer`` in a log; epochs majority-reduced."""
    run = load_run(log_path, scorer)
    return run.model, list(run.values.values())
