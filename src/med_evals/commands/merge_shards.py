"""The merged log of a run's shards in Inspect's shard layout, written with Inspect's public API.

Inspect 0.3.285 lays a sharded run out as ``<dir>/<name>.shards/<k>/*.eval`` (one folder per
shard, each holding its attempts: a killed one and its ``eval-retry``) beside a merged log
``<dir>/<name>.eval`` whose header carries ``eval.shards`` (``inspect_ai.log.EvalShards``: one
``EvalShardEntry`` a shard). ``inspect view`` hides a shard log when that merged log is in the
listing with status ``success`` and was written after the shard (Inspect's
``filter_merged_shards``), so the run shows once. 0.3.285 has no writer of the merged log: this
module is ours (``med-evals run --processes N`` calls it when every shard finished;
``med-evals merge-shards DIR.shards`` for shards run elsewhere, a Slurm array: docs/scale.md).

The merged log (:func:`merge_shard_set`) is one ``EvalLog``: the first shard's header with the
task arguments and task metadata naming no shard (it is the whole run), the dataset's sample
ids the union of the shards', every shard's samples (shard order), usage summed, the
``started_at`` of the first shard to start and the ``completed_at`` of the last to end, and
the results and reductions recomputed over every sample by Inspect's ``recompute_metrics``
(each scorer's metrics from the log's metric definitions, as registered: ours are once
med_evals is imported). Its status is ``success``: it is written only when every shard's folder
holds a finished log and those logs read back as one whole run (:func:`read_back`, as
``med-evals report`` reads them). Inspect's public ``write_eval_log`` takes the whole
``EvalLog``, so every shard's samples are held in memory at once while it is written (about
the sum of the shards' uncompressed sample records).

Our choices where Inspect does not say: a ledger entry's ``selection_digest`` is the SHA-256
(hex) of the JSON text (``json.dumps(ids, separators=(",", ":"))``) of the attempt's
``eval.dataset.sample_ids`` as logged; its ``size`` the file's bytes and ``mtime`` the
listing's write time (seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from inspect_ai.log import (
    EvalLog,
    EvalSample,
    EvalShardEntry,
    EvalShards,
    read_eval_log,
    recompute_metrics,
    write_eval_log,
)
from inspect_ai.model import ModelUsage

from med_evals.logs.files import is_remote, list_log_files, log_name
from med_evals.logs.runs import LogSkipped, Run, merge_shards, run_of, select_logs
from med_evals.outputs.exit_codes import FAILED, CommandError
from med_evals.study.shards import SHARD_ARG

#: a shard folder's name ends a companion folder of this name (Inspect's layout)
SHARDS_SUFFIX = ".shards"


def shards_dir(log_dir: str, name: str) -> str:
    """``<log_dir>/<name>.shards``."""
    return f"{log_dir.rstrip('/')}/{name}{SHARDS_SUFFIX}"


def shard_folder(log_dir: str, name: str, index: int) -> str:
    """``<log_dir>/<name>.shards/<index>``: shard ``index``'s ``--log-dir``."""
    return f"{shards_dir(log_dir, name)}/{index}"


def merged_log_path(shards: str) -> str:
    """``<dir>/<name>.shards`` -> ``<dir>/<name>.eval`` (Inspect's rule), or
    :class:`CommandError` for a folder not named ``<name>.shards``."""
    base = shards.rstrip("/")
    head, tail = posixpath.split(base) if is_remote(base) else os.path.split(base)
    if not tail.endswith(SHARDS_SUFFIX) or tail == SHARDS_SUFFIX:
        raise CommandError(f"{shards}: not a shards folder (expected <name>{SHARDS_SUFFIX})")
    merged = tail[: -len(SHARDS_SUFFIX)] + ".eval"
    return f"{head}/{merged}" if is_remote(base) else os.path.join(head, merged)


