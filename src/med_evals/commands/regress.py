"""Regression gate: record a run as a baseline, then compare new runs with it.

What is gated is each study's **headline** (its spec in :mod:`med_evals.tasks`: e.g. valid
rate, accuracy, macro-F1, sensitivity and specificity over valid predictions for the oncology
study; accuracy and macro-F1 over all samples and the valid rate for the others). Each number is
computed by :meth:`~med_evals.study.spec.Study.headline_values` — the function the logged metric
comes from — over the per-sample values of each condition, and judged on a 95% paired bootstrap
interval of new - old over the samples both runs scored: a regression when the interval lies
wholly below zero. Generation means (ROUGE-L, BERTScore) are printed for information, and so
is the change in each run's tokens and cost (:mod:`med_evals.logs.usage`; a baseline records them),
never gated.

Which logs are read: one per eval (:func:`med_evals.logs.runs.select_logs`): after a kill and
``inspect eval-retry`` the finished log, the killed (and any ``-recovered``) log named as
ignored. The gate's outcome (:func:`decide`; codes in :mod:`med_evals.outputs.exit_codes`) is a
pass
(0: every gated metric tested, none regressed), a regression (1), or **undecided** (3) when the
gate cannot decide: a run that did not finish (status other than ``success`` and no finished log
of its eval given: ``inspect eval`` itself exits 0 for a run that stopped with an error), a
study log without its scores, a new run without a baseline run of its task, a changed setup
(:mod:`med_evals.logs.comparable`: data, prompt, task version, task argument, scorer settings, any
generation or evaluation setting, any model role: the numbers are not comparable), a partial
new run (a missing shard) that leaves out samples the baseline run has, a baseline run no new
run was compared with (``allow_absent`` accepts those), nothing compared at all, or an
**untested** gated metric: one whose old or new value, or whose bootstrap interval, is undefined
(NaN: no shared samples, no valid reply on one side, a condition on one side only).
``allow_untested`` accepts untested metrics when at least one metric was tested. A regression
outranks every undecided cause: the gate has decided. A malformed baseline, a missing path or
an unreadable log (its header or its samples: never taken for another task's log) is a usage
error (2).
"""

from __future__ import annotations

import json
import math
import shlex
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai.model import ModelCost

from med_evals.logs.comparable import (
    is_legacy,
    legacy_view,
    not_recorded,
    reads_as_recorded,
    setup_changes,
)
from med_evals.logs.files import LogPathError, is_remote, log_folder, log_name
from med_evals.logs.runs import (
    LogSelection,
    LogSkipped,
    LogUnreadable,
    Run,
    load_selected_run,
    merge_shards,
    select_logs,
)
from med_evals.logs.usage import change_line, from_record, paid_line, usage_record
from med_evals.outputs.exit_codes import FAILED, OK, UNDECIDED, USAGE, CommandError
from med_evals.outputs.files import check_file, write_text
from med_evals.scorers.classification import metric_values
from med_evals.stats.intervals import bootstrap_difference
from med_evals.stats.standing import detectable, detectable_text
from med_evals.tasks import STUDIES, spec

#: the baseline's format: 3 records every generation setting, the evaluation settings and the
#: model roles in each run's setup (:mod:`med_evals.logs.comparable`); a baseline of format 2 (8
# setup
#: fields) still gates, on those fields, and the gate says which it could not compare
FORMAT = 3
FORMATS = (2, 3)
#: verdicts of a gated metric that was tested
TESTED = ("ok", "improved", "REGRESSION")


def select(logs: Sequence[str | Path]) -> LogSelection:
    """:func:`~med_evals.logs.runs.select_logs`; a missing path, a folder without logs or an
    unreadable log is a :class:`CommandError` (exit 2)."""
    try:
        selection = select_logs(logs, strict=True)
    except LogPathError as ex:
        raise CommandError(str(ex), USAGE) from None
    if selection.unreadable:
        raise CommandError("; ".join(selection.unreadable), USAGE)
    return selection


def load_finished(selection: LogSelection) -> tuple[list[Run], list[str], list[LogSkipped]]:
    """The runs of a selection's finished logs; a line per log of a task that is not a study;
    the study logs that cannot be used (no scores of the study's scorer). A log whose samples
    cannot be read (a corrupted sample record, a store that dropped between its header and its
    samples) is a :class:`CommandError` (exit 2): never read as another task's log."""
    runs: list[Run] = []
    other: list[str] = []
    unusable: list[LogSkipped] = []
    for path in selection.finished:
        try:
            runs.append(load_selected_run(selection, path))
        except LogUnreadable as ex:
            raise CommandError(f"{ex}: the gate reads every sample of a run; read it again "
                               "or give its logs without it", USAGE) from None
        except LogSkipped as ex:
            if ex.task is None:
                other.append(str(ex))
            else:
                unusable.append(ex)
    runs, _ = merge_shards(runs)  # the shards of one run (--limit ranges) are one run
    return runs, other, unusable


