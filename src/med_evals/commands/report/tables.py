"""Tables every study section shares: the headline table, paired comparisons between runs,
the papers' published tables, and what produced each run.

Every headline number is :meth:`Study.headline_values` over one condition's per-sample values:
the function the logged ``headline`` metric and ``med-evals regress`` call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals.commands.report.document import MISSING, Document, Shown
from med_evals.commands.report.standing import (
    DETECTS,
    ConditionStanding,
    detect_table,
    detectable_cell,
    fmt_diff,
    interval_tables,
    not_better_lines,
    ranking_table,
    standings,
    trivial_label,
)
from med_evals.data import published
from med_evals.inspect_internals.compat import registry_unqualified_name
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.logs.pairs import differences, pairs
from med_evals.logs.runs import Run
from med_evals.scorers.classification import metric_values
from med_evals.scorers.score_table import resampling_rows
from med_evals.stats.intervals import bootstrap_difference
from med_evals.stats.standing import detectable
from med_evals.study.spec import Study

__all__ = ["HeadlineRow", "fmt_diff", "headline_block", "paired_rows", "paired_table"]


@dataclass(frozen=True)
class HeadlineRow:
    """One row of a headline table: the numbers the log and the gate show for this run."""

    task: str
    label: str
    condition: str
    n: int
    values: dict[str, float]
    logs: tuple[str, ...]


def headline_rows(study: Study, groups: Sequence[Group]) -> list[HeadlineRow]:
    rows = []
    present = {c for g in groups for c in g.conditions()}
    for cond in ordered_conditions(study, present):
        for g in groups:
            values = g.conditions().get(cond)
            if values:
                vals = list(values.values())
                logs = tuple(Path(r.path).name for r in g.runs)
                row = HeadlineRow(study.task, g.label, cond, len(vals), g.headline(vals), logs)
                rows.append(row)
    return rows


def headline_table(
    doc: Document, study: Study, rows: Sequence[HeadlineRow],
    conditions: Mapping[str, ConditionStanding] | None = None, n_boot: int = 0,
) -> None:
    """The study's headline numbers per run (and condition), as logged and gated; with the
    ``conditions``' standings, each condition's trivial rows after its runs, and for each run
    its primary number minus the best trivial row's and whether it is better beyond sampling
    noise."""
    with_cond = any(r.condition for r in rows)
    primary = study.headline[0]
    diff_col = f"{primary.display} − best trivial (95% CI)"
    table = []
    for i, r in enumerate(rows):
        row: dict[str, Any] = {"run": r.label}
        if with_cond:
            row["condition"] = r.condition
        row["n"] = r.n
        row.update({h.display: r.values[h.name] for h in study.headline})
        st = conditions[r.condition] if conditions else None
        if st is not None:
            beat = st.standing.get(r.label)
            row[diff_col] = fmt_diff(beat) if beat else MISSING
            row["better than trivial"] = (MISSING if not beat or beat["beats"] is None
                                          else "yes" if beat["beats"] else "no")
        table.append(row)
        last = i + 1 == len(rows) or rows[i + 1].condition != r.condition
        if st is not None and last:
            for block in st.blocks:
                for t in block.rows:
                    trow: dict[str, Any] = {"run": trivial_label(block, t, len(st.blocks) > 1)}
                    if with_cond:
                        trow["condition"] = r.condition
                    trow["n"] = block.n
                    trow.update({h.display: t.numbers[h.name] for h in study.headline})
                    trow[diff_col] = trow["better than trivial"] = ""
                    table.append(trow)
    over = "; ".join(
        f"{h.display} over {h.over}"
        + (f" ({h.why or 'ours'})" if h.source == "ours" else "")
        for h in study.headline
    )
    trivial = ""
    if conditions:
        trivial = (
            " Trivial rows: the same headline function on the same samples, each reply "
            "replaced by a constant answer (the majority class, each label) or a uniform "
            "random one (mean of its draws), every such reply valid. Better than trivial: "
            f"the run's {primary.display} minus the best constant row's has a 95% paired "
            f"bootstrap interval ({n_boot} resamples, seed 0) above 0 (docs/numbers.md)."
        )
    doc.table(
        table,
        "Headline numbers, as logged (metric 'headline') and gated by med-evals regress",
        keys=2 if with_cond else 1,
        empty="no run",
        note=f"{over}.{trivial}",
    )


def paired_rows(study: Study, groups: Sequence[Group], n_boot: int) -> list[dict[str, Any]]:
    """Every two runs on the samples both scored (per condition,
    :func:`med_evals.logs.pairs.pairs`):
    McNemar's exact test on correctness and, for each headline number, A - B with a 95% paired
    bootstrap interval of :meth:`Study.headline_values` itself, and the smallest difference
    the pair detects at 80% power (:func:`med_evals.stats.standing.detectable`; keys starting
    :data:`DETECTS`). No valid prediction on the paired samples: no test."""
    rows = []
    for pair in pairs(study, groups):
        row: dict[str, Any] = {"run A": pair.a.label, "run B": pair.b.label}
        if pair.condition:
            row["condition"] = pair.condition
        row["n paired"] = len(pair.keys)
        test = differences(pair).test
        if test is None:
            row["McNemar exact p"] = "no valid prediction"
            rows.append(row)
            continue
        row["right only in A / in B"] = Shown(
            f"{test['a_only']} / {test['b_only']}",
            [("right only in A", test["a_only"]), ("right only in B", test["b_only"])])
        row["McNemar exact p"] = test["p_value"]
        boot = bootstrap_difference(pair.a.headline, resampling_rows(pair.va),
                                    resampling_rows(pair.vb), n_boot=n_boot)
        for h in study.headline:
            row[f"A − B {h.display} (95% CI)"] = fmt_diff(boot[h.name])
        found = detectable(study, pair.va, pair.vb, boot)
        for h in study.headline:
            row[f"{DETECTS} {h.display}"] = detectable_cell(found[h.name])
        rows.append(row)
    return rows


def paired_table(doc: Document, study: Study, groups: Sequence[Group], n_boot: int) -> None:
    """Which runs can be told apart (three or more), the paired comparisons and what each pair
    can detect."""
    ranking_table(doc, study, groups)
    rows = paired_rows(study, groups, n_boot)
    keys = 3 if any("condition" in r for r in rows) else 2
    doc.table(
        [{k: v for k, v in r.items() if not k.startswith(DETECTS)} for r in rows],
        "Paired comparisons between runs on the samples both scored",
        keys=keys,
        note="McNemar's exact test on correctness; headline differences with a 95% paired "
        f"percentile bootstrap ({n_boot} resamples, seed 0) of the headline function.",
    )
    detect_table(doc, rows, keys)


# --- published tables ---------------------------------------------------------------------


def reference_table(ctx: Any, study: Study, stem: str) -> pd.DataFrame | None:
    """The study's published table whose file name starts with ``stem`` (one of
    :attr:`Study.reference_tables`: shipped, or fetched as :mod:`med_evals.data.published`
    says), or None. A table the study names that cannot be had is a note in the report, before
    the table, and on the console, saying why and how to provide it."""
    for name in study.reference_tables:
        if name.startswith(stem):
            got = published.load(name, ctx.reference)
            if got.table is None:
                ctx.note(got.note)
            return got.table
    return None


# --- provenance ---------------------------------------------------------------------------


def _short(value: Any, n: int = 12) -> str:
    return str(value)[:n] if value else ""


def provenance_tables(doc: Document, runs: Sequence[Run], labels: dict[int, str]) -> None:
    ident, settings = [], []
    for r in runs:
        p = r.provenance
        args = {k: v for k, v in p["task_args"].items() if v not in (None, "")}
        scorer = {k: v for s in (p.get("scorer_settings") or {}).values() for k, v in s.items()}
        ident.append({
            "task": r.task,
            "run": labels[id(r)],
            "model": r.model,
            # a run split into shards: every shard's log (med_evals.logs.runs.merge_shards)
            "log": ", ".join(Path(x).name for x in r.logs()),
            "data revision": _short(p.get("revision")),
            "data checksum": _short(p.get("data_checksum")),
            "prompt": p.get("prompt") or "",
            "task version": p.get("task_version"),
        })
        settings.append({
            "log": Path(r.path).name,
            "task args": ", ".join(f"{k}={v}" for k, v in args.items()),
            "scorer settings": ", ".join(f"{k}={v}" for k, v in scorer.items()),
            "temperature": p.get("temperature"),
            "max tokens": p.get("max_tokens"),
            "epochs": p.get("epochs"),
        })
    doc.table(ident, "Runs: model, log, data and prompt")
    doc.table(settings, "Runs: task arguments, scorer settings and generation settings")


def headline_block(ctx: Any, study: Study, groups: Sequence[Group]) -> list[HeadlineRow]:
    """A study's headline rows: recorded for the report's checks and printed as its first
    table (every study section opens with it), with the trivial rows and each run's standing
    against them, then the numbers' 95% intervals."""
    rows = headline_rows(study, groups)
    ctx.headline += rows
    conditions = standings(study, groups, ctx.n_boot)
    headline_table(ctx.doc, study, rows, conditions, ctx.n_boot)
    for line in not_better_lines(study, conditions, ctx.n_boot):
        ctx.doc.p(line, "warn")
    interval_tables(ctx.doc, study, conditions, ctx.n_boot)
    return rows


