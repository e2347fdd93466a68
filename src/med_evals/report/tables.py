"""Tables every study section shares: the headline table, paired comparisons between runs,
the papers' published tables, and what produced each run.

Every headline number is :meth:`Study.headline_values` over one condition's per-sample values:
the function the logged ``headline`` metric and ``med-evals regress`` call.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals._compat import registry_unqualified_name
from med_evals.pairs import differences, pairs
from med_evals.power import z_sum
from med_evals.report import published
from med_evals.report.document import MISSING, Document, fmt_interval, is_missing
from med_evals.run_labels import Group, ordered_conditions
from med_evals.runs import Run
from med_evals.scorers.headline import metric_values
from med_evals.spec import Study
from med_evals.standing import (
    Interval,
    TrivialBlock,
    block_of,
    detectable,
    entries,
    headline_intervals,
    rankings,
    standing,
    trivial_blocks,
)
from med_evals.stats import bootstrap_difference
from med_evals.trivial import TrivialRow


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


@dataclass
class ConditionStanding:
    """What one condition's headline numbers can say (:mod:`med_evals.standing`): its trivial
    rows, each run's standing against the best of them, each run's intervals."""

    blocks: list[TrivialBlock]
    #: run label -> :func:`med_evals.trivial.beats_trivial` (None: no trivial row to beat)
    standing: dict[str, dict[str, Any] | None]
    #: run label -> headline name -> its 95% interval
    intervals: dict[str, dict[str, Interval]]


def standings(study: Study, groups: Sequence[Group], n_boot: int) -> dict[str, ConditionStanding]:
    """condition -> its :class:`ConditionStanding`, every number over each run's own samples:
    trivial rows once per set of samples (:func:`med_evals.standing.trivial_blocks`), the
    paired bootstrap against the best row and the intervals with ``n_boot`` resamples, seed 0."""
    out = {}
    present = {c for g in groups for c in g.conditions()}
    for cond in ordered_conditions(study, present):
        runs = entries(groups, cond)
        blocks = trivial_blocks(study, cond, runs)
        out[cond] = ConditionStanding(
            blocks,
            {e.label: standing(study, e, block_of(blocks, e.label), n_boot) for e in runs},
            {e.label: headline_intervals(study, e, n_boot) for e in runs},
        )
    return out


def trivial_label(block: TrivialBlock, row: TrivialRow, several: bool) -> str:
    """``trivial: always POSITIVE`` (``(best)`` after the row runs are tested against); with
    several sets of samples in a condition, whose samples: ``trivial (samples of <run>): ...``."""
    whose = f" (samples of {', '.join(block.labels)})" if several else ""
    return f"trivial{whose}: {row.name}" + (" (best)" if row is block.best else "")


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
            "; trivial rows: the same headline function on the same samples, each reply "
            "replaced by a constant answer (the majority class, each label) or a uniform "
            "random one (mean of its draws), every such reply valid; better than trivial: "
            f"the run's {primary.display} minus the best constant row's has a 95% paired "
            f"bootstrap interval ({n_boot} resamples, seed 0) above 0 (docs/numbers.md)"
        )
    doc.table(
        table,
        f"Headline numbers, as logged (metric 'headline') and gated by med-evals regress: "
        f"{over}{trivial}",
        keys=2 if with_cond else 1,
        empty="no run",
    )


def not_better_lines(study: Study, conditions: Mapping[str, ConditionStanding],
                     n_boot: int) -> list[str]:
    """One line per run not better than its best trivial row beyond sampling noise."""
    primary = study.headline[0].display
    lines = []
    for cond, st in conditions.items():
        for label, beat in st.standing.items():
            if beat is None or beat["beats"] is not False:
                continue
            where = f" ({cond})" if cond else ""
            lines.append(
                f"Not better than trivial: {label}{where}: its {primary} {beat['run']:.3f} is "
                f"not above {beat['trivial']}'s {beat['trivial_value']:.3f} beyond sampling "
                f"noise (run − trivial {fmt_diff(beat)}, 95% paired bootstrap, {n_boot} "
                "resamples)"
            )
    return lines


def _method(method: str, over: str, n_boot: int) -> str:
    return (f"Wilson score interval over the {over}" if method == "Wilson" else
            f"95% percentile bootstrap of the headline function ({n_boot} resamples, seed 0)")


def interval_tables(doc: Document, study: Study, conditions: Mapping[str, ConditionStanding],
                    n_boot: int) -> None:
    """Each run's headline numbers' 95% intervals; beside them, where several samples share a
    source (a MedEvidence review), the intervals clustered by it; else a note saying why
    there are none."""
    with_cond = any(conditions)
    plain, clustered = [], []
    methods: dict[str, set[str]] = {h.name: set() for h in study.headline}
    shared = False
    for cond, st in conditions.items():
        for label, ivs in st.intervals.items():
            row: dict[str, Any] = {"run": label}
            if with_cond:
                row["condition"] = cond
            row["n"] = max(i.n for i in ivs.values())
            crow = {**row, f"{study.source}s": max(i.clusters for i in ivs.values())}
            for h in study.headline:
                iv = ivs[h.name]
                methods[h.name].add(iv.method)
                shared = shared or iv.shared
                row[f"{h.display} 95% CI"] = fmt_interval(iv.interval, 3)
                crow[f"{h.display} 95% CI, clustered by {study.source}"] = (
                    MISSING if iv.clustered is None else fmt_interval(iv.clustered, 3))
            plain.append(row)
            if any(iv.clustered is not None for iv in ivs.values()):
                clustered.append(crow)
    how = "; ".join(
        f"{h.display}: " + " or ".join(_method(m, h.over, n_boot) for m in sorted(methods[h.name]))
        for h in study.headline if methods[h.name]
    )
    keys = 2 if with_cond else 1
    doc.table(plain, f"95% intervals of the headline numbers: {how}", keys=keys)
    if not plain:
        return
    if study.source is None:
        doc.p(
            f"No interval clustered by source: the {study.title} data records no source shared "
            "by several samples (no review or trial id), so the intervals treat samples as "
            "independent; they are too narrow where several samples come from one source.",
            "note",
        )
    elif shared:
        doc.table(
            clustered,
            f"95% intervals clustered by {study.source} (samples of one {study.source} err "
            "together): proportions: Wilson's interval at the Korn-Graubard effective sample "
            "size, Inspect's ci_wilson(cluster=); other numbers: the cluster bootstrap "
            f"(whole {study.source}s resampled, {n_boot} resamples, seed 0); docs/numbers.md",
            keys=keys,
        )
    else:
        doc.p(
            f"Clustered by {study.source}: each {study.source} is one sample of each "
            f"condition here, so the interval clustered by {study.source} is the plain one.",
            "note",
        )


def fmt_diff(d: dict[str, float]) -> str:
    """``+0.120 (-0.050 to +0.300)`` for a difference with its 95% interval."""
    if is_missing(d.get("difference")):
        return MISSING
    text = f"{d['difference']:+.3f}"
    if not (is_missing(d.get("lo")) or is_missing(d.get("hi"))):
        text += f" ({d['lo']:+.3f} to {d['hi']:+.3f})"
    return text


#: the paired rows' columns of what each pair detects (:func:`paired_rows`)
DETECTS = "smallest detectable"


def detectable_cell(d: Mapping[str, Any]) -> str:
    """``0.301 (bootstrap se)``, ``0.350 (discordance)``, ``none (too few differ)``, ``no
    estimate (same on every resample)`` or —."""
    x = d["difference"]
    if d.get("se") == 0:
        return "no estimate (same on every resample)"
    if is_missing(x):
        return MISSING
    if math.isinf(x):
        return "none (never differ)" if d.get("discordant") == 0 else "none (too few differ)"
    return f"{x:.3f} ({d['method']})"


def paired_rows(study: Study, groups: Sequence[Group], n_boot: int) -> list[dict[str, Any]]:
    """Every two runs on the samples both scored (per condition, :func:`med_evals.pairs.pairs`):
    McNemar's exact test on correctness and, for each headline number, A - B with a 95% paired
    bootstrap interval of :meth:`Study.headline_values` itself, and the smallest difference
    the pair detects at 80% power (:func:`med_evals.standing.detectable`; keys starting
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
        row["right only in A / in B"] = f"{test['a_only']} / {test['b_only']}"
        row["McNemar exact p"] = test["p_value"]
        boot = bootstrap_difference(pair.a.headline, pair.va, pair.vb, n_boot=n_boot)
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
        "Paired comparisons between runs on the samples both scored: McNemar's exact test on "
        f"correctness; headline differences with a 95% paired percentile bootstrap ({n_boot} "
        "resamples, seed 0) of the headline function",
        keys=keys,
    )
    detects = [{k: v for k, v in r.items() if k in list(r)[:keys] + ["n paired"]
                or k.startswith(DETECTS)} for r in rows if any(k.startswith(DETECTS) for k in r)]
    c = z_sum()
    doc.table(
        detects,
        "What each pair can detect: the smallest true difference of each headline number the "
        "pair's samples detect with 80% power at α = 0.05 (Miller 2024, arXiv 2411.00640; "
        "docs/numbers.md). discordance: a share of samples over the same samples in both runs "
        f"(accuracy over all samples, the valid rate): {c:.2f}·√(q / (n + {c:.2f}²)), q the share "
        "of paired samples on which the two differ (in being right, in being valid); bootstrap "
        f"se: any other number (macro-F1; accuracy over valid replies where some are invalid): "
        f"{c:.2f} × the paired bootstrap's standard error; none: too few samples differ for a "
        "difference of any size",
        keys=keys,
    )