def make_baseline(
    logs: Sequence[str | Path], prices: Mapping[str, ModelCost] | None = None
) -> dict[str, Any]:
    """A baseline of every study run in ``logs``: its metrics, setup and per-sample values, and
    its tokens and cost (``usage``: :func:`med_evals.logs.usage.usage_record`, priced with
    ``prices`` where given; a baseline without it, recorded before, still reads).

    :class:`CommandError` (exit 2) when a path does not exist, a folder holds no log, a log is
    unreadable, a study's run did not finish (with no finished log of its eval given) or holds
    no scores, or no log is a run of a study. Logs of other tasks, and logs ignored for the
    finished log of their eval, are listed under ``skipped``."""
    selection = select(logs)
    unfinished = [line for _, task, _, line in selection.unfinished if task in STUDIES]
    if unfinished:
        raise CommandError(
            "a baseline is recorded from finished runs only: " + "; ".join(unfinished), USAGE
        )
    runs, other, unusable = load_finished(selection)
    if unusable:
        raise CommandError("; ".join(str(ex) for ex in unusable), USAGE)
    skipped = [
        *selection.superseded,
        *(line for _, task, _, line in selection.unfinished if task not in STUDIES),
        *other,
    ]
    if not runs:
        raise CommandError(
            "no run of a med_evals study in the logs given: " + "; ".join(skipped), USAGE
        )
    check_distinct(runs)
    return {
        "format": FORMAT,
        "runs": [
            {
                "task": r.task,
                "model": r.model,
                "task_args": r.task_args,
                "log": log_name(r.path),
                "setup": r.setup,
                "metrics": r.metrics,
                "samples": r.values,
                # each sample's input digest: the gate finds a changed prompt from them
                "inputs": {sid: t["input_sha"] for sid, t in r.samples.items()
                           if t.get("input_sha")},
                "partial": r.partial,
                "usage": usage_record(r.usage(prices)),
                "paid": _paid_record(r, prices),
            }
            for r in runs
        ],
        "skipped": skipped,
    }


def _paid_record(run: Run, prices: Mapping[str, ModelCost] | None) -> dict[str, Any] | None:
    paid = run.paid_usage(prices)
    return None if paid is None else usage_record(paid)


def check_distinct(runs: Sequence[Run]) -> None:
    """:class:`CommandError` (exit 2) when two runs (two evals) have the same task, model, task
    arguments and setup: a baseline holds one run of each, or ``regress`` could not tell which
    new run to compare with which (:func:`match_runs`)."""
    seen: dict[str, Run] = {}
    for run in runs:
        key = _run_identity(run, LEVELS[0])
        if key in seen:
            first = seen[key]
            raise CommandError(
                f"{first.path} and {run.path}: two runs of {run.task} / {run.model} with the "
                "same task arguments and setup; a baseline records one run of each (the gate "
                "could not tell which new run to compare with which): give one of them",
                USAGE,
            )
        seen[key] = run


@dataclass
class Row:
    task: str
    model: str
    metric: str
    old: float
    new: float
    test: str
    detail: str
    verdict: str
    #: the log a row is about, where the gate prints a command for it (an unfinished run)
    log: str = ""
    #: a tested gated metric: the smallest drop the gate detects on the samples compared
    #: (:func:`med_evals.stats.standing.detectable`: ``difference``, ``method``, ``n``, ...)
    detects: dict[str, Any] | None = None

    @property
    def difference(self) -> float:
        return self.new - self.old


