"""The oncology study's section: Table 1 beside the published one, figures, falls from the
baseline, flip rates, the identifier pull and paired comparisons.

Valid rate, accuracy and macro-F1 are the headline numbers (:meth:`Study.headline_values`);
sensitivity, specificity, F1 of POSITIVE, the intervals and the counts are
:func:`~med_evals.scorers.oncology_rct.summarize_condition`'s, the function behind the logged
metrics. Any mix of runs works: a number that needs a condition a run does not have is left
out, and a comparison with no valid prediction says so instead of printing a test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from med_evals.commands.report import differences, figures
from med_evals.commands.report.context import Context
from med_evals.commands.report.document import (
    Shown,
    fmt_ci,
    fmt_interval,
    printed_interval,
    shown_number,
)
from med_evals.commands.report.tables import (
    headline_block,
    metric_set_table,
    paired_table,
    reference_table,
)
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.scorers.oncology_rct import (
    DEFAULT_FLIP_PAIRS,
    flip_rate,
    parse_pair,
    summarize_condition,
)
from med_evals.stats.intervals import mcnemar_exact
from med_evals.study.spec import Study
from med_evals.tasks.oncology_conditions import condition_name

BASELINE = "title_abstract"
IDENTIFIER_PAIR = ("counterfactual", "counterfactual_doi")
#: the metrics of the study's set this section shows in tables of its own (Table 1 and its
#: continuations, the flip rates); every other metric of the set is shown by
#: :func:`~med_evals.commands.report.tables.metric_set_table`, so a metric added to the set appears
SHOWN = (
    "headline",
    "f1_positive_valid",
    "sensitivity_valid",
    "specificity_valid",
    "counts",
    "confusion",
    "intervals_95",
    "flip_rates",
)


def published_condition(name: str) -> str:
    """The study's condition names (``Counterfactual + DOI``) as this package's."""
    key = "_".join(name.lower().replace("+", " ").split())
    return condition_name(key)


def section(ctx: Context, study: Study, groups: Sequence[Group]) -> None:
    doc = ctx.doc
    doc.h2(study.title)
    rows = headline_block(ctx, study, groups)
    conds = ordered_conditions(study, {r.condition for r in rows})
    head = {(r.label, r.condition): r.values for r in rows}
    summ = {
        (g.label, c): summarize_condition(list(vals.values()))
        for g in groups
        for c, vals in g.conditions().items()
    }
    _table1(ctx, study, groups, conds, head, summ)
    _figures(ctx, groups, conds, head, summ)
    _falls(ctx, groups, head)
    _flips(ctx, groups)
    differences.flip_table(ctx, study, groups)  # which runs flip, trial by trial
    _identifier_pull(ctx, groups, summ)
    metric_set_table(doc, study, groups, SHOWN)
    paired_table(doc, study, groups, ctx.n_boot)


def _table1(
    ctx: Context,
    study: Study,
    groups: Sequence[Group],
    conds: list[str],
    head: dict[tuple[str, str], dict[str, float]],
    summ: dict[tuple[str, str], dict[str, Any]],
) -> None:
    pub = reference_table(ctx, study, "oncology-table1")
    main, wilson, counts = [], [], []
    for c in conds:
        for g in groups:
            if (g.label, c) not in summ:
                continue
            h, s = head[(g.label, c)], summ[(g.label, c)]
            st = s["strict"]
            main.append({
                "condition": c,
                "run": g.label,
                "Valid predictions (%)": shown_number(f"{100 * h['valid_rate']:.1f}",
                                                      100 * h["valid_rate"]),
                "Accuracy (95% CI)": fmt_ci(h["accuracy_valid"], st["accuracy_wald"]),
                "Sensitivity (95% CI)": fmt_ci(st["sensitivity"], st["sensitivity_wald"]),
                "Specificity (95% CI)": fmt_ci(st["specificity"], st["specificity_wald"]),
                "F1 Score (95% CI)": fmt_ci(h["macro_f1_valid"], st["macro_f1_wald"]),
            })
            wilson.append({
                "condition": c,
                "run": g.label,
                "Accuracy (Wilson 95% CI)": fmt_ci(st["accuracy"], st["accuracy_wilson"]),
                "F1 (Wilson 95% CI)": fmt_ci(st["macro_f1"], st["macro_f1_wilson"]),
                "Sensitivity (Wilson)": fmt_ci(st["sensitivity"], st["sensitivity_wilson"]),
                "Specificity (Wilson)": fmt_ci(st["specificity"], st["specificity_wilson"]),
                "F1 POSITIVE (95% CI)": fmt_ci(st["f1_positive"], st["f1_positive_wald"]),
                "F1 POSITIVE (Wilson)": fmt_ci(st["f1_positive"], st["f1_positive_wilson"]),
            })
            counts.append({
                "condition": c,
                "run": g.label,
                "n": s["n_total"],
                "valid": s["n_valid"],
                "invalid": s["n_invalid"],
                "error": s["n_error"],
                "exact case": s["n_exact_case"],
                "TP/FN/FP/TN": Shown(f"{st['tp']}/{st['fn']}/{st['fp']}/{st['tn']}",
                                     [(k.upper(), st[k]) for k in ("tp", "fn", "fp", "tn")]),
            })
        if pub is not None:
            for rec in pub.to_dict("records"):
                if published_condition(rec["Condition"]) == c:
                    main.append({
                        "condition": c,
                        "run": f"{rec['Model']} (published)",
                        **{k: printed_interval(v) for k, v in rec.items()
                           if k not in ("Condition", "Model")},
                    })
    note = ("Accuracy, sensitivity, specificity and F1 are over valid predictions (a reply that "
            "is exactly POSITIVE or NEGATIVE after trimming), with the study's 95% Wald "
            "intervals (z = 1.96, clipped); Wilson intervals in the next table; the valid rate "
            "is over all samples. — marks a value that does not exist (no valid prediction, or "
            "not run).")
    if pub is not None:
        note += (
            " Rows marked (published) are the study's own Table 1 (theirs: GPT-5.2, Gemini 3 "
            "Flash, Claude Opus 4.5), for the conditions these runs have."
        )
    ctx.doc.table(main, "Table 1 (ours): condition × run, the study's layout", keys=2,
                  note=note)
    ctx.doc.table(wilson, "Table 1, continued: Wilson intervals and F1 of POSITIVE", keys=2)
    ctx.doc.table(counts, "Table 1, continued: counts and confusion cells", keys=2)


def _figures(
    ctx: Context,
    groups: Sequence[Group],
    conds: list[str],
    head: dict[tuple[str, str], dict[str, float]],
    summ: dict[tuple[str, str], dict[str, Any]],
) -> None:
    nan = float("nan")
    f1 = {g.label: [head.get((g.label, c), {}).get("macro_f1_valid", nan) for c in conds]
          for g in groups}
    err = {g.label: [summ[(g.label, c)]["strict"]["macro_f1_wald"] if (g.label, c) in summ
                     else (nan, nan) for c in conds] for g in groups}
    path = figures.grouped_bars(
        ctx.figures_dir / "oncology_f1_by_condition.png", conds, f1,
        "Macro-F1 over valid predictions by condition (95% Wald intervals)", "macro-F1",
        errors=err,
    )
    ctx.add_figure(path, "Macro-F1 (valid predictions) by condition and run; — on the axis: "
                   "no valid prediction", "no valid prediction in any run, nothing to draw")
    valid = {g.label: [head.get((g.label, c), {}).get("valid_rate", nan) for c in conds]
             for g in groups}
    path = figures.grouped_bars(
        ctx.figures_dir / "oncology_valid_rates.png", conds, valid,
        "Valid prediction rate by condition (all samples)", "share valid",
    )
    ctx.add_figure(path, "Valid prediction rate by condition and run", "no sample")
    panels = [
        (f"{c} · {g.label}", [[st["tp"], st["fn"]], [st["fp"], st["tn"]]])
        for c in conds
        for g in groups
        if (st := summ.get((g.label, c), {}).get("strict"))
    ]
    path = figures.confusion_panels(
        ctx.figures_dir / "oncology_confusion.png", panels, ["POSITIVE", "NEGATIVE"],
        "Confusion matrices of valid predictions",
    )
    ctx.add_figure(path, "Confusion matrices (valid predictions) per condition and run",
                   "no valid prediction in any run, no confusion matrix")


def _falls(ctx: Context, groups: Sequence[Group], head: dict[tuple[str, str], dict]) -> None:
    rows = []
    for g in groups:
        base = head.get((g.label, BASELINE))
        if base is None:
            continue
        for c in g.conditions():
            if c == BASELINE or (g.label, c) not in head:
                continue
            b, f = base["macro_f1_valid"], head[(g.label, c)]["macro_f1_valid"]
            rows.append({
                "run": g.label,
                "condition": c,
                "baseline F1": b,
                "F1": f,
                "fall": b - f,
                "fall (% of baseline)": 100 * (b - f) / b if b else float("nan"),
            })
    ctx.doc.table(rows, "Fall in macro-F1 from the baseline (title_abstract) per condition",
                  keys=2)


def _flips(ctx: Context, groups: Sequence[Group]) -> None:
    rows = []
    for g in groups:
        conds = g.conditions()
        extra = g.task_args.get("flip_pairs") or []
        pairs = [parse_pair(p) for p in (*DEFAULT_FLIP_PAIRS, *extra)]
        for a, b in dict.fromkeys(pairs):
            if a not in conds or b not in conds:
                continue
            fr = flip_rate(g.values.values(), a, b)
            rows.append({
                "run": g.label,
                "pair": f"{a} vs {b}",
                "flip rate": fr["p"] if fr["n"] else "no trial valid in both",
                "95% Wald": fmt_interval(fr["wald"]),
                "95% Wilson": fmt_interval(fr["wilson"]),
                "trials valid in both": fr["n"],
                "excluded": fr["n_excluded"],
                "flip rate, all paired (ours)": fr["all_paired"]["p"],
                "95% Wilson, all paired": fmt_interval(fr["all_paired"]["wilson"]),
                "trials paired": fr["all_paired"]["n"],
            })
    ctx.doc.table(rows, "Flip rates between paired conditions", keys=2,
                  note="Flip rate: the share of trials (valid in both conditions) whose "
                  "prediction differs; all paired (ours): every trial with a reply in both, "
                  "INVALID an outcome of its own.")


def _identifier_pull(
    ctx: Context, groups: Sequence[Group], summ: dict[tuple[str, str], dict[str, Any]]
) -> None:
    cf, cfd = IDENTIFIER_PAIR
    rows = []
    for g in groups:
        conds = g.conditions()
        if cf not in conds or cfd not in conds:
            continue
        a = {v["trial"]: v for v in conds[cf].values()}
        b = {v["trial"]: v for v in conds[cfd].values()}
        trials = sorted(set(a) & set(b), key=str)
        s_cf, s_d = summ[(g.label, cf)]["strict"], summ[(g.label, cfd)]["strict"]
        row: dict[str, Any] = {
            "run": g.label,
            "accuracy cf": s_cf["accuracy"],
            "accuracy cf+DOI": s_d["accuracy"],
            "sensitivity cf": s_cf["sensitivity"],
            "sensitivity cf+DOI": s_d["sensitivity"],
            "pull (accuracy drop)": s_cf["accuracy"] - s_d["accuracy"],
            "paired trials": len(trials),
        }
        va, vb = [a[t] for t in trials], [b[t] for t in trials]
        if any(v["valid"] for v in va + vb):
            test = mcnemar_exact([int(v["correct"]) for v in va], [int(v["correct"]) for v in vb])
            row["McNemar exact p"] = test["p_value"]
        else:
            row["McNemar exact p"] = "no valid prediction"
        rows.append(row)
    ctx.doc.table(
        rows,
        "Identifier pull: counterfactual (cf) vs counterfactual with the real DOI",
        note="Paired by trial; accuracy and sensitivity over valid predictions.",
    )


def recorded_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    """``med-evals score-recorded``'s table of :func:`~med_evals.commands.score_recorded.
    score_recorded`: the study's Table 1 layout (Wald intervals), with Wilson intervals and
    counts beside."""
    rows = []
    for r in results:
        s = r["strict"]
        rows.append(
            {
                "Condition": r["condition"],
                "Model": r["model"],
                "Valid predictions (%)": f"{100 * r['valid_rate']:.1f}",
                "Accuracy (95% CI)": fmt_ci(s["accuracy"], s["accuracy_wald"]),
                "Sensitivity (95% CI)": fmt_ci(s["sensitivity"], s["sensitivity_wald"]),
                "Specificity (95% CI)": fmt_ci(s["specificity"], s["specificity_wald"]),
                "F1 Score (95% CI)": fmt_ci(s["macro_f1"], s["macro_f1_wald"]),
                "F1 POSITIVE": f"{s['f1_positive']:.3f}",
                "Accuracy (Wilson 95% CI)": fmt_ci(s["accuracy"], s["accuracy_wilson"]),
                "F1 (Wilson 95% CI)": fmt_ci(s["macro_f1"], s["macro_f1_wilson"]),
                "n": r["n_total"],
                "valid": r["n_valid"],
                "invalid": r["n_invalid"],
                "error": r["n_error"],
                "exact case": r["n_exact_case"],
                "accuracy (lenient)": f"{r['lenient']['accuracy']:.3f}",
                "TP/FN/FP/TN": f"{s['tp']}/{s['fn']}/{s['fp']}/{s['tn']}",
            }
        )
    return pd.DataFrame(rows)
