"""The MedEvidence section: headline numbers per label scheme and evidence condition, the other
metrics the logs carry (our lenient reading, accuracy per gold class), paired comparisons.

The paper's scheme is its five classes; the three-label scheme (higher / lower / uncertain) is
ours, and every run that uses it is marked so wherever it appears. The metrics beyond the
headline are the scorer's full metric set (:meth:`Study.metric_set`), computed over each run's
per-sample values: the same numbers a ``-T metrics=full`` run logs, whichever set the run logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from med_evals.report import figures
from med_evals.report.context import Context
from med_evals.report.runs import Group
from med_evals.report.tables import (
    headline_block,
    ordered_conditions,
    paired_table,
)
from med_evals.scorers.headline import metric_values
from med_evals.study import Study

OURS = " [three-label scheme: ours, not the paper's]"


def paper_scheme(study: Study, group: Group) -> bool:
    """The run uses the study's first label set (the paper's five classes)."""
    if not study.label_arg:
        return True
    chosen = group.task_args.get(study.label_arg)
    return chosen is None or str(chosen) == next(iter(study.label_sets))


def shown_metric(name: str) -> bool:
    """Metrics shown beside the headline: our lenient reading and per-gold-class
    accuracy, whatever their exact names; not confusion cells or counts."""
    return (">" not in name and not name.endswith("/n")
            and ("lenient" in name or name.startswith("gold=")))


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
    doc.table(_other_rows(study, groups), "Other metrics of the scorer's full set, as a "
              "-T metrics=full log names them (our lenient reading suffixed _lenient; "
              "gold=<class>: accuracy within a gold class)", keys=2)
    paired_table(doc, study, groups, ctx.n_boot)


def _other_rows(study: Study, groups: Sequence[Group]) -> list[dict[str, Any]]:
    rows = []
    for g in groups:
        for run in g.runs:
            conds = sorted({str(v.get("condition") or "") for v in run.values.values()})
            by_cond: dict[str, dict[str, float]] = {}
            full = metric_values(study.metric_set(True, g.task_args), run.values)
            for key, value in full.items():
                cond, sep, name = key.partition("/")
                if not sep or cond not in conds:
                    cond, name = (conds[0] if len(conds) == 1 else ""), key
                if shown_metric(name):
                    by_cond.setdefault(cond, {})[name] = value
            label = g.label + (f" ({Path(run.path).name})" if len(g.runs) > 1 else "")
            for cond in conds:
                if by_cond.get(cond):
                    rows.append({"run": label, "condition": cond, **by_cond[cond]})
    return rows
