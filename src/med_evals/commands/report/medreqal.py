"""The MedREQAL / HealthFC section: Tables 2, 3 and 5 beside the published ones, macro-F1 by
category, paired comparisons; for a run of several prompt templates (``-T prompt=all``) a row
per template and the prompt spread (:mod:`med_evals.commands.report.prompt_spread`).

Accuracy and macro-F1 are the headline numbers (:meth:`Study.headline_values`); ROUGE-L and
BERTScore are :meth:`Study.mean_values` (the logged means' function); counts are
:func:`~med_evals.scorers.classification.counts_of`. BERTScore depends on its encoder: each
run's encoder, layer and rescaling (its scorer settings) are printed beside its score, and only a
score computed as the paper's scale assumes (``roberta-large``, bert-score's default layer 17,
not rescaled) stands in the paper's column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from med_evals.commands.report import figures
from med_evals.commands.report.abstention import METRIC as ABSTENTION
from med_evals.commands.report.abstention import abstention_table
from med_evals.commands.report.context import Context
from med_evals.commands.report.document import is_missing, shown_number
from med_evals.commands.report.prompt_spread import spread_section
from med_evals.commands.report.tables import (
    headline_block,
    metric_set_table,
    paired_table,
    reference_table,
)
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.scorers.classification import counts_of
from med_evals.scorers.medreqal import by_group
from med_evals.study.spec import Study

#: bert-score's defaults for the encoder that gives the paper's 84-86 range (the paper does not
#: name its encoder; see docs/medreqal.md)
PAPER_SCALE = ("roberta-large", (None, 17), False)
#: the metrics of the set this section shows itself (Tables 2, 3 and 5, the figure by
#: category); the others are shown by :func:`~med_evals.commands.report.tables.metric_set_table`,
# but
#: those left out (and why)
SHOWN = (
    "headline",
    ABSTENTION,
    "predicted_label_counts",
    "rouge_l_mean",
    "bertscore_f1_mean",
    "evidence_mention_counts",
    "macro_f1_by_category",
)
LEFT_OUT = {"confusion_matrix": "its 15 cells are in a -T metrics=full log; Table 3 has the "
            "predicted and gold counts"}
PAPER_BSC = "BERTScore F1 (%), paper's scale"
OTHER_BSC = "BERTScore F1 (%), other encoder"


def pct(x: float) -> str | None:
    """A share as a percentage with one decimal, as the paper prints it (None: missing); the
    CSV export has the percentage in full."""
    return None if is_missing(x) else shown_number(f"{100 * x:.1f}", 100 * x)


def encoder_of(group: Group) -> tuple[str, bool]:
    """(the run's BERTScore settings in words, whether they are the paper's scale)."""
    settings: Mapping[str, Any] = group.runs[-1].provenance.get("scorer_settings", {}).get(
        group.study.scorer_name, {}
    )
    if not settings.get("reference_key") or settings.get("bertscore") is False:
        return "not computed", False
    model, layer = settings.get("bertscore_model"), settings.get("bertscore_layers")
    rescaled = bool(settings.get("bertscore_rescale"))
    words = f"{model}, layer {layer if layer else 'default'}, {'' if rescaled else 'not '}rescaled"
    name, layers, rescale = PAPER_SCALE
    return words, model == name and layer in layers and rescaled == rescale


def section(ctx: Context, study: Study, groups: Sequence[Group]) -> None:
    doc = ctx.doc
    doc.h2(study.title)
    rows = headline_block(ctx, study, groups)
    abstention_table(doc, study, groups)
    spread_section(doc, study, groups)
    head = {(r.label, r.condition): r.values for r in rows}
    labels = study.labels()
    t2, t3, t5, gold = [], [], [], {}
    for name, g, cond, vals in entries(study, groups):
        words, paper_scale = encoder_of(g)
        means = study.mean_values(vals)
        bsc = means["bertscore_f1_mean"]
        t2.append({
            "run": name,
            "Accuracy (%)": pct(head[(g.label, cond)]["accuracy_all"]),
            "Macro-F1 (%)": pct(head[(g.label, cond)]["macro_f1_all"]),
            "ROUGE-L (%)": pct(means["rouge_l_mean"]),
            PAPER_BSC: pct(bsc) if paper_scale else None,
            OTHER_BSC: None if paper_scale else pct(bsc),
            "BERTScore encoder": words,
        })
        c = counts_of(vals, labels)
        t3.append({"run": name, **{lab: c[lab] for lab in labels},
                   "invalid": c["INVALID"], "error": c["ERROR"]})
        g_counts = counts_of([{"prediction": v["target"]} for v in vals], labels)
        gold[name] = tuple(g_counts[lab] for lab in labels)
        t5.append({
            "run": name,
            "replies": len(vals),
            "Cochrane": sum(bool(v.get("cochrane")) for v in vals),
            "review*": sum(bool(v.get("review")) for v in vals),
            "meta-analys*": sum(bool(v.get("meta_analysis")) for v in vals),
        })
    t2_pub = reference_table(ctx, study, f"{study.task}-table2")
    for rec in t2_pub.to_dict("records") if t2_pub is not None else []:
        t2.append({
            "run": f"{rec['model']} (published)",
            "Accuracy (%)": rec["accuracy"],
            "Macro-F1 (%)": rec["f1_macro"],
            "ROUGE-L (%)": rec["rouge_l"],
            PAPER_BSC: rec["bertscore"],
            OTHER_BSC: None,
            "BERTScore encoder": "not named in the paper",
        })
    doc.table(
        t2,
        "Table 2 (ours): accuracy, macro-F1, ROUGE-L and BERTScore F1 (%)",
        note="Accuracy and macro-F1 over all samples, ROUGE-L and BERTScore F1 over replies "
        "with a reference; BERTScore only in the paper's column when computed with "
        "roberta-large, layer 17, not rescaled"
        + ("; (published) rows: the paper's Table 2 (theirs)" if t2_pub is not None else "")
        + ".",
    )
    distinct = sorted(set(gold.values()))
    for counts in distinct:
        who = "" if len(distinct) == 1 else " (" + ", ".join(
            k for k, v in gold.items() if v == counts) + ")"
        t3.append({"run": f"gold{who}", **dict(zip(labels, counts, strict=True))})
    t3_pub = reference_table(ctx, study, f"{study.task}-table3")
    for rec in t3_pub.to_dict("records") if t3_pub is not None else []:
        name = "gold (published)" if rec["model"] == "gold" else f"{rec['model']} (published)"
        t3.append({"run": name, **dict(zip(labels, (rec["supported"], rec["refuted"], rec["nei"]),
                                            strict=True))})
    doc.table(t3, "Table 3 (ours): predicted-label counts beside the gold counts",
              note="(published) rows: the paper's Table 3 (theirs)." if t3_pub is not None
              else "")
    doc.table(t5, "Table 5 (ours): replies mentioning evidence terms")
    _by_category(ctx, study, groups, labels)
    metric_set_table(doc, study, groups, SHOWN, LEFT_OUT)
    paired_table(doc, study, groups, ctx.n_boot)


def entries(
    study: Study, groups: Sequence[Group]
) -> list[tuple[str, Group, str, list[dict[str, Any]]]]:
    """(row name, group, condition, values) of each run, and of each prompt template of a run
    of several (``-T prompt=all``: named ``<run>, prompt=<template>``), templates in the
    paper's order: the rows of Tables 2, 3 and 5 and the figure's series."""
    present = {c for g in groups for c in g.conditions()}
    out = []
    for cond in ordered_conditions(study, present):
        for g in groups:
            values = g.conditions().get(cond)
            if values:
                name = f"{g.label}, prompt={cond}" if cond else g.label
                out.append((name, g, cond, list(values.values())))
    return out


def _by_category(ctx: Context, study: Study, groups: Sequence[Group], labels: Any) -> None:
    per: dict[str, dict[str, float]] = {}
    for name, _, _, vals in entries(study, groups):
        by_category = by_group(vals, "category", "macro_f1")
        if by_category:
            per[name] = by_category
    if not per:
        return
    cats = sorted({c for d in per.values() for c in d})
    series = {m: [d.get(c, float("nan")) for c in cats] for m, d in per.items()}
    path = figures.grouped_bars(
        ctx.figures_dir / f"{study.task}_f1_by_category.png", cats, series,
        f"{study.title}: macro-F1 (all samples) by health category", "macro-F1",
    )
    ctx.add_figure(path, "Macro-F1 over all samples per health category", "no sample")