def _groups(samples: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for sid, v in samples.items():
        out[str(v.get("condition") or "")][sid] = v
    return out


def _verdict(lo: float, hi: float) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return "untested"
    return "REGRESSION" if hi < 0 else "improved" if lo > 0 else "ok"


def _undefined_in(side: str, values: Sequence[Mapping[str, Any]]) -> str:
    valid = sum(bool(v.get("valid")) for v in values)
    if not valid:
        return f"no valid replies in the {side} (0 of {len(values)} shared samples)"
    return f"undefined in the {side} on its {len(values)} shared samples ({valid} valid)"


def untested_reason(
    name: str,
    boot: Mapping[str, float],
    old: Sequence[Mapping[str, Any]],
    new: Sequence[Mapping[str, Any]],
) -> str:
    """Why a headline metric could not be tested: ``boot`` is its
    :func:`~med_evals.stats.intervals.bootstrap_difference` entry (``a`` new, ``b`` old, over
    the shared samples), ``old`` and ``new`` the two runs' values of those samples."""
    if not old:
        return "no shared samples"
    sides = [
        _undefined_in(side, values)
        for side, values, value in (("baseline", old, boot["b"]), ("new run", new, boot["a"]))
        if math.isnan(value)
    ]
    return "; ".join(sides) or f"no bootstrap resample defined {name}"


def compare_run(
    base: dict[str, Any], run: Run, n_boot: int = 1000, all_metrics: bool = False
) -> list[Row]:
    """Rows for the headline metrics (gated) and generation means (info) of one run; with
    ``all_metrics``, also every other number of the study's full metric set (info, never
    gated: :func:`metric_rows`). One undecided row instead when the setups differ
    (:func:`med_evals.logs.comparable.setup_changes`) or the new run is partial and leaves out
    samples
    the baseline run has (a forgotten or killed shard: :func:`missing_samples`)."""
    new_setup = (legacy_view(run.provenance, base["setup"].get("task_version"))
                 if is_legacy(base["setup"]) else run.setup)
    changed = setup_changes(base["setup"], new_setup)
    changed += prompt_changes(base, run)
    if changed:
        return [
            Row(run.task, run.model, "(all)", math.nan, math.nan, "setup check",
                "changed: " + ", ".join(changed), "setup changed")
        ]
    missing = missing_samples(base, run)
    if missing:
        return [Row(run.task, run.model, "(all)", math.nan, math.nan, "coverage", missing,
                    "partial", log=run.path)]
    study = spec(run.task)

    def headline(values: list[Any]) -> dict[str, float]:
        return study.headline_values(values, run.task_args)

    old_groups, new_groups = _groups(base["samples"]), _groups(run.values)
    groups = sorted(set(old_groups) | set(new_groups))
    rows: list[Row] = []
    for group in groups:
        prefix = f"{group}/" if group and len(groups) > 1 else ""
        if group not in old_groups:  # a condition the baseline does not use: not gated
            values = headline(list(new_groups[group].values()))
            rows += [Row(run.task, run.model, f"{prefix}{h.name}", math.nan, values[h.name],
                         "headline", f"condition {group!r} not in the baseline: not gated",
                         "info") for h in study.headline]
            continue
        if group not in new_groups:
            values = headline(list(old_groups[group].values()))
            rows += [Row(run.task, run.model, f"{prefix}{h.name}", values[h.name], math.nan,
                         "headline", f"untested: condition {group!r} not in the new run",
                         "untested") for h in study.headline]
            continue
        old, new = old_groups[group], new_groups[group]
        shared = sorted(set(old) & set(new))
        old_shared, new_shared = [old[i] for i in shared], [new[i] for i in shared]
        boot = bootstrap_difference(headline, new_shared, old_shared, n_boot=n_boot)
        old_all = headline(list(old.values()))
        new_all = headline(list(new.values()))
        detects = detectable(study, new_shared, old_shared, boot) if shared else {}
        for h in study.headline:
            b = boot[h.name]
            verdict = _verdict(b["lo"], b["hi"])
            if math.isnan(old_all[h.name]) or math.isnan(new_all[h.name]):
                verdict = "untested"
            detail = (
                f"untested: {untested_reason(h.name, b, old_shared, new_shared)}"
                if verdict == "untested"
                else f"95% CI of diff {b['lo']:+.3f} to {b['hi']:+.3f}"
            )
            rows.append(
                Row(run.task, run.model, f"{prefix}{h.name}", old_all[h.name], new_all[h.name],
                    f"headline, paired bootstrap n={len(shared)}", detail, verdict,
                    detects=detects.get(h.name) if verdict in TESTED else None)
            )
        old_means = study.mean_values(list(old.values()))
        new_means = study.mean_values(list(new.values()))
        for key, o in old_means.items():
            n = new_means[key]
            if not (math.isnan(o) and math.isnan(n)):
                rows.append(Row(run.task, run.model, f"{prefix}{key}", o, n,
                                "logged metric", "", "info"))
    if all_metrics:
        rows += metric_rows(base, run, {r.metric for r in rows})
    return rows


def prompt_changes(base: Mapping[str, Any], run: Run) -> list[str]:
    """``prompt: the input sent differs on 6 of 6 shared samples of condition title_abstract``
    for each condition where a shared sample's input (every message sent:
    :func:`med_evals.logs.runs.input_digest`) differs between the baseline and the new run: a
    changed prompt (or item text) makes the numbers incomparable. Nothing when the baseline
    recorded no inputs (recorded before they were)."""
    inputs = base.get("inputs")
    if not isinstance(inputs, Mapping):
        return []
    out = []
    new_groups = _groups(run.values)
    for cond, samples in sorted(_groups(base["samples"]).items()):
        shared = [sid for sid in samples if sid in new_groups.get(cond, {}) and sid in inputs]
        differ = [sid for sid in shared
                  if inputs[sid] != (run.samples.get(sid) or {}).get("input_sha")]
        if differ:
            where = f" of condition {cond}" if cond else ""
            out.append(f"prompt: the input sent differs on {len(differ)} of {len(shared)} "
                       f"shared samples{where} (e.g. {differ[0]})")
    return out


def missing_samples(base: Mapping[str, Any], run: Run) -> str:
    """Why a partial new run cannot be gated against ``base``: it holds only part of its
    dataset (:attr:`~med_evals.logs.runs.Run.partial`) and leaves out samples the baseline run has
    in a condition both have; empty otherwise (a full run of another subset is compared on the
    samples both have, as before)."""
    if not run.partial:
        return ""
    new_groups = _groups(run.values)
    absent = sum(
        1 for cond, samples in _groups(base["samples"]).items() if cond in new_groups
        for sid in samples if sid not in new_groups[cond]
    )
    if not absent:
        return ""
    return (f"partial run: {run.partial}; {absent} sample(s) of the baseline run are not in it: "
            "not compared (give every shard's log, or finish the run)")


def metric_rows(base: Mapping[str, Any], run: Run, shown: set[str]) -> list[Row]:
    """Info rows (never gated) for every number of the study's full metric set
    (:meth:`~med_evals.study.spec.Study.metric_set`, computed by its metric functions over each
    side's per-sample values, as ``-T metrics=full`` logs them) not in ``shown``: a metric
    added to a study's set appears here with no other edit."""
    metrics = run.study.metric_set(True, run.task_args)
    old = metric_values(metrics, base["samples"])
    new = metric_values(metrics, run.values)
    return [
        Row(run.task, run.model, key, old.get(key, math.nan), new.get(key, math.nan),
            "full metric set", "not gated", "info")
        for key in dict.fromkeys([*old, *new])
        if key not in shown
    ]


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


#: what a new run and a baseline run must share at each level of :func:`match_runs`, tried in
#: turn (the task always): model, every task argument and setup; model and setup (another
#: subset: compared on the shared samples); the model (a changed setup, reported as such); the
#: setup (a replayed run's model names its file, whose path differs between machines); nothing
LEVELS: tuple[tuple[str, ...], ...] = (
    ("model", "task_args", "setup"),
    ("model", "setup"),
    ("model",),
    ("setup",),
    (),
)


def _identity(task: str, model: str, task_args: Any, setup: Any, fields: Sequence[str]) -> str:
    values = {"model": model, "task_args": task_args, "setup": setup}
    return _key([task, *(values[f] for f in fields)])


def _run_identity(run: Run, fields: Sequence[str], legacy: bool = False) -> str:
    # compared with a format-2 baseline: its 8 fields
    setup = legacy_view(run.provenance) if legacy else run.setup
    return _identity(run.task, run.model, run.task_args, setup, fields)


def _base_identity(base: Mapping[str, Any], fields: Sequence[str]) -> str:
    return _identity(base["task"], base["model"], base.get("task_args") or {}, base["setup"],
                     fields)


@dataclass
class Matching:
    """:func:`match_runs`: new run index -> baseline run index, and the new runs that could not
    be matched one to one (index -> why)."""

    pairs: dict[int, int] = field(default_factory=dict)
    ambiguous: dict[int, str] = field(default_factory=dict)


def _name(path: str | None) -> str:
    return log_name(str(path))


def match_runs(baseline_runs: Sequence[Mapping[str, Any]], runs: Sequence[Run]) -> Matching:
    """Pair new runs with baseline runs **one to one**: never two new runs with one baseline
    run, never a run with another run's baseline.

    First a new run and a baseline run of the same model, task arguments and setup recorded
    from a log of the same file name (the baseline's own logs given again); then, level by
    level (:data:`LEVELS`), a new run whose level key is shared by exactly one unpaired
    baseline run and no other unpaired new run. Where a level offers several (two new runs of
    the same model and setup, or one new run and two such baseline runs), the runs concerned
    are *ambiguous*: the gate cannot tell which to compare with which, and says so."""
    out = Matching()
    free = set(range(len(baseline_runs)))
    exact = LEVELS[0]
    legacy = any(is_legacy(b["setup"]) for b in baseline_runs)
    for i, run in enumerate(runs):
        named = [
            j for j in sorted(free)
            if _base_identity(baseline_runs[j], exact) == _run_identity(run, exact, legacy)
            and _name(baseline_runs[j].get("log")) == _name(run.path)
        ]
        if len(named) == 1:
            out.pairs[i] = named[0]
            free.discard(named[0])
    for fields in LEVELS:
        todo = [i for i in range(len(runs)) if i not in out.pairs and i not in out.ambiguous]
        new_by_key: dict[str, list[int]] = defaultdict(list)
        for i in todo:
            new_by_key[_run_identity(runs[i], fields, legacy)].append(i)
        base_by_key: dict[str, list[int]] = defaultdict(list)
        for j in sorted(free):
            base_by_key[_base_identity(baseline_runs[j], fields)].append(j)
        for key, news in new_by_key.items():
            bases = base_by_key.get(key, [])
            if not bases:
                continue
            if len(news) == 1 and len(bases) == 1:
                out.pairs[news[0]] = bases[0]
                free.discard(bases[0])
                continue
            what = ("the same model, task arguments and setup" if fields == exact
                    else "the same " + " and ".join(f.replace("_", " ") for f in fields)
                    if fields else "the same task")
            new_logs = ", ".join(_name(runs[i].path) for i in news)
            base_logs = ", ".join(_name(baseline_runs[j].get("log")) for j in bases)
            why = (f"{len(news)} new run(s) ({new_logs}) and {len(bases)} baseline run(s) "
                   f"({base_logs}) of {runs[news[0]].task} with {what}: the gate cannot tell "
                   "which to compare with which; gate such runs one at a time, or record a "
                   "baseline of the same logs")
            for i in news:
                out.ambiguous[i] = why
    return out


def match(baseline_runs: Sequence[Mapping[str, Any]], run: Run) -> int | None:
    """The baseline run one new run alone would be compared with (:func:`match_runs`)."""
    return match_runs(baseline_runs, [run]).pairs.get(0)


def regress(
    baseline: dict[str, Any], logs: Sequence[str | Path], n_boot: int = 1000,
    all_metrics: bool = False, prices: Mapping[str, ModelCost] | None = None,
    usage: list[str] | None = None, models: list[str] | None = None,
) -> tuple[list[Row], list[str]]:
    """Rows for every headline metric of every new run matched to a baseline run
    (:func:`match_runs`: one to one), one row for each run the gate cannot compare
    (unfinished, unusable, ambiguous, no baseline run, setup changed), and notes (logs ignored
    or skipped, baseline runs that no new run was compared with).

    ``usage``: a list that receives one line per new run compared with a baseline run: the
    change in its tokens and cost (:func:`usage_change`; information, never gated);
    ``models``: a list that receives every model the new runs' roles name (for the notes on
    ``--prices`` entries that match none).

    :class:`CommandError` (exit 2) for a malformed baseline, a missing path, a folder without
    logs or an unreadable log."""
    check_baseline(baseline)
    selection = select(logs)
    notes = list(selection.superseded)
    rows: list[Row] = []
    for path, task, model, line in selection.unfinished:
        if task in STUDIES:
            rows.append(Row(task, model, "(all)", math.nan, math.nan, "log status", line,
                            "unfinished", log=path))
        else:
            notes.append(line)
    runs, other, unusable = load_finished(selection)
    notes += other
    rows += [
        Row(str(ex.task), str(ex.model), "(all)", math.nan, math.nan, "log", str(ex), "unusable")
        for ex in unusable
    ]
    if models is not None:
        models += [role.model for run in runs for role in run.roles or []]
    matching = match_runs(baseline["runs"], runs)
    for i, run in enumerate(runs):
        if i in matching.ambiguous:
            rows.append(Row(run.task, run.model, "(all)", math.nan, math.nan, "baseline match",
                            matching.ambiguous[i], "ambiguous"))
            continue
        j = matching.pairs.get(i)
        if j is None:
            taken = any(b["task"] == run.task for b in baseline["runs"])
            why = (f"every baseline run of task {run.task} is compared with another new run"
                   if taken else f"no baseline run of task {run.task}")
            rows.append(Row(run.task, run.model, "(all)", math.nan, math.nan, "baseline match",
                            f"{why} ({run.path})", "no baseline"))
            continue
        rows += compare_run(baseline["runs"][j], run, n_boot, all_metrics)
        if usage is not None:
            usage.append(usage_change(baseline["runs"][j], run, prices))
    compared = set(matching.pairs.values())
    accounted = {(r.task, r.model) for r in rows if r.verdict in ("unfinished", "unusable")}
    rows += [
        Row(b["task"], b["model"], "(all)", math.nan, math.nan, "baseline run",
            f"no new run in the logs given was compared with it ({b.get('log')})", "absent")
        for i, b in enumerate(baseline["runs"])
        if i not in compared and (b["task"], b["model"]) not in accounted
    ]
    unrecorded = sorted({f for i, j in matching.pairs.items()
                         for f in not_recorded(baseline["runs"][j]["setup"], runs[i].setup)})
    if unrecorded:
        notes.append(f"the baseline (format {baseline.get('format')}) did not record "
                     f"{', '.join(unrecorded)}: not compared (record a new baseline to gate "
                     "them)")
    upgraded = sorted({
        (runs[i].task, str(runs[i].provenance.get("task_version")), str(old))
        for i, j in matching.pairs.items()
        if is_legacy(setup := baseline["runs"][j]["setup"])
        and reads_as_recorded(runs[i].provenance, old := setup.get("task_version"))
    })
    notes += [f"{task} {new} is compared with the baseline's {old}: the same labels, parser, "
              "values and gated computes (med_evals.logs.comparable.LEGACY_BEHAVIOUR)"
              for task, new, old in upgraded]
    return rows, notes


def usage_change(
    base: Mapping[str, Any], run: Run, prices: Mapping[str, ModelCost] | None = None
) -> str:
    """``<task> / <model>: input tokens 254 -> 260 (+6); ...; cost ... -> ...``: the new run's
    tokens and cost (:mod:`med_evals.logs.usage`, priced with ``prices``) beside the baseline run's
    as it recorded them (:func:`~med_evals.logs.usage.change_line`). Never gated."""
    new = run.usage(prices)
    old = from_record(base["usage"]) if isinstance(base.get("usage"), Mapping) else None
    line = f"{run.task} / {run.model}: {change_line(old, new)}"
    paid = run.paid_usage(prices)
    return line + (f"; {paid_line(paid, new)}" if paid is not None else "")


@dataclass
class Decision:
    """The gate's outcome: its exit code and one line per cause (the last says the outcome)."""

    code: int
    lines: list[str] = field(default_factory=list)


def decide(
    rows: Sequence[Row], allow_untested: bool = False, allow_absent: bool = False
) -> Decision:
    """1 (:data:`~med_evals.outputs.exit_codes.FAILED`) on any regression; else 3
    (:data:`~med_evals.outputs.exit_codes.UNDECIDED`) when a run could not be compared (a partial
    run
    leaving out baseline samples among them), a baseline run has no new run (unless
    ``allow_absent``), a gated metric is untested (unless ``allow_untested`` and some metric
    was tested) or nothing was tested; else 0. One line per cause."""
    lines: list[str] = []
    absent = [r for r in rows if r.verdict == "absent"]
    for r in rows:
        who = f"{r.task} / {r.model}"
        if r.verdict == "partial":
            lines.append(f"undecided: {who}: {r.detail}")
        elif r.verdict == "absent" and not allow_absent:
            lines.append(f"undecided: {who}: baseline run {r.detail} (--allow-absent accepts "
                         "it)")
        elif r.verdict == "unfinished":
            lines.append(f"undecided: {who}: {r.detail}: resume it with "
                         f"`{resume_command(r.log)}`")
        elif r.verdict == "unusable":
            lines.append(f"undecided: {who}: {r.detail}")
        elif r.verdict == "ambiguous":
            lines.append(f"undecided: {who}: {r.detail}")
        elif r.verdict == "no baseline":
            lines.append(f"undecided: {who}: {r.detail}: not gated")
        elif r.verdict == "setup changed":
            lines.append(f"undecided: {who}: setup changed "
                         f"({r.detail.removeprefix('changed: ')}): not compared; record a new "
                         "baseline")
    undecided = bool(lines)
    if absent and allow_absent:
        lines.append(f"accepted (--allow-absent): {len(absent)} baseline run(s) without a new "
                     "run: " + "; ".join(f"{r.task} / {r.model}" for r in absent))
    tested = [r for r in rows if r.verdict in TESTED]
    untested = [r for r in rows if r.verdict == "untested"]
    if untested:
        what = "; ".join(f"{r.task} / {r.model} {r.metric} ({r.detail.removeprefix('untested: ')})"
                         for r in untested)
        if allow_untested and tested:
            lines.append(f"accepted (--allow-untested): {len(untested)} untested gated "
                         f"metric(s): {what}")
        else:
            undecided = True
            lines.append(f"undecided: {len(untested)} gated metric(s) untested: {what}"
                         + ("" if allow_untested else " (--allow-untested accepts them)"))
    if not [r for r in rows if r.verdict != "absent"]:
        undecided = True
        lines.append("undecided: nothing compared: no run of a med_evals study in the logs given")
    bad = [r for r in rows if r.verdict == "REGRESSION"]
    if bad:
        lines.append(f"FAIL: {len(bad)} regression(s) beyond sampling noise (95% paired "
                     "bootstrap): " + ", ".join(f"{r.task} / {r.model} {r.metric}" for r in bad))
        return Decision(FAILED, lines)
    if undecided:
        lines.append(f"UNDECIDED: the gate cannot decide ({len(tested)} gated metric(s) tested, "
                     "no regression among them)")
        return Decision(UNDECIDED, lines)
    lines.append(f"pass: {len(tested)} gated metric(s) tested, 0 regressions beyond sampling "
                 "noise (95% paired bootstrap)")
    return Decision(OK, lines)


def resume_command(log: str) -> str:
    """The command that finishes a killed run into its own folder (without ``--log-dir``,
    ``inspect eval-retry`` writes the finished log to ``./logs``, where gating the run's folder
    again would not find it). A log on S3 is resumed into its own folder there."""
    shown = log if is_remote(log) else str(Path(log))
    return f"inspect eval-retry --log-dir {shlex.quote(log_folder(log))} {shlex.quote(shown)}"


def detect_lines(rows: Sequence[Row]) -> list[str]:
    """``<task> / <model> <metric>: this gate detects drops of at least 9.9 points (0.099;
    from the discordance: 79 of 250 samples differ)`` for each tested gated metric: the
    smallest true drop it detects with 80% power at alpha = 0.05 on the samples compared
    (:func:`med_evals.stats.standing.detectable`)."""
    lines = []
    for r in rows:
        d = r.detects
        if d is None:
            continue
        who = f"{r.task} / {r.model} {r.metric}"
        text = detectable_text(d)
        if math.isnan(d["difference"]):
            lines.append(f"{who}: what this gate detects: {text}")
        elif math.isinf(d["difference"]):
            lines.append(f"{who}: this gate detects no drop of any size "
                         f"({text.removeprefix('none (')}")
        else:
            x = d["difference"]
            how = text[text.index("(") + 1:]
            lines.append(f"{who}: this gate detects drops of at least {100 * x:.1f} points "
                         f"({x:.3f}; {how}")
    return lines


def gated_metrics(rows: Sequence[Row]) -> dict[str, list[str]]:
    """task -> the headline metrics gated (for the CLI to say which)."""
    out: dict[str, list[str]] = {}
    for r in rows:
        if r.test.startswith("headline"):
            names = out.setdefault(r.task, [])
            name = r.metric.split("/")[-1]
            if name not in names:
                names.append(name)
    return out


def format_rows(rows: Sequence[Row]) -> str:
    """A table with every name in full (tasks, models and metrics are never cut short)."""
    cols = [
        ("task", [r.task for r in rows]),
        ("model", [r.model for r in rows]),
        ("metric", [r.metric for r in rows]),
    ]
    widths = [max([len(h), *(len(x) for x in xs)]) for h, xs in cols]
    header = "  ".join(h.ljust(w) for (h, _), w in zip(cols, widths, strict=True))
    header += f"  {'old':>8} {'new':>8} {'diff':>8}  verdict      test / detail"
    lines = [header, "-" * len(header)]
    for r in rows:
        old = "" if math.isnan(r.old) else f"{r.old:8.4f}"
        new = "" if math.isnan(r.new) else f"{r.new:8.4f}"
        diff = "" if math.isnan(r.old) or math.isnan(r.new) else f"{r.difference:+8.4f}"
        names = "  ".join(
            x.ljust(w) for x, w in zip((r.task, r.model, r.metric), widths, strict=True)
        )
        lines.append(
            f"{names}  {old:>8} {new:>8} {diff:>8}  {r.verdict:12} {r.test} {r.detail}".rstrip()
        )
    return "\n".join(lines)


def check_output(path: str | Path) -> Path:
    """The baseline file to write; :class:`CommandError` (exit 2), before any work, when it
    cannot be (:func:`med_evals.outputs.files.check_file`)."""
    return check_file(path, "-o")


def save_baseline(baseline: dict[str, Any], path: str | Path) -> None:
    """Write the baseline whole or not at all (:func:`med_evals.outputs.files.write_text`): a kill
    or a full disk leaves the earlier baseline as it was."""
    write_text(check_output(path), json.dumps(baseline, indent=1, sort_keys=True, default=str),
               "-o")


def check_baseline(baseline: Any, source: str = "the baseline") -> None:
    """:class:`CommandError` (exit 2) unless ``baseline`` has the shape :func:`make_baseline`
    writes."""
    again = "record it with `med-evals baseline`"
    if not isinstance(baseline, dict):
        raise CommandError(f"{source}: not a med-evals baseline (a JSON object); {again}", USAGE)
    if baseline.get("format") not in FORMATS:
        raise CommandError(
            f"{source}: format {baseline.get('format')!r}, not {FORMAT}; {again}", USAGE
        )
    runs = baseline.get("runs")
    if not isinstance(runs, list) or not runs:
        raise CommandError(f"{source}: holds no run ('runs' missing or empty); {again}", USAGE)
    shape = {"task": str, "model": str, "setup": dict, "samples": dict}
    for i, run in enumerate(runs, 1):
        wrong = [k for k, t in shape.items()
                 if not isinstance(run, dict) or not isinstance(run.get(k), t)]
        if not wrong and not all(isinstance(v, dict) for v in run["samples"].values()):
            wrong = ["samples"]
        if wrong:
            raise CommandError(
                f"{source}: run {i} has no valid {', '.join(wrong)}; {again}", USAGE
            )


def read_baseline(path: str | Path) -> dict[str, Any]:
    """A baseline file, checked; :class:`CommandError` (exit 2) when it is missing, empty, not
    JSON or not a baseline."""
    if is_remote(path):  # logs may be anywhere Inspect reads them; the baseline is ours, local
        raise CommandError(f"baseline {path}: med-evals reads a baseline from a local file; "
                           "copy it here first", USAGE)
    p = Path(path)
    if not p.exists():
        raise CommandError(f"baseline {p}: no such file", USAGE)
    if p.is_dir():
        raise CommandError(f"baseline {p}: a folder, not a baseline JSON file", USAGE)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as ex:
        raise CommandError(f"baseline {p}: cannot read it ({ex})", USAGE) from None
    if not text.strip():
        raise CommandError(f"baseline {p}: the file is empty", USAGE)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as ex:
        raise CommandError(f"baseline {p}: not JSON ({ex})", USAGE) from None
    check_baseline(data, f"baseline {p}")
    return data


# --- the command ---------------------------------------------------------------------------------

def regress_command(logs: Sequence[str | Path], baseline: str, allow_untested: bool = False,
                    allow_absent: bool = False, n_boot: int = 1000, all_metrics: bool = False,
                    prices: str | None = None) -> int:
    """``med-evals regress``: gate ``logs`` against the ``baseline`` file and print the rows,
    what each gate can detect, the tokens and cost, and the decision; returns its exit code
    (:func:`decide`)."""
    from med_evals.commands.console import price_notes, print_lines
    from med_evals.logs.usage import read_prices
    from med_evals.outputs.text import terminal

    if n_boot < 100:
        raise CommandError(f"--n-boot {n_boot}: at least 100 resamples")
    priced, usage, models = read_prices(prices), list[str](), list[str]()
    rows, notes = regress(read_baseline(baseline), logs, n_boot=n_boot,
                          all_metrics=all_metrics, prices=priced, usage=usage, models=models)
    price_notes(priced, models)
    print_lines("note", notes)
    if rows:
        print(terminal(format_rows(rows)))
    for task, names in gated_metrics(rows).items():
        print(f"gated for {task}: {', '.join(names)} (headline metrics, paired bootstrap)")
    detects = detect_lines(rows)
    if detects:
        print("what each gate can detect (80% power, α = 0.05, on the samples compared, at "
              "their observed differences; `med-evals power` sizes a gate from the baseline "
              "alone; docs/numbers.md):")
        print("\n".join(terminal(f"  {line}", one_line=True) for line in detects))
    if usage:
        print("tokens and cost, baseline -> new (information, never gated):")
        print("\n".join(terminal(f"  {line}", one_line=True) for line in usage))
    decision = decide(rows, allow_untested=allow_untested, allow_absent=allow_absent)
    print("\n" + "\n".join(terminal(line, one_line=True) for line in decision.lines))
    return decision.code
