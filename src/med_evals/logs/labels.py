"""Which runs the report shows, and under which label.

A **run label** names a model (a replayed run: the recorded model's name) and every task
argument whose value differs between the runs of that study, e.g. ``openai/gpt-4.1,
evidence=true``, every setting of the run's setup that differs
(:func:`med_evals.logs.comparable.described`: ``temperature=0.5``, ``seed=3``,
``system_message=...``, ``epochs=3``, a grader role's model, the task version, the data), and
every model argument (``-M``) whose value differs, except those of
:data:`DISPLAY_ONLY_MODEL_ARGS`, which change no reply (the embedded model's ``progress``: how
often it prints a progress line); a partial run (:func:`med_evals.logs.runs.coverage`: a
forgotten or killed shard) ends with ``(partial)``. Two setups therefore never share a label.
Runs that share a label (the same model, arguments and setup, e.g. the README's job and a later
``condition=study`` run of the same model) are merged sample by sample into one :class:`Group`;
a sample present in several of them keeps the newest log's value and the report says so.

The runs come one per eval (:func:`med_evals.logs.runs.select_logs`, as for ``med-evals baseline``
and ``regress``): after a kill and ``inspect eval-retry`` only the finished log is read and the
killed one is listed as skipped; the merge here is of different evals sharing a label.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from med_evals.logs.comparable import DISPLAY_ONLY_MODEL_ARGS, described
from med_evals.logs.files import log_name
from med_evals.logs.runs import REPLAY_PREFIX, Run
from med_evals.logs.usage import MISSING
from med_evals.study.spec import NON_SETUP_ARGS, Study

# DISPLAY_ONLY_MODEL_ARGS (med_evals.logs.comparable): model arguments that change no reply, never
# part of a run label. Every other model argument may change replies, so it may tell two runs apart:
# ``embedded/``'s ``runtime``, ``dtype``, ``choices``, ``max_tokens_cap``, and ``batch_size``
# and ``threads`` (they change the order of floating-point sums, so a reply may differ),
# ``replay/``'s ``file``, and any other provider's options.
__all__ = ["DISPLAY_ONLY_MODEL_ARGS", "Group", "ReportError", "group_runs", "run_labels"]


def ordered_conditions(study: Study, present: Sequence[str] | set[str]) -> list[str]:
    """Present conditions in the study's order (unknown ones after, by name)."""
    known = [c for c in study.conditions if c in present]
    return known + sorted(set(present) - set(known))


class ReportError(ValueError):
    """The logs cannot be reported together as asked."""