# --- the rest of the metric set -----------------------------------------------------------


def metric_set_rows(
    study: Study, groups: Sequence[Group], skip: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Every number of the study's full metric set (:meth:`Study.metric_set`) but the metrics
    named in ``skip`` (registry names, e.g. ``headline``), computed over each run label's
    per-sample values by the metric functions themselves
    (:func:`~med_evals.scorers.classification.metric_values`): the numbers a ``-T metrics=full`` log
    holds, named as it names them, whichever set the run logged. One row per run label and
    condition; a number over several conditions (a flip rate) is in the row of the first."""
    rows = []
    for g in groups:
        metrics = [m for m in study.metric_set(True, g.task_args)
                   if registry_unqualified_name(m) not in skip]
        if not metrics:
            continue
        conds = ordered_conditions(study, set(g.conditions()))
        by_cond: dict[str, dict[str, float]] = {}
        for key, value in metric_values(metrics, g.values, counts=True).items():
            cond, sep, name = key.partition("/")
            if not sep or cond not in conds:
                cond, name = conds[0], key
            by_cond.setdefault(cond, {})[name] = value
        for cond in conds:
            if by_cond.get(cond):
                rows.append({"run": g.label, "condition": cond, **by_cond[cond]})
    return rows


def metric_set_table(
    doc: Document, study: Study, groups: Sequence[Group], shown: Collection[str],
    left_out: Mapping[str, str] | None = None,
) -> None:
    """The metrics of the study's full set that its section does not show in tables of its
    own (``shown``) nor leaves out on purpose (``left_out``: name -> why), as
    :func:`metric_set_rows` computes them: a metric added to a study's set appears here with
    no edit of the report."""
    left_out = dict(left_out or {})
    rows = metric_set_rows(study, groups, {*shown, *left_out})
    if not any(r.get("condition") for r in rows):
        rows = [{k: v for k, v in r.items() if k != "condition"} for r in rows]
    why = "; ".join(f"{name}: {reason}" for name, reason in left_out.items())
    doc.table(
        rows,
        "Other metrics of the scorer's full set",
        keys=2 if any("condition" in r for r in rows) else 1,
        note="As a -T metrics=full log names them, computed from each run's per-sample values"
        + (f"; not shown here: {why}" if why else "") + ".",
    )


def generic_section(ctx: Any, study: Study, groups: Sequence[Group]) -> None:
    """A study without a section of its own: its headline numbers, the rest of its metric set
    and paired comparisons."""
    ctx.doc.h2(study.title)
    headline_block(ctx, study, groups)
    metric_set_table(ctx.doc, study, groups, shown=("headline",))
    paired_table(ctx.doc, study, groups, ctx.n_boot)
