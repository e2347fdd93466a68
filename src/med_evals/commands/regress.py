"""Regression gate: record a run as a baseline, then compare new runs with it.

What is gated is each study's **headline** (its spec in :mod:`med_evals.tasks`: e.g. valid
rate, accuracy, macro-F1, sensitivity and specificity over valid predictions for the oncology
study; accuracy and macro-F1 over all samples and the valid rate for the others). Each number is
computed by :meth:`~med_evals.study.spec.Study.headline_values` — the function the logged metric
comes from — over the per-sample values of each condition, and judged on a 95% paired bootstrap
interval of new - old over the samples both runs scored: a regression when the interval lies
wholly below zero. Old, new and diff are those samples' numbers too (the logged numbers when
both runs scored the same samples). With a margin (``--margin``: :func:`margin_verdict`) the
gate says "no worse than": a gated metric passes only when the one-sided 95% lower bound of
new - old lies above -margin, and is undecided when the samples cannot rule such a drop out.
Generation means (ROUGE-L, BERTScore) are printed for information, and so
is the change in each run's tokens and cost (:mod:`med_evals.logs.usage`; a baseline records them),
never gated.

Which logs are read: one per eval (:func:`med_evals.logs.runs.select_logs`): after a kill and
``inspect eval-retry`` the finished log, the killed (and any ``-recovered``) log named as
ignored. The gate's outcome (:func:`decide`; codes in :mod:`med_evals.outputs.exit_codes`) is a
pass (0: every gated metric tested, none regressed), a regression (1), or **undecided** (3) when
the gate cannot decide: a run that did not finish (status other than ``success`` and no finished
log of its eval given: ``inspect eval`` itself exits 0 for a run that stopped with an error), a
study log without its scores, a new run without a baseline run of its task, a changed setup in
what the gated numbers depend on (:func:`med_evals.logs.comparable.gate_changes`: data,
prompt, task version, task argument,
scorer settings, any generation or evaluation setting, any model role: the numbers are not
comparable; not the settings of ROUGE-L and BERTScore, which no gated number reads), a partial
new run (a missing shard) that leaves out samples the baseline run has, a baseline run no new
run was compared with (``allow_absent`` accepts those), nothing compared at all, or an
**untested** gated metric: one whose old or new value, or whose bootstrap interval, is undefined
(NaN: no shared samples, no valid reply on one side, a condition on one side only), or with a
margin an **inconclusive** one.
``allow_untested`` accepts untested metrics when at least one metric was tested. A regression
outranks every undecided cause: the gate has decided. A malformed baseline, a missing path or
an unreadable log (its header or its samples: never taken for another task's log) is a usage
error (2).
"""

from __future__ import annotations

import json
import math
import shlex
import zipfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai.model import ModelCost

from med_evals.logs.comparable import (
    gate_changes,
    gated_view,
    is_legacy,
    legacy_view,
    not_recorded,
    reads_as_recorded,
)
from med_evals.logs.files import LogPathError, is_remote, log_folder, log_name
from med_evals.logs.runs import (
    LogSelection,
    LogSkipped,
    LogUnreadable,
    Run,
    changed_messages,
    listed,
    load_selected_run,
    merge_shards,
    select_logs,
)
from med_evals.logs.usage import change_line, from_record, paid_line, usage_record
from med_evals.outputs.exit_codes import FAILED, OK, UNDECIDED, USAGE, CommandError
from med_evals.outputs.files import check_file, write_text
from med_evals.scorers.classification import metric_values
from med_evals.scorers.score_table import resampling_rows
from med_evals.stats import power
from med_evals.stats.intervals import bootstrap_difference
from med_evals.stats.standing import detectable, detectable_text, from_baseline
from med_evals.tasks import STUDIES, spec