@dataclass
class Group:
    """One row label of the report: the merged samples of the runs sharing it."""

    label: str
    study: Study
    runs: list[Run]  # oldest first
    values: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def task_args(self) -> dict[str, Any]:
        return self.runs[-1].task_args

    def conditions(self) -> dict[str, dict[str, dict[str, Any]]]:
        """condition ("" for a study without conditions) -> sample id -> value."""
        out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for sid, v in self.values.items():
            out[str(v.get("condition") or "")][sid] = v
        return dict(out)

    def headline(self, values: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """The study's headline numbers over ``values``: :meth:`Study.headline_values`, the
        function behind the logged ``headline`` metric and ``med-evals regress``."""
        return self.study.headline_values(values, self.task_args)


#: the models behind the study group's recorded table's column names (``med-evals compare``'s
#: replayed runs): a replayed run of one is named ``GPT-4o (gpt4o_temp100, replayed)``
RECORDED_MODELS = {
    "gpt35turbo_temp100": "GPT-3.5-turbo",
    "gpt4o_temp100": "GPT-4o",
    "o1_temp100": "o1",
}


def model_name(run: Run) -> str:
    """The run's model; a replayed run is named by the recorded model: the model its replies
    name, else the name it was replayed under (``replay/<name> -M file=...``, or the replay
    file's name), with the model behind a recorded table's column where it is known
    (:data:`RECORDED_MODELS`). ``med-evals compare`` labels its replayed rows with this too."""
    if not run.model.startswith(REPLAY_PREFIX):
        return run.model
    name = run.recorded or Path(run.model[len(REPLAY_PREFIX) :]).name
    shown = RECORDED_MODELS.get(name)
    return f"{shown} ({name}, replayed)" if shown else f"{name} (replayed)"


def _arg_text(value: Any) -> str:
    if value is None:  # not given: the task's default, as for a run without the argument
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(_arg_text(v) for v in value)
    text = str(value)
    return Path(text).name if "/" in text else text


def label_args(study: Study, run: Run) -> dict[str, str]:
    """The task arguments and the model's options (``-M``) that may distinguish this run from
    another of its study (an embedded run with ``-M choices=...`` and one without are two
    runs, not one); not those that change no reply (:data:`DISPLAY_ONLY_MODEL_ARGS`)."""
    skip = set(NON_SETUP_ARGS)  # the same per-sample values either way
    if study.conditions:  # conditions are a per-sample dimension, shown in their own column
        skip.add("condition")
    # a shard (-T shard=2/4) as given, not as a path's last part
    args = {k: str(v) if k == "shard" else _arg_text(v)
            for k, v in run.task_args.items() if k not in skip}
    setup = {k: v for k, v in described(run.setup).items() if k not in args and k not in skip}
    model_args = run.provenance.get("model_args") or {}
    shown = {k: v for k, v in model_args.items() if k not in DISPLAY_ONLY_MODEL_ARGS}
    return {**args, **setup, **{f"-M {k}": _arg_text(v) for k, v in shown.items()}}


def run_labels(runs: Sequence[Run]) -> dict[int, str]:
    """id(run) -> label: the model and every task argument whose value differs between the
    runs of its study."""
    by_task: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_task[r.task].append(r)
    out: dict[int, str] = {}
    for group in by_task.values():
        args = [label_args(r.study, r) for r in group]
        keys = list(dict.fromkeys(k for a in args for k in a))
        differ = [k for k in keys if len({a.get(k, MISSING) for a in args}) > 1]
        for r, a in zip(group, args, strict=True):
            extra = ", ".join(f"{k}={a.get(k, MISSING)}" for k in differ)
            out[id(r)] = (model_name(r) + (f", {extra}" if extra else "")
                          + (" (partial)" if r.partial else ""))
    return out


def age(run: Run) -> tuple[str, float]:
    """When a run was made: its creation time, ties (the same second) broken by when its log
    was last written (from Inspect's listing: a log on S3 as a local one)."""
    return (str(run.provenance.get("created") or ""), run.written())


def group_runs(runs: Sequence[Run], warnings: list[str]) -> dict[str, list[Group]]:
    """task -> its groups (sorted by label); overlapping samples keep the newest log's value."""
    labels = run_labels(runs)
    by_key: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for r in sorted(runs, key=age):
        by_key[(r.task, labels[id(r)])].append(r)
    out: dict[str, list[Group]] = defaultdict(list)
    for (task, label), members in sorted(by_key.items()):
        group = Group(label, members[0].study, members)
        origin: dict[str, str] = {}
        for r in members:
            name = log_name(r.path)
            dup = [sid for sid in r.values if sid in group.values]
            if dup:
                older = sorted({origin[s] for s in dup})
                warnings.append(
                    f"{task} / {label}: {len(dup)} samples (e.g. {dup[0]}) of {name} are also "
                    f"in {', '.join(older)}; the newer log's values ({name}, created "
                    f"{r.provenance.get('created')}) were kept"
                )
            for sid, v in r.values.items():
                group.values[sid] = v
                origin[sid] = name
        out[task].append(group)
    return dict(out)


def signature(run: Run) -> tuple[Any, ...]:
    """What must agree for two runs of a task to stand side by side (of their setups,
    :attr:`med_evals.logs.runs.Run.setup`): the data, the prompt and the task version. Runs that
    differ in any other setting stand side by side as rows of their own (their labels name the
    setting)."""
    setup = run.setup
    return (setup["data_checksum"], str(setup["prompt"]), run.provenance.get("task_version"))


def partial_warnings(runs: Sequence[Run]) -> list[str]:
    """One line per partial run (:func:`med_evals.logs.runs.coverage`): what it leaves out."""
    return [f"{r.task} / {model_name(r)} ({', '.join(log_name(p) for p in r.logs())}) is a "
            f"partial run: {r.partial}; its row is marked (partial)"
            for r in runs if r.partial]


def check_comparable(runs: Sequence[Run], allow_mixed: bool) -> list[str]:
    """Refuse runs of one task whose dataset, prompt or task version differ (unless allowed);
    warn of each partial run."""
    warnings = partial_warnings(runs)
    by_task: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_task[r.task].append(r)
    for task, group in by_task.items():
        if len({signature(r) for r in group}) > 1:
            lines = "; ".join(
                f"{log_name(r.path)}: data {str(signature(r)[0])[:12]}, prompt {signature(r)[1]}, "
                f"version {signature(r)[2]}"
                for r in group
            )
            msg = f"{task}: runs differ in dataset revision, prompt or task version ({lines})"
            if not allow_mixed:
                raise ReportError(msg + ". Pass --allow-mixed to compare them anyway.")
            warnings.append("Mixed runs compared: " + msg)
    return warnings
