"""Where two runs differ, sample by sample: the report's per-pair lists and ``med-evals diff``.

For every two runs of a study on the same samples (per condition) the samples are paired as
:func:`~med_evals.commands.report.tables.paired_rows` pairs them (the samples both scored, with the
same
target; runs with different label sets are not compared) and judged right or wrong by the same
function (:func:`correct`: the label equals the target). Three lists follow: right only in A,
right only in B (their counts are McNemar's discordant counts, ``a_only`` and ``b_only`` of
:func:`~med_evals.stats.intervals.mcnemar_exact`) and wrong in both. Each row shows the sample id,
the
gold label, both labels, the start of the input (:func:`input_start`: the trial's title, the
question or the claim), both replies (shortened; in report.html the whole reply behind a
``<details>`` toggle) and, for a local log, a link opening the sample in Inspect's log viewer
(:func:`viewer_url`). Each list shows at most :data:`LIMIT` samples and says how many more.

The oncology study also gets a per-trial table of which runs flip between ``title_abstract``
and ``counterfactual`` (:func:`flip_table`). Every text from a log is escaped by the document
(report.md, report.html) or, for ``med-evals diff``, by :func:`med_evals.outputs.text.terminal`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from med_evals.commands.report.document import MISSING, Link, Toggle, p_text
from med_evals.logs.labels import Group
from med_evals.logs.pairs import (
    LIMIT,
    VIEWER,
    Differences,
    Reply,
    SampleRow,
    count,
    differences,
    input_start,
    origins,
    pairs,
    sample_rows,
    shown,
    viewer_folder,
)
from med_evals.study.spec import Study

#: trials shown in the oncology flip table (the study has 250)
TRIAL_LIMIT = 300
#: the oncology conditions whose per-trial flips are listed
FLIP_PAIR = ("title_abstract", "counterfactual")


# --- the report's section -----------------------------------------------------------------


def _reply_cell(reply: Reply | None) -> Any:
    if reply is None:
        return MISSING
    short = reply.short()
    return short if short == reply.full() else Toggle(short, reply.full())


def _doc_row(row: SampleRow) -> dict[str, Any]:
    return {
        "sample": row.sample,
        "gold": row.gold,
        "label A": row.label_a,
        "label B": row.label_b,
        "input (start)": row.input,
        "reply A": _reply_cell(row.reply_a),
        "reply B": _reply_cell(row.reply_b),
        "A in viewer": Link("open", row.view_a) if row.view_a else MISSING,
        "B in viewer": Link("open", row.view_b) if row.view_b else MISSING,
    }




def summary(d: Differences) -> str:
    """One sentence: the pair, the paired samples, the discordant counts beside McNemar's p."""
    p = d.pair
    cond = f", condition {p.condition}" if p.condition else ""
    if d.test is None:
        test = "no valid prediction in either run: no test"
    else:
        test = (f"right only in A: {d.test['a_only']}, right only in B: {d.test['b_only']} "
                f"(McNemar's discordant counts; exact {p_text(d.test['p_value'])})")
    return (f"A = {p.a.label}, B = {p.b.label}{cond}: {len(p.keys)} paired samples; {test}; "
            f"wrong in both: {len(d.both_wrong)} (labels differ in {d.labels_differ}).")


def section(ctx: Any, study: Study, groups: Sequence[Group], limit: int = LIMIT) -> None:
    """The study's per-sample differences, every two runs and condition (nothing when no two
    runs share samples)."""
    found = pairs(study, groups)
    if not found:
        return
    doc = ctx.doc
    root = viewer_folder(r for g in groups for r in g.runs)
    doc.h3(f"{study.title}: where two runs differ")
    viewer = (
        "The links open a sample in Inspect's log viewer: they need inspect view --log-dir "
        f"{shlex.quote(root)} running (its default address, {VIEWER})." if root else
        "No log is local: no viewer links."
    )
    doc.p(
        "Samples of every two runs paired as in the paired comparisons (the same samples with "
        "the same target), per condition: right only in A, right only in B (McNemar's "
        f"discordant counts) and wrong in both, at most {limit} of each; the start of the "
        "input, and each reply shortened (in report.html the whole reply opens from it). "
        + viewer,
        "note",
    )
    for pair in found:
        d = differences(pair)
        cond = f", {pair.condition}" if pair.condition else ""
        doc.p(summary(d))
        for title, ids in (("Right only in A", d.a_only), ("Right only in B", d.b_only),
                           ("Wrong in both", d.both_wrong)):
            rows = [_doc_row(r) for r in sample_rows(study, pair, ids[:limit], root)]
            who = f"{title} (A = {pair.a.label}, B = {pair.b.label}{cond})"
            if ids:
                doc.table(rows, f"{who}: {count(len(ids))}, {shown(len(ids), limit)}")
            else:
                doc.p(f"{who}: none", "note")


# --- the oncology study's flips -----------------------------------------------------------


def flip_rows(study: Study, groups: Sequence[Group], a: str = FLIP_PAIR[0],
              b: str = FLIP_PAIR[1]) -> tuple[list[Group], list[dict[str, Any]]]:
    """(the runs with both conditions, one row per trial): the trial, its title, gold label
    (condition ``a``'s target) and each run's prediction under ``a`` and ``b`` with whether it
    flipped (``yes``/``no`` for a trial valid in both, as the flip rate counts it; missing
    otherwise)."""
    runs = [g for g in groups if {a, b} <= set(g.conditions())]
    by_run = []
    for g in runs:
        conds = g.conditions()
        by_run.append(({v["trial"]: (sid, v) for sid, v in conds[a].items()},
                       {v["trial"]: v for v in conds[b].values()}))
    trials = sorted({t for pa, _ in by_run for t in pa}, key=lambda t: (str(type(t)), t))
    rows = []
    for t in trials:
        first = next((g, pa[t]) for g, (pa, _) in zip(runs, by_run, strict=True) if t in pa)
        group, (sid, value) = first
        entry = origins(group)[sid].samples.get(sid)
        row: dict[str, Any] = {
            "trial": t,
            "title (start)": input_start(study, entry["input"]) if entry else MISSING,
            "gold": value["target"],
        }
        for g, (pa, pb) in zip(runs, by_run, strict=True):
            x, y = pa.get(t, (None, None))[1], pb.get(t)
            row[f"{g.label}: {a} → {b}"] = (
                f"{x['prediction'] if x else MISSING} → {y['prediction'] if y else MISSING}")
            row[f"{g.label}: flipped"] = (
                (x["prediction"] != y["prediction"]) if x and y and x["valid"] and y["valid"]
                else MISSING)
        rows.append(row)
    return runs, rows


def flip_table(ctx: Any, study: Study, groups: Sequence[Group],
               limit: int = TRIAL_LIMIT) -> None:
    """The per-trial table of :func:`flip_rows` (runs with both conditions only)."""
    a, b = FLIP_PAIR
    runs, rows = flip_rows(study, groups)
    if not runs:
        return
    flips = ", ".join(
        f"{g.label}: {sum(r[f'{g.label}: flipped'] is True for r in rows)}" for g in runs)
    ctx.doc.table(
        rows[:limit],
        f"Per trial: each run's prediction under {a} and {b} and whether it flipped",
        keys=3,
        note=f"— : the trial is not valid in both, left out of the flip rate, or not run. "
        f"Flips: {flips}; {len(rows)} trials, {shown(len(rows), limit)}.",
    )