#: the baseline's format: 3 records every generation setting, the evaluation settings and the
#: model roles in each run's setup (:mod:`med_evals.logs.comparable`); a baseline of format 2 (8
# setup
#: fields) still gates, on those fields, and the gate says which it could not compare
FORMAT = 3
FORMATS = (2, 3)
#: verdicts of a gated metric that was tested (``no worse`` and ``inconclusive``: with a
#: margin, :func:`margin_verdict`)
TESTED = ("ok", "improved", "REGRESSION", "no worse", "inconclusive")
#: the level of the one-sided bound a margin is judged on (``--margin``): 95%
MARGIN_ALPHA = power.ALPHA


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
                # each sample's input digest, and a digest of each message it sent the model
                # (med_evals.logs.runs.sent_messages): the gate finds a changed prompt from them
                "inputs": {sid: t["input_sha"] for sid, t in r.samples.items()
                           if t.get("input_sha")},
                "sent": {sid: t["sent"] for sid, t in r.samples.items() if "sent" in t},
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
    #: where the pair detects no drop (too few samples differ): what the baseline alone lets a
    #: gate on these samples detect (:func:`med_evals.stats.standing.from_baseline`)
    alone: dict[str, Any] | None = None
    #: with a margin (``--margin``): why the metric is inconclusive (the ``undecided:`` line)
    reason: str = ""

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


def scorer_of(task: str) -> str | None:
    """The scorer whose values the gated numbers of ``task`` are computed from (None: not a
    study)."""
    return spec(task).scorer_name if task in STUDIES else None


def new_setup_for(base: Mapping[str, Any], run: Run) -> dict[str, Any]:
    """The new run's setup as ``base`` recorded setups: a format-2 baseline's 8 fields
    (:func:`~med_evals.logs.comparable.legacy_view`), else the run's setup."""
    return (legacy_view(run.provenance, base["setup"].get("task_version"))
            if is_legacy(base["setup"]) else run.setup)


def ungated_changes(base: Mapping[str, Any], run: Run) -> list[str]:
    """What differs between a baseline run's setup and a new run's in what no gated number
    depends on (:func:`~med_evals.logs.comparable.gate_changes`: ``-T bertscore=false``):
    information, never a changed setup."""
    return gate_changes(base["setup"], new_setup_for(base, run), scorer_of(run.task))[1]


def compare_run(
    base: dict[str, Any], run: Run, n_boot: int = 1000, all_metrics: bool = False,
    margin: float | None = None, notes: list[str] | None = None,
) -> list[Row]:
    """Rows for the headline metrics (gated) and generation means (info) of one run; with
    ``all_metrics``, also every other number of the study's full metric set (info, never
    gated: :func:`metric_rows`). One undecided row instead when what the gated numbers depend
    on differs (:func:`med_evals.logs.comparable.gate_changes`) or the new run is partial and
    leaves out samples the baseline run has (a forgotten or killed shard:
    :func:`missing_samples`).

    Old, new and diff are each condition's numbers over the samples both runs scored, the
    interval's samples (:meth:`~med_evals.study.spec.Study.headline_values`: on the same
    samples, the logged numbers); ``notes`` receives a line for each condition where those are
    fewer than a run's own. ``margin``: the gate's ``--margin`` (:func:`margin_verdict`)."""
    changed = gate_changes(base["setup"], new_setup_for(base, run), scorer_of(run.task))[0]
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
        if notes is not None and shared and len(shared) < max(len(old), len(new)):
            where = f" of condition {group}" if group else ""
            notes.append(f"{run.task} / {run.model}: old, new and diff{where} are over the "
                         f"{len(shared)} samples both runs scored (the baseline run has "
                         f"{len(old)}, the new run {len(new)}), as the interval is; each "
                         "log's own numbers are over all of its samples")
        boot = bootstrap_difference(headline, resampling_rows(new_shared),
                                    resampling_rows(old_shared), n_boot=n_boot,
                                    one_sided=MARGIN_ALPHA if margin is not None else None)
        detects = detectable(study, new_shared, old_shared, boot) if shared else {}
        alone: dict[str, dict[str, Any]] = {}
        if any(not math.isfinite(d["difference"]) for d in detects.values()):
            # the pair detects nothing: what the baseline alone lets a gate on these do
            # (macro-F1's se from med-evals power's resamples: the same figure it prints)
            detect = from_baseline(study, old_shared, run.task_args)
            rule = (from_baseline(study, old_shared, run.task_args, margin=True)
                    if margin is not None else {})
            alone = {k: {"detect": v, "margin": rule.get(k)} for k, v in detect.items()}
        for h in study.headline:
            b = boot[h.name]
            verdict = _verdict(b["lo"], b["hi"])
            if math.isnan(b["a"]) or math.isnan(b["b"]):
                verdict = "untested"
            d = detects.get(h.name) if verdict in TESTED else None
            detail = (
                f"untested: {untested_reason(h.name, b, old_shared, new_shared)}"
                if verdict == "untested"
                else f"95% CI of diff {b['lo']:+.3f} to {b['hi']:+.3f}"
            )
            reason = ""
            if margin is not None and verdict == "ok" and d is not None:
                verdict, said, reason = margin_verdict(b["lower"], margin, d,
                                                       (alone.get(h.name) or {}).get("margin"))
                detail += f"; {said}"
            rows.append(
                Row(run.task, run.model, f"{prefix}{h.name}", b["b"], b["a"],
                    f"headline, paired bootstrap n={len(shared)}", detail, verdict,
                    detects=d, alone=(alone.get(h.name) or {}).get("detect") if d else None,
                    reason=reason)
            )
        old_means = study.mean_values(old_shared)
        new_means = study.mean_values(new_shared)
        for key, o in old_means.items():
            n = new_means[key]
            if not (math.isnan(o) and math.isnan(n)):
                rows.append(Row(run.task, run.model, f"{prefix}{key}", o, n,
                                "logged metric", "", "info"))
    if all_metrics:
        rows += metric_rows(base, run, {r.metric for r in rows})
    return rows