def read_back(logs: Sequence[str]) -> tuple[list[Run], list[str]]:
    """The shards' logs read back as ``med-evals report`` reads them (:func:`merge_shards`),
    from their headers where each holds its per-sample reduced values (Inspect's
    ``reductions``: no sample record is read, 0.01 s a log instead of 0.3 s for 375 samples);
    else from the whole logs."""
    from med_evals.logs.runs import load_runs

    headers = [read_eval_log(p, header_only=True) for p in logs]
    if not all(h.reductions for h in headers):
        return load_runs(logs)
    runs, skipped = [], []
    for header, path in zip(headers, logs, strict=True):
        try:
            runs.append(run_of(header, path))
        except LogSkipped as ex:
            skipped.append(str(ex))
    merged, _ = merge_shards(runs)
    return merged, skipped


@dataclass
class ShardSet:
    """A ``<name>.shards`` folder: each shard folder's finished log (by folder name, numeric
    order), and one line per shard folder that has none."""

    folder: str
    finished: dict[str, str] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)
    mtimes: dict[str, float] = field(default_factory=dict)


def _folder_key(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def shard_set(folder: str) -> ShardSet:
    """Each shard folder (``<k>/``) of ``folder`` and its finished log (:func:`select_logs`
    over the folder: the finished attempt of its eval); logs directly in ``folder`` are not a
    shard's (Inspect's layout) and are left out."""
    root = folder.rstrip("/")
    if not is_remote(root):
        root = os.path.abspath(root)
    by_folder: dict[str, list[str]] = {}
    out = ShardSet(folder)
    for log in list_log_files([folder]):
        name = log.name if is_remote(log.name) else os.path.abspath(log.name)
        rel = name[len(root):].lstrip("/").split("/")
        if not name.startswith(root) or len(rel) < 2:
            continue
        by_folder.setdefault(rel[0], []).append(log.name)
        out.mtimes[log.name] = log.mtime
    for k in sorted(by_folder, key=_folder_key):
        selection = select_logs(by_folder[k])
        if len(selection.finished) == 1 and not selection.unfinished:
            out.finished[k] = selection.finished[0]
        elif selection.finished or selection.unfinished:
            evals = len(selection.finished) + len(selection.unfinished)
            what = (f"{evals} evals (one shard's attempts only, please)" if evals > 1
                    else selection.unfinished[0][3])
            out.unfinished.append(f"shard folder {k}: {what}")
        else:
            out.unfinished.append(f"shard folder {k}: no readable log "
                                  f"({'; '.join(selection.unreadable)})")
    return out


def _digest(ids: Sequence[Any]) -> str:
    return hashlib.sha256(json.dumps(list(ids), separators=(",", ":")).encode()).hexdigest()


def _size(path: str) -> int:
    import fsspec  # type: ignore[import-untyped]

    fs, root = fsspec.core.url_to_fs(path)
    return int(fs.size(root) or 0)


def _summed(usages: Sequence[dict[str, ModelUsage]]) -> dict[str, ModelUsage]:
    out: dict[str, ModelUsage] = {}
    for usage in usages:
        for model, u in usage.items():
            out[model] = out[model] + u if model in out else u
    return out


def _sample_order(sample: EvalSample) -> tuple[int, int, int | str]:
    return (sample.epoch, 0, sample.id) if isinstance(sample.id, int) else (
        sample.epoch, 1, str(sample.id))


def merged_log(logs: Sequence[tuple[str, str]], mtimes: dict[str, float]) -> EvalLog:
    """The merged log of finished shard logs ``(shard folder name, log path)``, in shard
    order (see the module's docstring)."""
    shards = [read_eval_log(path) for _, path in logs]
    first = shards[0]
    samples = sorted((s for log in shards for s in log.samples or []), key=_sample_order)
    ids: list[Any] = []
    seen: set[Any] = set()
    for log in shards:
        for i in log.eval.dataset.sample_ids or []:
            if i not in seen:
                seen.add(i)
                ids.append(i)
    ledger = [
        EvalShardEntry(
            shard=k, log=log_name(path), eval_set_id=log.eval.eval_set_id, status=log.status,
            samples=len(log.samples or []),
            selected=len(set(log.eval.dataset.sample_ids or [])),
            selection_digest=_digest(log.eval.dataset.sample_ids or []),
            started_at=log.stats.started_at, completed_at=log.stats.completed_at,
            model_usage=log.stats.model_usage, role_usage=log.stats.role_usage,
            size=_size(path), mtime=mtimes.get(path))
        for (k, path), log in zip(logs, shards, strict=True)]
    metadata = {k: v for k, v in (first.eval.metadata or {}).items() if k != SHARD_ARG}
    spec = first.eval.model_copy(update={
        "eval_id": uuid.uuid4().hex, "run_id": uuid.uuid4().hex, "task_id": uuid.uuid4().hex,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "task_args": {k: v for k, v in first.eval.task_args.items() if k != SHARD_ARG},
        "task_args_passed": {k: v for k, v in first.eval.task_args_passed.items()
                             if k != SHARD_ARG},
        "metadata": metadata or None,
        "dataset": first.eval.dataset.model_copy(update={"samples": len(ids),
                                                         "sample_ids": ids}),
        "shards": EvalShards(selection="ids", ledger=ledger),
    })
    started = [s.stats.started_at for s in shards if s.stats.started_at]
    completed = [s.stats.completed_at for s in shards if s.stats.completed_at]
    stats = first.stats.model_copy(update={
        "started_at": min(started, default=""), "completed_at": max(completed, default=""),
        "model_usage": _summed([s.stats.model_usage for s in shards]),
        "role_usage": _summed([s.stats.role_usage for s in shards]),
    })
    merged = first.model_copy(update={"eval": spec, "stats": stats, "samples": samples,
                                      "status": "success", "error": None})
    recompute_metrics(merged)
    return merged


def _is_study(path: str) -> bool:
    from med_evals.tasks import STUDIES

    return read_eval_log(path, header_only=True).eval.task.split("/")[-1] in STUDIES


def merge_shard_set(folder: str, count: int | None = None) -> str:
    """Write ``<name>.eval`` beside ``folder`` (``<name>.shards``) when every shard folder
    (``count``: folders ``1`` to ``count``) holds a finished log and they read back as one
    whole run; the merged log's path. Else a :class:`CommandError` (exit 1) naming what is
    missing, and nothing is written."""
    target = merged_log_path(folder)
    found = shard_set(folder)
    if count is not None:
        found.unfinished += [f"shard folder {k}: no log" for k in map(str, range(1, count + 1))
                             if k not in found.finished and not any(
                                 u.startswith(f"shard folder {k}:") for u in found.unfinished)]
    if found.unfinished or not found.finished:
        why = "; ".join(found.unfinished) or "no shard folder (<k>/) holds a log"
        raise CommandError(f"{folder}: not merged: {why}", FAILED)
    logs = list(found.finished.items())
    runs, skipped = read_back([p for _, p in logs])
    if _is_study(logs[0][1]) and (len(runs) != 1 or runs[0].partial):
        why = "; ".join([*(f"{r.task} / {r.model}: {r.partial or 'a run'}" for r in runs),
                         *skipped]) or "no run read"
        raise CommandError(f"{folder}: not merged: the shards' logs do not read back as one "
                           f"whole run: {why}", FAILED)
    write_eval_log(merged_log(logs, found.mtimes), target)
    return target


# --- the command line --------------------------------------------------------------------------

def merge_shards_command(shards: str, count: int | None = None) -> int:
    """``med-evals merge-shards``: write the merged log of the ``<name>.shards`` folder
    ``shards`` (:func:`merge_shard_set`; ``count``: the run's number of shards)."""
    from med_evals.outputs.text import terminal

    if is_remote(shards) is False and not os.path.isdir(shards):
        raise CommandError(f"{shards}: no such folder")
    merged_log_path(shards)  # a folder of another name: exit 2 before anything is read
    print(terminal(f"wrote {merge_shard_set(shards, count)}"))
    return 0
