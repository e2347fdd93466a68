"""Read our tasks' runs back from Inspect logs: per-sample score values and what produced them.

Per-sample values are the log's own epoch reductions (``EvalLog.reductions``: what Inspect's
metrics were computed from); a log without them (one epoch, older Inspect) is reduced here with
the same :func:`~med_evals.scorers.reducers.majority_label`. Which scorer describes a task's
predictions comes from its study spec (:mod:`med_evals.studies`).

Which logs are read (:func:`select_logs`, for ``med-evals report``, ``baseline`` and ``regress``
alike): one per eval. A run killed and resumed with ``inspect eval-retry`` leaves its killed log
(status ``started``), possibly Inspect's ``<name>-recovered.eval`` (status ``error``) and the
finished log of the retry, all with the eval's ``task_id``; the finished log (status
``success``, the newest if several) is read and the others are named as ignored. An eval with no
finished log is *unfinished*."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log

# expand_log_paths: re-exported (callers list logs as this module did)
from med_evals.log_files import expand_log_paths as expand_log_paths
from med_evals.log_files import list_log_files, missing, mtime
from med_evals.scorers.headline import metric_values
from med_evals.scorers.reducers import majority_label
from med_evals.studies import STUDIES, Study, spec
from med_evals.usage import (
    REPLAY_PREFIX,
    Prices,
    RoleUsage,
    RunUsage,
    merged_roles,
    role_usages,
    run_usage,
)


class LogSkipped(ValueError):
    """A log that cannot be used (errored, cancelled, another task's, no scores).

    ``task`` and ``model``: the run's, when the log is a run of a med_evals study (``None``
    for an unreadable log or another task's)."""

    def __init__(self, message: str, task: str | None = None, model: str | None = None):
        super().__init__(message)
        self.task = task
        self.model = model


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
    #: sample id -> what the model saw and said, for the report's per-sample differences
    #: (:func:`sample_texts`): ``input`` (the start of the last user message), ``reply``, its
    #: length ``reply_chars``, the ``epoch`` shown and the sample's ``epochs``
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: each role's tokens (:func:`med_evals.usage.role_usages`), read with the log's header:
    #: the report, baseline and regress price them without reading the log again (a merged
    #: run: every shard's, summed); ``None``: not read (a run built by hand)
    roles: list[RoleUsage] | None = None
    #: a replayed run's recorded model: the model names its replies carry
    #: (:func:`recorded_model`); ``None``: not replayed, or its replies name none
    recorded: str | None = None

    def logs(self) -> list[str]:
        """The log files the run was read from: its own, or each shard's
        (:func:`merge_shards`)."""
        return list(self.provenance.get("shards") or [self.path])

    def usage(
        self, prices: Prices | None = None, values: Sequence[dict[str, Any]] | None = None
    ) -> RunUsage:
        """The run's tokens and cost (:func:`med_evals.usage.run_usage`) over ``values``
        (default: all of its samples), priced with ``prices``: from the roles read with its log,
        else from its logs' headers."""
        source = list(self.roles) if self.roles is not None else self.logs()
        vals = list(self.values.values()) if values is None else values
        return run_usage(source, self.study, vals, prices)

    def written(self) -> float:
        """When the log was last written (seconds since the epoch; 0.0 when unknown)."""
        if self.mtime is None:
            self.mtime = mtime(self.path)
        return self.mtime

    @property
    def study(self) -> Study:
        return spec(self.task)

    @property
    def task_args(self) -> dict[str, Any]:
        return dict(self.provenance.get("task_args") or {})

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


def select_logs(paths: Iterable[str | Path], strict: bool = False) -> LogSelection:
    """One log per eval: the finished log where the eval has one, else its newest log.

    Logs of one eval share its ``task_id`` (Inspect keeps it across ``inspect eval-retry`` and
    in a ``-recovered`` log). Newest: by creation time, ties broken by the file's write time
    (as Inspect's listing gives it: local or remote alike). Reads log headers only. Paths are
    anything Inspect reads logs from (``s3://...`` too); ``strict``: see
    :func:`med_evals.log_files.list_log_files`."""
    out = LogSelection()
    by_eval: dict[str, list[tuple[str, EvalLog]]] = defaultdict(list)
    for log_file in list_log_files(paths, strict):
        out.mtimes.setdefault(log_file.name, log_file.mtime)
    for path in out.mtimes:
        try:
            header = read_eval_log(path, header_only=True)
        except Exception as ex:  # noqa: BLE001 - an unreadable file is reported, not fatal
            why = missing(path) or _one_line(ex)  # s3://: a missing key reads as "no recorder"
            out.unreadable.append(f"{path}: unreadable log ({why})")
            continue
        by_eval[header.eval.task_id or path].append((path, header))
    for logs in by_eval.values():
        logs.sort(key=lambda pl: (pl[1].eval.created or "", out.mtimes[pl[0]]))
        done = [pl for pl in logs if pl[1].status == "success"]
        keep = (done or logs)[-1]
        if done:
            out.finished.append(keep[0])
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
        "scorers": [s.name for s in (log.results.scores if log.results else [])],
        # the scorers' own arguments as Inspect recorded them (encoder, layer, reference, ...)
        "scorer_settings": {s.name: dict(s.options or {}) for s in (log.eval.scorers or [])},
        "temperature": gen.temperature if gen else None,
        "max_tokens": gen.max_tokens if gen else None,
        "epochs": log.eval.config.epochs,
        "created": log.eval.created,
        # the provider's options (-M): e.g. the embedded model's decoding option
        "model_args": dict(log.eval.model_args or {}),
        # which samples the run was asked for (--limit N or a range a-b, --sample-id): a run
        # split into sample ranges over several processes is one run (:func:`merge_shards`)
        "limit": _plain(log.eval.config.limit),
        "sample_id": _plain(log.eval.config.sample_id),
    }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple | list) else value