def margin_verdict(
    lower: float, margin: float, pair: Mapping[str, Any], alone: Mapping[str, Any] | None
) -> tuple[str, str, str]:
    """The verdict of a gated metric no regression and no improvement under ``--margin``
    (docs/numbers.md, "No worse than a margin"): ``no worse`` when the one-sided 95% lower
    bound ``lower`` of new - old (the paired bootstrap's 5th percentile) lies above
    ``-margin``; else ``inconclusive`` (undecided). Where the pair is below the floor (too few
    samples differ: its detectable difference, ``pair``, is not finite) the bound shows nothing
    of how the number varies, and the margin a gate on these samples rules out from the
    baseline alone (``alone``: :func:`~med_evals.stats.standing.from_baseline` with
    ``margin``) must be at most ``margin`` instead. Returns (verdict, what the row's detail
    adds, why it is undecided)."""
    if math.isfinite(pair["difference"]):
        said = f"one-sided 95% lower bound {lower:+.3f} vs margin {-margin:+.3f}"
        if lower > -margin:
            return "no worse", said, ""
        return ("inconclusive", said,
                f"a drop larger than the margin {margin:g} is not ruled out (one-sided 95% "
                f"lower bound of new - old {lower:+.3f})")
    few = detectable_text(pair).removeprefix("none (").removesuffix(")")
    now = math.nan if alone is None else alone["now"]
    if math.isfinite(now):
        said = f"{few}: from the baseline alone it rules out drops larger than {now:.3f}"
        if now <= margin:
            return "no worse", said, ""
        what = f"rules out drops larger than {now:.3f} only"
    else:
        why = (alone or {}).get("why") or "no drop of any size"
        said = f"{few}: from the baseline alone it rules out none ({why})"
        what = f"rules out none ({why})"
    return ("inconclusive", said,
            f"{few}: the paired interval shows nothing, and from the baseline alone a gate on "
            f"these {pair['n']} samples {what} (80% power), not {margin:g}")


