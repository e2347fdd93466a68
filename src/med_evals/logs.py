"""Read our tasks' runs back from Inspect logs: per-sample score values and what produced them.

Per-sample values are the log's own epoch reductions (``EvalLog.reductions``: what Inspect's
metrics were computed from); a log without them (one epoch, older Inspect) is reduced here with
the same :func:`~med_evals.scorers.reducers.majority_label`. Which scorer describes a task's
predictions comes from its study spec (:mod:`med_evals.studies`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from inspect_ai.log import EvalLog, list_eval_logs, read_eval_log

from med_evals.scorers.reducers import majority_label
from med_evals.studies import STUDIES, Study, spec


class LogSkipped(ValueError):
    """A log that cannot be used (errored, cancelled, another task's, no scores)."""


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


def expand_log_paths(paths: Iterable[str | Path]) -> list[str]:
    """Log files, with directories expanded to the Inspect logs inside them (as local paths:
    Inspect lists them as ``file://`` URIs, which ``Path`` cannot stat)."""
    out: list[str] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out += [_local(info.name) for info in list_eval_logs(str(p))]
        else:
            out.append(str(p))
    return out


def _local(name: str) -> str:
    parsed = urlparse(name)
    return url2pathname(parsed.path) if parsed.scheme == "file" else name


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
    }


def load_run(path: str, scorer: str | None = None) -> Run:
    """A run from one log, or :class:`LogSkipped` saying why it cannot be used."""
    try:
        log = read_eval_log(path)
    except Exception as ex:  # noqa: BLE001 - an unreadable file is reported, not fatal
        raise LogSkipped(f"{path}: unreadable log ({ex})") from None
    if log.status != "success":
        raise LogSkipped(f"{path}: run did not complete (status {log.status})")
    task = task_name(log)
    if scorer is None:
        if task not in STUDIES:
            raise LogSkipped(f"{path}: task '{log.eval.task}' is not a med_evals study")
        scorer = spec(task).scorer
    per_scorer = reduced_values(log)
    if scorer not in per_scorer:
        raise LogSkipped(f"{path}: no '{scorer}' scores")
    values = per_scorer.pop(scorer)
    others = per_scorer
    scores = log.results.scores if log.results else []
    metrics = {key: m.value for s in scores for key, m in s.metrics.items()}
    return Run(path, task, log.eval.model, values, provenance(log), metrics, others)


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
    """Usable runs, and one line per log skipped."""
    runs, skipped = [], []
    for path in expand_log_paths(paths):
        try:
            runs.append(load_run(path))
        except LogSkipped as ex:
            skipped.append(str(ex))
    return runs, skipped


def score_values(log_path: str, scorer: str) -> tuple[str, list[dict[str, Any]]]:
    """(model, one score value per sample) of ``scorer`` in a log; epochs majority-reduced."""
    run = load_run(log_path, scorer)
    return run.model, list(run.values.values())