def load_run(path: str, scorer: str | None = None) -> Run:
    """A run from one log, or :class:`LogSkipped` saying why it cannot be used."""
    try:
        log = read_eval_log(path)
    except Exception as ex:  # noqa: BLE001 - an unreadable file is reported, not fatal
        raise LogSkipped(f"{path}: unreadable log ({ex})") from None
    return run_of(log, path, scorer)


def run_of(log: EvalLog, path: str, scorer: str | None = None) -> Run:
    """:func:`load_run` of a log already read (``inspect_ai.eval``'s result: samples
    included), found at ``path``."""
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
    per_scorer = reduced_values(log)
    if scorer not in per_scorer:
        raise LogSkipped(f"{path}: no '{scorer}' scores", study, log.eval.model)
    values = per_scorer.pop(scorer)
    others = per_scorer
    scores = log.results.scores if log.results else []
    metrics = {key: m.value for s in scores for key, m in s.metrics.items()}
    return Run(path, task, log.eval.model, values, provenance(log), metrics, others,
               samples=sample_texts(log, path, scorer, values), roles=role_usages(log),
               recorded=recorded_model(log))


#: the model name of a reply whose recording names none (:mod:`med_evals.models.replay`)
REPLAY_PLACEHOLDER = "replay"


def recorded_model(log: EvalLog) -> str | None:
    """The model a replayed run replays: the model names its replies carry (``None``: not a
    replayed run, or its replies name none)."""
    if not log.eval.model.startswith(REPLAY_PREFIX):
        return None
    names = {
        s.output.model
        for s in log.samples or []
        if s.output
        and s.output.model
        and s.output.model != REPLAY_PLACEHOLDER
        and not s.output.model.startswith(REPLAY_PREFIX)  # a failed call: the provider's name
    }
    return ", ".join(sorted(names)) if names else None


#: characters kept of each sample's input: the start of the prompt, enough for a trial's title,
#: a question or a claim (MedEvidence's question follows about 600 characters of instructions)
INPUT_CHARS = 2_000
#: characters kept of each reply (the report shows its start, the rest behind a toggle)
REPLY_CHARS = 20_000


def _input_text(sample: Any) -> str:
    if isinstance(sample.input, str):
        return sample.input
    users = [m for m in sample.input if m.role == "user"]
    return users[-1].text if users else ""