def prompt_changes(base: Mapping[str, Any], run: Run) -> list[str]:
    """``prompt: the input sent differs on 6 of 6 shared samples of condition doi_only (e.g.
    doi_only-017): the system message`` for each condition where a shared sample was sent
    another prompt in the new run than in the baseline: its input differs
    (:func:`~med_evals.logs.runs.input_digest`: the item's text; or the messages of its first
    call, for a baseline recorded when the input held them: :func:`same_input`), or a message
    it sent the
    model under test, whatever added it (:func:`~med_evals.logs.runs.sent_messages`: a system
    message, a template), named after the colon
    (:func:`~med_evals.logs.runs.changed_messages`). A changed prompt makes the numbers
    incomparable. What the baseline did not record is not compared: its inputs or its messages
    sent (a baseline recorded before they were: :func:`unrecorded_prompt` names them)."""
    inputs = base.get("inputs")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    sent = base.get("sent")
    sent = sent if isinstance(sent, Mapping) else {}
    if not inputs and not sent:
        return []
    out = []
    new_groups = _groups(run.values)
    for cond, samples in sorted(_groups(base["samples"]).items()):
        shared = [sid for sid in samples if sid in new_groups.get(cond, {})
                  and (sid in inputs or sid in sent)]
        differ: list[str] = []
        which: dict[str, None] = {}
        for sid in shared:
            new = run.samples.get(sid) or {}
            changed = changed_messages(sent[sid], new.get("sent") or []) if sid in sent else []
            if changed or (sid in inputs and not same_input(inputs[sid], new)):
                differ.append(sid)
                which.update(dict.fromkeys(changed))
        if differ:
            where = f" of condition {cond}" if cond else ""
            named = f": {listed(list(which))}" if which else ""
            out.append(f"prompt: the input sent differs on {len(differ)} of {len(shared)} "
                       f"shared samples{where} (e.g. {differ[0]}){named}")
    return out


def same_input(recorded: str, new: Mapping[str, Any]) -> bool:
    """Whether a baseline sample's input digest (``recorded``) is that of the new run's sample
    (``new``: its :attr:`~med_evals.logs.runs.Run.samples` entry): its input's digest
    (``input_sha``), or the same digest of the messages its first call sent (``call_sha``:
    :func:`~med_evals.logs.runs.call_digest`). The second is a baseline recorded when the
    study's input held its rendered prompt (MedREQAL, HealthFC and MedEvidence before their
    input became the item alone): the same prompt sent is the same input."""
    return recorded in (new.get("input_sha"), new.get("call_sha"))


