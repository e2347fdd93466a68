"""The MedEvidence section: headline numbers per label scheme and evidence condition, the other
metrics of the scorer's full set (our lenient reading, accuracy per gold class and evidence
quality, ...), paired comparisons.

The paper's scheme is its five classes; the three-label scheme (higher / lower / uncertain) is
ours, and every run that uses it is marked so wherever it appears. The metrics beyond the
headline are the scorer's full metric set (:meth:`Study.metric_set`), computed over each run's
per-sample values: the same numbers a ``-T metrics=full`` run logs, whichever set the run logged.
"""

from __future__ import annotations

from collections.abc import Sequence

from med_evals.commands.report import figures
from med_evals.commands.report.abstention import METRIC as ABSTENTION
from med_evals.commands.report.abstention import abstention_table
from med_evals.commands.report.context import Context
from med_evals.commands.report.tables import (
    headline_block,
    metric_set_table,
    paired_table,
)
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.study.spec import Study

OURS = " [three-label scheme: ours, not the paper's]"


def paper_scheme(study: Study, group: Group) -> bool:
    """The run uses the study's first label set (the paper's five classes)."""
    if not study.label_arg:
        return True
    chosen = group.task_args.get(study.label_arg)
    return chosen is None or str(chosen) == next(iter(study.label_sets))


#: the metrics of the set this section shows itself; the others are shown by
#: :func:`~med_evals.commands.report.tables.metric_set_table` but those left out (and why)
SHOWN = ("headline", ABSTENTION)
LEFT_OUT = {
    "confusion_counts": "the confusion cells, 35 per condition, are in a -T metrics=full log",
    "confusion_lenient": "likewise for the lenient reading",
}


def section(ctx: Context, study: Study, groups: Sequence[Group]) -> None:
    doc = ctx.doc
    doc.h2(study.title)
    for g in groups:
        if not paper_scheme(study, g):
            g.label += OURS
    if any(not paper_scheme(study, g) for g in groups):
        doc.p(
            "Runs marked" + OURS + " use our three-label scheme: Higher / Lower / Uncertain, "
            "Uncertain standing for no difference, uncertain effect and insufficient data. The "
            "paper reports only its five classes; these numbers have no published counterpart.",
            "warn",
        )
    doc.p(
        "Replies are graded as the authors' code grades them (the **Answer** field must equal a "
        "class); metrics suffixed _lenient are our lenient reading, not the paper's.",
        "note",
    )
    rows = headline_block(ctx, study, groups)
    abstention_table(doc, study, groups)
    conds = ordered_conditions(study, {r.condition for r in rows})
    head = {(r.label, r.condition): r.values for r in rows}
    nan = float("nan")
    f1 = {g.label: [head.get((g.label, c), {}).get("macro_f1_all", nan) for c in conds]
          for g in groups}
    path = figures.grouped_bars(
        ctx.figures_dir / "medevidence_f1_by_condition.png", conds, f1,
        "MedEvidence macro-F1 over all questions by condition", "macro-F1",
    )
    f1_head = study.headline_by_name("macro_f1_all")
    ours = f"{f1_head.why}; " if f1_head.source == "ours" else ""
    ctx.add_figure(path, f"MedEvidence macro-F1 ({ours}all questions, invalid = miss) by "
                   "condition and run" + ("; runs marked as ours use our three-label scheme"
                            if any(not paper_scheme(study, g) for g in groups) else ""),
                   "no question scored")
    doc.p("In the table of other metrics, _lenient marks our lenient reading; gold=<class>: "
          "accuracy within a gold class; evidence_quality=<level>: within an evidence quality.",
          "note")
    metric_set_table(doc, study, groups, SHOWN, LEFT_OUT)
    paired_table(doc, study, groups, ctx.n_boot)