def sample_texts(
    log: EvalLog, path: str, scorer: str, values: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """sample id -> ``input`` (the first :data:`INPUT_CHARS` of the last user message, or of
    a text input), ``reply`` (the first :data:`REPLY_CHARS` of the completion; ``reply_chars``:
    its whole length), ``epoch`` and ``epochs``. Of several epochs, the reply shown is the first
    epoch's whose label is the sample's reduced label (``values``: the run's reduced values).
    Empty for a log written without samples."""
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(log.samples or [], key=lambda s: s.epoch):
        sid = str(s.id)
        score = (s.scores or {}).get(scorer)
        label = score.value.get("prediction") if score and isinstance(score.value, dict) else None
        reduced = values.get(sid)
        wanted = isinstance(reduced, dict) and label == reduced.get("prediction")
        seen = out.get(sid)
        if seen is not None:
            seen["epochs"] += 1
            if seen["matches"] or not wanted:
                continue
        reply = s.output.completion if s.output else ""
        out[sid] = {
            "input": _input_text(s)[:INPUT_CHARS],
            "reply": reply[:REPLY_CHARS],
            "reply_chars": len(reply),
            "epoch": s.epoch,
            "epochs": seen["epochs"] if seen else 1,
            "log": path,
            "matches": wanted,
        }
    for v in out.values():
        del v["matches"]
    return out


def reduced_values(log: EvalLog) -> dict[str, dict[str, Any]]:
    """scorer -> sample id -> the epoch-reduced score value the log's metrics were computed from.

    Taken from ``log.reductions`` where Inspect wrote them; otherwise (one epoch) each sample's
    scores are reduced with :func:`majority_label`, which returns a single epoch unchanged.
    """
    out: dict[str, dict[str, Any]] = {}
    for red in log.reductions or []:
        out[red.scorer] = {
            str(s.sample_id): dict(s.value) if isinstance(s.value, dict) else s.value
            for s in red.samples
        }
    per_scorer: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for sample in log.samples or []:
        for name, score in (sample.scores or {}).items():
            if name not in out:
                per_scorer[name][str(sample.id)].append(score)
    reduce = majority_label()
    for name, per_sample in per_scorer.items():
        out[name] = {}
        for sid, scores in per_sample.items():
            v = reduce(scores).value
            out[name][sid] = dict(v) if isinstance(v, dict) else v
    return out


def load_runs(paths: Iterable[str | Path]) -> tuple[list[Run], list[str]]:
    """Usable runs (the logs :func:`select_logs` picks), and one line per log skipped."""
    runs, skipped = load_selected(select_logs(paths))
    return runs, skipped


def is_shard(run: Run) -> bool:
    """A run of part of a task's samples: Inspect's ``--limit a-b`` (a range) or
    ``--sample-id`` (a list)."""
    p = run.provenance
    return isinstance(p.get("limit"), list) or p.get("sample_id") is not None


def _shard_key(run: Run) -> str:
    """What the shards of one run share: everything of the run but which samples it ran."""
    p = {k: v for k, v in run.provenance.items()
         if k not in ("limit", "sample_id", "created", "scorers")}
    return json.dumps([run.task, run.model, p], sort_keys=True, default=str)


def merge_shards(runs: Sequence[Run]) -> tuple[list[Run], list[str]]:
    """One run for each evaluation that was split into shards: logs of the same task, model,
    task arguments, data, prompt, version, scorer and generation settings, each of a sample
    range (``--limit a-b``) or id list (``--sample-id``), whose samples do not overlap (one
    process each, e.g. ``--limit 1-375`` and ``--limit 376-750`` into one log folder:
    docs/performance.md). The merged run holds every shard's samples and is named after the
    first shard's log (its provenance lists them all under ``shards``); its ``metrics`` are
    the study's headline over all of them (each shard's log has its own). Runs that are not
    shards, or whose samples overlap, are left as they are. Returns the runs and one note per
    merged run."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        groups[_shard_key(r) if is_shard(r) else f"single:{id(r)}"].append(r)
    out: list[Run] = []
    notes: list[str] = []
    for members in groups.values():
        ids = [set(m.values) for m in members]
        disjoint = sum(map(len, ids)) == len(set().union(*ids))
        if len(members) == 1 or not disjoint:
            out += members
            continue
        members = sorted(members, key=lambda m: (str(m.provenance.get("created") or ""),
                                                m.path))
        first = members[0]
        values = {sid: v for m in members for sid, v in m.values.items()}
        others: dict[str, dict[str, Any]] = defaultdict(dict)
        for m in members:
            for scorer, vals in m.others.items():
                others[scorer].update(vals)
        shards = [m.path for m in members]
        merged = Run(first.path, first.task, first.model, values,
                     provenance={**first.provenance, "shards": shards}, others=dict(others),
                     mtime=max(m.written() for m in members),
                     samples={sid: t for m in members for sid, t in m.samples.items()},
                     roles=(merged_roles([m.roles or [] for m in members])
                            if all(m.roles is not None for m in members) else None),
                     recorded=first.recorded)
        merged.metrics = metric_values(
            merged.study.metric_set(False, merged.task_args), merged.values)
        out.append(merged)
        notes.append(f"{len(shards)} logs are shards of one run of {first.task} / {first.model} "
                     f"({len(values)} samples), read as one: {', '.join(shards)}")
    return out, notes


def load_selected(selection: LogSelection) -> tuple[list[Run], list[str]]:
    """The runs of a selection's finished logs, and one line per log left out (superseded,
    unfinished, unreadable, or not usable: another task's, no scores)."""
    runs: list[Run] = []
    skipped = [*selection.unreadable, *(u[3] for u in selection.unfinished),
               *selection.superseded]
    for path in selection.finished:
        try:
            run = load_run(path)
        except LogSkipped as ex:
            skipped.append(str(ex))
            continue
        run.mtime = selection.mtimes.get(path)
        runs.append(run)
    runs, _ = merge_shards(runs)
    return runs, skipped


def score_values(log_path: str, scorer: str) -> tuple[str, list[dict[str, Any]]]:
    """(model, one score value per sample) of ``scorer`` in a log; epochs majority-reduced."""
    run = load_run(log_path, scorer)
    return run.model, list(run.values.values())