def unrecorded_prompt(base: Mapping[str, Any]) -> list[str]:
    """``messages sent`` where a baseline run recorded no digest of the messages its samples
    sent (recorded before the gate compared them), and ``inputs`` where it recorded no input
    digest either: not compared (:func:`prompt_changes`), named in the gate's note."""
    out = [] if isinstance(base.get("sent"), Mapping) else ["messages sent"]
    return out + ([] if isinstance(base.get("inputs"), Mapping) else ["inputs"])


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
    added to a study's set appears here with no other edit. Over the samples both runs
    scored, as the gated rows."""
    metrics = run.study.metric_set(True, run.task_args)
    shared = set(base["samples"]) & set(run.values)
    old = metric_values(metrics, {k: v for k, v in base["samples"].items() if k in shared})
    new = metric_values(metrics, {k: v for k, v in run.values.items() if k in shared})
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
    # compared with a format-2 baseline: its 8 fields; of them, what the gated numbers depend on
    setup = legacy_view(run.provenance) if legacy else run.setup
    return _identity(run.task, run.model, run.task_args, gated_view(setup, scorer_of(run.task)),
                     fields)


def _base_identity(base: Mapping[str, Any], fields: Sequence[str]) -> str:
    return _identity(base["task"], base["model"], base.get("task_args") or {},
                     gated_view(base["setup"], scorer_of(base["task"])), fields)


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
    margin: float | None = None,
) -> tuple[list[Row], list[str]]:
    """Rows for every headline metric of every new run matched to a baseline run
    (:func:`match_runs`: one to one), one row for each run the gate cannot compare
    (unfinished, unusable, ambiguous, no baseline run, setup changed), and notes (logs ignored
    or skipped, baseline runs that no new run was compared with).

    ``usage``: a list that receives one line per new run compared with a baseline run: the
    change in its tokens and cost (:func:`usage_change`; information, never gated);
    ``models``: a list that receives every model the new runs' roles name (for the warnings on
    ``--prices`` entries that match none); ``margin``: judge each gated metric against it
    (``--margin``: :func:`margin_verdict`).

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
        models += [m for run in runs for m in (run.model, *(r.model for r in run.roles or []))]
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
        found = compare_run(baseline["runs"][j], run, n_boot, all_metrics, margin, notes)
        rows += found
        ungated = ungated_changes(baseline["runs"][j], run)
        if ungated and not any(r.verdict == "setup changed" for r in found):
            notes.append(f"{run.task} / {run.model}: differs from its baseline run in what no "
                         f"gated number depends on ({', '.join(ungated)}): gated; the "
                         "generation means beside them are not comparable")
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
                         for f in [*not_recorded(baseline["runs"][j]["setup"], runs[i].setup),
                                   *unrecorded_prompt(baseline["runs"][j])]})
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
    rows: Sequence[Row], allow_untested: bool = False, allow_absent: bool = False,
    margin: float | None = None,
) -> Decision:
    """1 (:data:`~med_evals.outputs.exit_codes.FAILED`) on any regression; else 3
    (:data:`~med_evals.outputs.exit_codes.UNDECIDED`) when a run could not be compared (a partial
    run leaving out baseline samples among them), a baseline run has no new run (unless
    ``allow_absent``), a gated metric is untested (unless ``allow_untested`` and some metric
    was tested), with ``margin`` a gated metric is inconclusive (a drop larger than the margin
    not ruled out: :func:`margin_verdict`), or nothing was tested; else 0. One line per
    cause."""
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
    for r in rows:
        if r.verdict == "inconclusive":
            lines.append(f"undecided: {r.task} / {r.model} {r.metric}: {r.reason}; "
                         f"`med-evals power --margin {margin:g}` sizes a subset that can")
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
    if margin is not None:
        alone = sum(r.verdict == "no worse" and r.detects is not None
                    and not math.isfinite(r.detects["difference"]) for r in tested)
        how = "one-sided 95% paired bootstrap" + (
            f"; {alone} from the baseline alone, too few samples differing" if alone else "")
        lines.append(f"pass: {len(tested)} gated metric(s) tested, each no worse than its "
                     f"baseline by more than {margin:g} ({how}), 0 regressions")
        return Decision(OK, lines)
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
    (:func:`med_evals.stats.standing.detectable`). Where the pair detects none (too few samples
    differ: an identical rerun differs on none), what the baseline alone lets a gate on these
    samples detect (:attr:`Row.alone`, ``med-evals power``'s rule)."""
    lines = []
    for r in rows:
        d = r.detects
        if d is None:
            continue
        who = f"{r.task} / {r.model} {r.metric}"
        text = detectable_text(d)
        x = d["difference"]
        if math.isfinite(x):
            how = text[text.index("(") + 1:]
            lines.append(f"{who}: this gate detects drops of at least {100 * x:.1f} points "
                         f"({x:.3f}; {how}")
            continue
        pair = (f"the pair detects no drop of any size ({text.removeprefix('none (')}"
                if math.isinf(x) else f"what the pair detects: {text}")
        lines.append(f"{who}: {pair}; {alone_text(r.alone)}")
    return lines


def alone_text(alone: Mapping[str, Any] | None) -> str:
    """``from the baseline alone, a gate on these 20 samples detects drops of at least 39.7
    points (0.397; ...)``: :func:`~med_evals.stats.standing.from_baseline`'s figure in
    words."""
    if alone is None:
        return "nor can the baseline alone say"
    x, n = alone["now"], alone["n"]
    start = f"from the baseline alone, a gate on these {n} samples"
    if math.isnan(x) or math.isinf(x):
        why = alone["why"] or (f"fewer than {power.min_paired_n()} samples" if
                               n < power.min_paired_n() else
                               f"no detectable drop fits below the baseline's {alone['value']:.3f}")
        return f"{start} detects no drop ({why})"
    how = ("the new run's errors independent of the baseline's"
           if alone["method"] == "independent errors"
           else f"{power.z_sum():.2f} × √2 × the baseline's bootstrap standard error "
                f"{alone['se']:.3f}")
    return f"{start} detects drops of at least {100 * x:.1f} points ({x:.3f}; {how})"


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
        raw = p.read_bytes()
    except OSError as ex:
        raise CommandError(f"baseline {p}: cannot read it ({ex})", USAGE) from None
    if zipfile.is_zipfile(p):  # an .eval log is a zip archive
        raise CommandError(_a_log(p, "an Inspect log (.eval)"), USAGE)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"baseline {p}: not a med-evals baseline (not UTF-8 text: a binary "
                           "file); record it with `med-evals baseline`", USAGE) from None
    if not text.strip():
        raise CommandError(f"baseline {p}: the file is empty", USAGE)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as ex:
        raise CommandError(f"baseline {p}: not JSON ({ex})", USAGE) from None
    if isinstance(data, dict) and "runs" not in data and isinstance(data.get("eval"), dict):
        raise CommandError(_a_log(p, "an Inspect log (.json)"), USAGE)
    check_baseline(data, f"baseline {p}")
    return data