def _same(a: float, b: float) -> bool:
    return (is_missing(a) and is_missing(b)) or a == b


def ranking_table(doc: Document, study: Study, groups: Sequence[Group]) -> None:
    """For three runs or more of a condition on shared samples: ranks with the runs each
    cannot be told apart from (:func:`med_evals.standing.rankings`)."""
    found = rankings(study, groups)
    if not found:
        return
    with_cond = any(r.condition for r in found)
    primary = study.headline_by_name(found[0].primary).display
    rows = []
    for r in found:
        for x in r.ranked:
            row: dict[str, Any] = {}
            if with_cond:
                row["condition"] = r.condition
            row["rank"] = x.rank
            row["possible ranks"] = (str(x.best_rank) if x.best_rank == x.worst_rank
                                     else f"{x.best_rank}-{x.worst_rank}")
            row["run"] = x.run
            row["n shared"] = r.n
            row[f"{primary} (shared samples)"] = x.primary
            if not all(_same(r.values[k], r.accuracy[k]) for k in r.accuracy):
                row["accuracy (shared samples)"] = r.accuracy[x.run]
            row["significantly better than"] = "; ".join(x.worse) or "none"
            row["cannot be told apart from"] = "; ".join(x.inseparable) or "none"
            rows.append(row)
    doc.table(
        rows,
        f"Which runs can be told apart, per condition, on the samples all of them scored (same "
        f"id and target): ranked by {primary} over those samples; every pair compared by "
        "McNemar's exact test on correctness (an invalid reply wrong), the p-values "
        "Holm-corrected together (family-wise α = 0.05); possible ranks: from 1 + the runs "
        "significantly better to k − the runs significantly worse (docs/numbers.md)",
        keys=2 if with_cond else 1,
    )


# --- published tables ---------------------------------------------------------------------


def reference_table(ctx: Any, study: Study, stem: str) -> pd.DataFrame | None:
    """The study's published table whose file name starts with ``stem`` (one of
    :attr:`Study.reference_tables`: shipped, or fetched as :mod:`med_evals.report.published`
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
            # a run split into shards: every shard's log (med_evals.runs.merge_shards)
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
    (:func:`~med_evals.scorers.headline.metric_values`): the numbers a ``-T metrics=full`` log
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
        for key, value in metric_values(metrics, g.values).items():
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
        "Other metrics of the scorer's full set, as a -T metrics=full log names them, computed "
        "from each run's per-sample values" + (f" (not shown here: {why})" if why else ""),
        keys=2 if any("condition" in r for r in rows) else 1,
    )


def generic_section(ctx: Any, study: Study, groups: Sequence[Group]) -> None:
    """A study without a section of its own: its headline numbers, the rest of its metric set
    and paired comparisons."""
    ctx.doc.h2(study.title)
    headline_block(ctx, study, groups)
    metric_set_table(ctx.doc, study, groups, shown=("headline",))
    paired_table(ctx.doc, study, groups, ctx.n_boot)