def _a_log(path: Path, what: str) -> str:
    return (f"baseline {path}: this is {what}, not a baseline; record a baseline from it with "
            f"`med-evals baseline {shlex.quote(str(path))} -o baseline.json`")


# --- the command ---------------------------------------------------------------------------------

def regress_command(logs: Sequence[str | Path], baseline: str, allow_untested: bool = False,
                    allow_absent: bool = False, n_boot: int = 1000, all_metrics: bool = False,
                    prices: str | None = None, margin: float | None = None) -> int:
    """``med-evals regress``: gate ``logs`` against the ``baseline`` file (with ``margin``, an
    equivalence gate: no worse than the baseline by more than the margin) and print the rows,
    what each gate can detect, the tokens and cost, and the decision; returns its exit code
    (:func:`decide`)."""
    from med_evals.commands.console import price_notes, print_lines
    from med_evals.logs.usage import read_prices
    from med_evals.outputs.text import terminal

    if n_boot < 100:
        raise CommandError(f"--n-boot {n_boot}: at least 100 resamples")
    if margin is not None and not 0 < margin < 1:
        raise CommandError(f"--margin {margin}: a drop between 0 and 1 (0.02 is 2 points)")
    priced, usage, models = read_prices(prices), list[str](), list[str]()
    rows, notes = regress(read_baseline(baseline), logs, n_boot=n_boot,
                          all_metrics=all_metrics, prices=priced, usage=usage, models=models,
                          margin=margin)
    price_notes(priced, models)
    print_lines("note", notes)
    if rows:
        print(terminal(format_rows(rows)))
    for task, names in gated_metrics(rows).items():
        print(f"gated for {task}: {', '.join(names)} (headline metrics, paired bootstrap)")
    detects = detect_lines(rows)
    if detects:
        print("what each gate can detect (80% power, α = 0.05, on the samples compared, at "
              "their observed differences; where too few differ, from the baseline alone, "
              "as `med-evals power` sizes a gate; docs/numbers.md):")
        print("\n".join(terminal(f"  {line}", one_line=True) for line in detects))
    if usage:
        print("tokens and cost, baseline -> new (information, never gated):")
        print("\n".join(terminal(f"  {line}", one_line=True) for line in usage))
    decision = decide(rows, allow_untested=allow_untested, allow_absent=allow_absent,
                      margin=margin)
    print("\n" + "\n".join(terminal(line, one_line=True) for line in decision.lines))
    return decision.code
