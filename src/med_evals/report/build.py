"""``med-evals report``: paper-style tables and figures from our tasks' logs, for any number of
models. Reads logs only; never calls a model."""

from __future__ import annotations

import itertools
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals.logs import Run, load_runs
from med_evals.recorded import table as outcome_table
from med_evals.report import figures
from med_evals.report.document import Document, fmt
from med_evals.report.paired import paired_comparison
from med_evals.scorers.classification import accuracy_of, counts_of, macro_f1_of
from med_evals.scorers.effect import LABEL_SETS
from med_evals.scorers.flips import DEFAULT_FLIP_PAIRS, flip_rate, parse_pair
from med_evals.scorers.labels import TRIAL_OUTCOME
from med_evals.scorers.outcome import summarize_condition
from med_evals.tasks.oncology_rct import CONDITIONS as ONCOLOGY_CONDITIONS

REFERENCE_ENV = "MED_EVALS_REFERENCE_DIR"
VERDICT_LABELS = ("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION")


class ReportError(ValueError):
    """The logs cannot be reported together as asked."""


@dataclass
class ReportResult:
    markdown: Path
    html: Path
    figures: list[Path]
    skipped: list[str]
    warnings: list[str] = field(default_factory=list)


def signature(run: Run) -> tuple:
    """What must agree for two runs of a task to stand side by side."""
    p = run.provenance
    return (p.get("data_checksum"), str(p.get("prompt")), p.get("task_version"))


def check_comparable(runs: Sequence[Run], allow_mixed: bool) -> list[str]:
    """Refuse runs of one task whose dataset, prompt or task version differ (unless allowed)."""
    warnings = []
    by_task: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_task[r.task].append(r)
    for task, group in by_task.items():
        sigs = {signature(r) for r in group}
        if len(sigs) > 1:
            lines = "; ".join(
                f"{Path(r.path).name}: data {str(signature(r)[0])[:12]}, prompt {signature(r)[1]}, "
                f"version {signature(r)[2]}"
                for r in group
            )
            msg = f"{task}: runs differ in dataset revision, prompt or task version ({lines})"
            if not allow_mixed:
                raise ReportError(msg + ". Pass --allow-mixed to compare them anyway.")
            warnings.append(msg)
    return warnings


def reference_dir(explicit: str | Path | None) -> Path | None:
    """Where the papers' published numbers are (never committed: read at run time)."""
    candidates = [explicit, os.environ.get(REFERENCE_ENV)]
    candidates.append(Path(__file__).resolve().parents[3].parent / "shared" / "reference")
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


def _provenance_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        p = r.provenance
        args = {k: v for k, v in p["task_args"].items() if v not in (None, "")}
        rows.append(
            {
                "task": r.task,
                "model": r.model,
                "log": Path(r.path).name,
                "data revision": (p.get("revision") or "")[:12],
                "data checksum": (p.get("data_checksum") or "")[:12],
                "prompt": p.get("prompt") or "",
                "task args": ", ".join(f"{k}={v}" for k, v in args.items()),
                "scorer": ", ".join(p.get("scorers") or []),
                "temperature": p.get("temperature"),
                "max tokens": p.get("max_tokens"),
                "epochs": p.get("epochs"),
            }
        )
    return rows


# --- oncology -------------------------------------------------------------------------------


def _merge_by_model(runs: Sequence[Run], warnings: list[str]) -> dict[str, dict[str, dict]]:
    """model -> sample id -> value, over all of a model's logs (first log wins a duplicate)."""
    merged: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in runs:
        dup = [sid for sid in r.values if sid in merged[r.model]]
        if dup:
            warnings.append(
                f"{r.model}: {len(dup)} samples of {Path(r.path).name} (e.g. {dup[0]}) are also "
                "in an earlier log; the earlier values were kept"
            )
        for sid, v in r.values.items():
            merged[r.model].setdefault(sid, v)
    return dict(merged)


def oncology_section(
    doc: Document,
    runs: Sequence[Run],
    out: Path,
    ref: Path | None,
    warnings: list[str],
    n_boot: int,
) -> list[Path]:
    figs: list[Path] = []
    data = _merge_by_model(runs, warnings)
    models = sorted(data)
    present = {v["condition"] for vals in data.values() for v in vals.values()}
    conds = [c for c in ONCOLOGY_CONDITIONS if c in present]
    summaries = {
        (m, c): summarize_condition([v for v in data[m].values() if v["condition"] == c])
        for m in models
        for c in conds
        if any(v["condition"] == c for v in data[m].values())
    }
    doc.h2("Oncology RCT evidence use (Windisch et al. 2026)")
    doc.p(
        "Metrics over valid predictions with the study's 95% Wald intervals (z = 1.96); "
        "Wilson intervals beside them. Valid = reply exactly POSITIVE or NEGATIVE after trimming.",
        "note",
    )
    results = [{"model": m, "condition": c, **s} for (m, c), s in summaries.items()]
    results.sort(key=lambda r: (conds.index(r["condition"]), r["model"]))
    doc.table(outcome_table(results).to_dict("records"), "Table 1 (ours): condition x model")

    if ref and (ref / "oncology-table1-published.csv").is_file():
        pub = pd.read_csv(ref / "oncology-table1-published.csv", dtype=str)
        doc.table(
            pub.to_dict("records"),
            "Published: the study's Table 1 (theirs: GPT-5.2, Gemini 3 Flash, Claude Opus 4.5)",
        )

    f1 = {
        m: [
            summaries.get((m, c), {}).get("strict", {}).get("macro_f1", float("nan")) for c in conds
        ]
        for m in models
    }
    err = {
        m: [
            summaries.get((m, c), {}).get("strict", {}).get("macro_f1_wald", (float("nan"),) * 2)
            for c in conds
        ]
        for m in models
    }
    figs.append(
        figures.grouped_bars(
            out / "oncology_f1_by_condition.png",
            conds,
            f1,
            "Macro-F1 by condition (95% Wald intervals)",
            "macro-F1",
            errors=err,
            reference=0.37,
        )
    )
    doc.figure(figs[-1], "Macro-F1 by condition and model; dashed: majority-class macro-F1 0.37")
    valid = {
        m: [summaries.get((m, c), {}).get("valid_rate", float("nan")) for c in conds]
        for m in models
    }
    figs.append(
        figures.grouped_bars(
            out / "oncology_valid_rates.png", conds, valid, "Valid prediction rate", "share valid"
        )
    )
    doc.figure(figs[-1], "Valid prediction rate by condition and model")
    panels = [
        (
            f"{c}\n{m}",
            [[s["strict"]["tp"], s["strict"]["fn"]], [s["strict"]["fp"], s["strict"]["tn"]]],
        )
        for c in conds
        for m in models
        if (s := summaries.get((m, c)))
    ]
    figs.append(
        figures.confusion_panels(
            out / "oncology_confusion.png", panels, list(TRIAL_OUTCOME.labels), "Confusion matrices"
        )
    )
    doc.figure(figs[-1], "Confusion matrices (valid predictions) per condition and model")

    if "title_abstract" in conds:
        rows = []
        for m in models:
            base = summaries.get((m, "title_abstract"))
            if not base:
                continue
            for c in conds:
                s = summaries.get((m, c))
                if s and c != "title_abstract":
                    drop = base["strict"]["macro_f1"] - s["strict"]["macro_f1"]
                    rows.append(
                        {
                            "model": m,
                            "condition": c,
                            "baseline F1": base["strict"]["macro_f1"],
                            "F1": s["strict"]["macro_f1"],
                            "fall": drop,
                            "fall (% of baseline)": 100 * drop / base["strict"]["macro_f1"],
                        }
                    )
        doc.table(rows, "Fall from baseline (title+abstract) per condition")

    flip_rows, pull_rows = [], []
    for m in models:
        values = list(data[m].values())
        for pair in DEFAULT_FLIP_PAIRS:
            a, b = parse_pair(pair)
            if a in conds and b in conds:
                fr = flip_rate(values, a, b)
                flip_rows.append(
                    {
                        "model": m,
                        "pair": f"{a} vs {b}",
                        "flip rate": fr["p"],
                        "95% Wald": f"{fmt(fr['wald'][0], 2)}-{fmt(fr['wald'][1], 2)}",
                        "95% Wilson": f"{fmt(fr['wilson'][0], 2)}-{fmt(fr['wilson'][1], 2)}",
                        "trials": fr["n"],
                        "excluded": fr["n_excluded"],
                    }
                )
        if "counterfactual" in conds and "counterfactual_doi" in conds:
            cf = {v["trial"]: v for v in values if v["condition"] == "counterfactual"}
            cfd = {v["trial"]: v for v in values if v["condition"] == "counterfactual_doi"}
            comp = paired_comparison(cf, cfd, TRIAL_OUTCOME.labels, n_boot=n_boot)
            s_cf, s_d = summaries[(m, "counterfactual")], summaries[(m, "counterfactual_doi")]
            pull_rows.append(
                {
                    "model": m,
                    "accuracy cf": s_cf["strict"]["accuracy"],
                    "accuracy cf+DOI": s_d["strict"]["accuracy"],
                    "sensitivity cf": s_cf["strict"]["sensitivity"],
                    "sensitivity cf+DOI": s_d["strict"]["sensitivity"],
                    "pull (accuracy drop)": s_cf["strict"]["accuracy"] - s_d["strict"]["accuracy"],
                    "McNemar exact p": comp["p_value"],
                    "macro-F1 diff (95% bootstrap)": _diff_ci(comp),
                }
            )
    doc.table(flip_rows, "Flip rates: share of trials (valid in both) whose prediction differs")
    doc.table(
        pull_rows,
        "Identifier pull: counterfactual vs counterfactual with the real DOI (paired by trial)",
    )
    doc.table(
        _model_pairs(data, conds, TRIAL_OUTCOME.labels, n_boot, "condition"),
        "Paired comparisons between models (same trials and condition)",
    )
    return figs


def _diff_ci(comp: dict[str, Any]) -> str:
    lo, hi = comp["macro_f1_difference_lo"], comp["macro_f1_difference_hi"]
    return f"{fmt(comp['macro_f1_difference'])} ({fmt(lo)} to {fmt(hi)})"


def _model_pairs(
    data: dict[str, dict[str, dict]],
    conds: Iterable[str],
    labels: Sequence[str],
    n_boot: int,
    group_key: str,
) -> list[dict[str, Any]]:
    rows = []
    for a, b in itertools.combinations(sorted(data), 2):
        for c in conds:
            va = {k: v for k, v in data[a].items() if v.get(group_key, "") == c}
            vb = {k: v for k, v in data[b].items() if v.get(group_key, "") == c}
            if not (set(va) & set(vb)):
                continue
            comp = paired_comparison(va, vb, labels, n_boot=n_boot)
            rows.append(
                {
                    "model A": a,
                    "model B": b,
                    group_key: c,
                    "n": comp["n"],
                    "accuracy A": comp["accuracy_a"],
                    "accuracy B": comp["accuracy_b"],
                    "A right only": comp["a_only"],
                    "B right only": comp["b_only"],
                    "McNemar exact p": comp["p_value"],
                    "macro-F1 A-B": comp["macro_f1_difference"],
                    "95% bootstrap": f"{fmt(comp['macro_f1_difference_lo'])} to "
                    f"{fmt(comp['macro_f1_difference_hi'])}",
                }
            )
    return rows


# --- MedEvidence ----------------------------------------------------------------------------


def medevidence_section(
    doc: Document, runs: Sequence[Run], out: Path, warnings: list[str], n_boot: int
) -> list[Path]:
    doc.h2("MedEvidence (Polzak et al. 2026)")
    rows, by_scheme = [], defaultdict(list)
    for r in runs:
        by_scheme[r.provenance["task_args"].get("labels", "five")].append(r)
    figs = []
    for scheme, group in sorted(by_scheme.items()):
        labels = LABEL_SETS[scheme].labels
        data = _merge_by_model(group, warnings)
        conds = sorted({v["condition"] for vals in data.values() for v in vals.values()})
        f1 = defaultdict(list)
        for m in sorted(data):
            for c in conds:
                vals = [v for v in data[m].values() if v["condition"] == c]
                if not vals:
                    f1[m].append(float("nan"))
                    continue
                rows.append(
                    {
                        "labels": scheme,
                        "condition": c,
                        "model": m,
                        "n": len(vals),
                        "accuracy (all)": accuracy_of(vals, False),
                        "macro-F1 (all)": macro_f1_of(vals, labels, False),
                        "accuracy (valid)": accuracy_of(vals, True),
                        "macro-F1 (valid)": macro_f1_of(vals, labels, True),
                        "valid rate": sum(v["valid"] for v in vals) / len(vals),
                    }
                )
                f1[m].append(macro_f1_of(vals, labels, False))
        figs.append(
            figures.grouped_bars(
                out / f"medevidence_f1_{scheme}.png",
                conds,
                dict(f1),
                f"MedEvidence macro-F1 ({scheme} labels)",
                "macro-F1",
            )
        )
        doc.figure(figs[-1], f"MedEvidence macro-F1 over all questions, {scheme}-label scheme")
        doc.table(
            _model_pairs(data, conds, labels, n_boot, "condition"),
            f"Paired comparisons between models ({scheme} labels)",
        )
    doc.table(rows, "Accuracy and macro-F1 per label set and evidence condition")
    return figs


# --- MedREQAL / HealthFC --------------------------------------------------------------------


def verdict_section(
    doc: Document,
    task: str,
    runs: Sequence[Run],
    out: Path,
    ref: Path | None,
    warnings: list[str],
    n_boot: int,
) -> list[Path]:
    title = {"medreqal": "MedREQAL (Vladika et al. 2024)", "healthfc": "HealthFC"}[task]
    doc.h2(title)
    t2, t3, t5 = [], [], []
    gold_counts = None
    per_category: dict[str, dict[str, float]] = defaultdict(dict)
    data = {}
    for r in runs:
        vals = list(r.values.values())
        name = f"{r.model} ({r.provenance['task_args'].get('prompt', 'chat')})"
        data[name] = r.values
        # one verdict scorer holds everything; logs before it had generation/evidence scorers
        gen = list(r.others.get("generation", {}).values()) or vals
        rl = [g["rouge_l"] for g in gen if g.get("rouge_l") is not None]
        bs = [g["bertscore_f1"] for g in gen if g.get("bertscore_f1") is not None]
        t2.append(
            {
                "model (prompt)": name,
                "n": len(vals),
                "accuracy": 100 * accuracy_of(vals, False),
                "macro-F1": 100 * macro_f1_of(vals, VERDICT_LABELS, False),
                "accuracy (valid)": 100 * accuracy_of(vals, True),
                "ROUGE-L": 100 * sum(rl) / len(rl) if rl else float("nan"),
                "BERTScore F1": 100 * sum(bs) / len(bs) if bs else float("nan"),
            }
        )
        c = counts_of(vals, VERDICT_LABELS)
        t3.append(
            {
                "model (prompt)": name,
                "SUPPORTED": c["SUPPORTED"],
                "REFUTED": c["REFUTED"],
                "NEI": c["NOT ENOUGH INFORMATION"],
                "invalid": c["INVALID"],
                "error": c["ERROR"],
            }
        )
        gold = counts_of([{"prediction": v["target"]} for v in vals], VERDICT_LABELS)
        gold_counts = {
            "model (prompt)": "gold",
            "SUPPORTED": gold["SUPPORTED"],
            "REFUTED": gold["REFUTED"],
            "NEI": gold["NOT ENOUGH INFORMATION"],
            "invalid": "",
            "error": "",
        }
        men = list(r.others.get("evidence_mentions", {}).values()) or vals
        t5.append(
            {
                "model (prompt)": name,
                "Cochrane": sum(bool(m.get("cochrane")) for m in men),
                "review*": sum(bool(m.get("review")) for m in men),
                "meta-analys*": sum(bool(m.get("meta_analysis")) for m in men),
            }
        )
        cats = defaultdict(list)
        for v in vals:
            if v.get("category"):
                cats[v["category"]].append(v)
        for cat, cv in cats.items():
            per_category[name][cat] = macro_f1_of(cv, VERDICT_LABELS, False)
    doc.table(t2, "Table 2 (ours): accuracy and macro-F1 over all samples (%), generation scores")
    if ref and task == "medreqal" and (ref / "medreqal-table2-published.csv").is_file():
        doc.table(
            pd.read_csv(ref / "medreqal-table2-published.csv").to_dict("records"),
            "Published: MedREQAL Table 2 (theirs)",
        )
    doc.table(
        t3 + ([gold_counts] if gold_counts else []),
        "Table 3 (ours): predicted-label counts beside the gold counts",
    )
    if ref and task == "medreqal" and (ref / "medreqal-table3-published.csv").is_file():
        doc.table(
            pd.read_csv(ref / "medreqal-table3-published.csv").to_dict("records"),
            "Published: MedREQAL Table 3 (theirs)",
        )
    doc.table(t5, "Table 5 (ours): replies mentioning evidence terms")
    figs = []
    if per_category:
        cats = sorted({c for d in per_category.values() for c in d})
        series = {m: [d.get(c, float("nan")) for c in cats] for m, d in per_category.items()}
        figs.append(
            figures.grouped_bars(
                out / f"{task}_f1_by_category.png",
                cats,
                series,
                f"{title}: macro-F1 by category",
                "macro-F1",
            )
        )
        doc.figure(figs[-1], "Macro-F1 (all samples) per health category")
    doc.table(
        _model_pairs(data, [""], VERDICT_LABELS, n_boot, "_none"),
        "Paired comparisons between runs (same questions)",
    )
    return figs


# --- entry point ----------------------------------------------------------------------------


def build_report(
    logs: Sequence[str | Path],
    out_dir: str | Path,
    allow_mixed: bool = False,
    reference: str | Path | None = None,
    n_boot: int = 2000,
) -> ReportResult:
    """Write ``report.md``, ``report.html`` (self-contained) and PNG figures to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    runs, skipped = load_runs(logs)
    if not runs:
        raise ReportError("no usable log: " + ("; ".join(skipped) or "no log files found"))
    warnings = check_comparable(runs, allow_mixed)
    ref = reference_dir(reference)

    doc = Document("med_evals report")
    doc.p(
        f"{len(runs)} runs of {len({r.model for r in runs})} models; {len(skipped)} logs skipped.",
        "note",
    )
    for w in warnings:
        doc.p("Mixed runs compared: " + w, "warn")
    figs: list[Path] = []
    by_task: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_task[r.task].append(r)
    if "oncology_rct" in by_task:
        figs += oncology_section(doc, by_task["oncology_rct"], fig_dir, ref, warnings, n_boot)
    if "medevidence" in by_task:
        figs += medevidence_section(doc, by_task["medevidence"], fig_dir, warnings, n_boot)
    for task in ("medreqal", "healthfc"):
        if task in by_task:
            figs += verdict_section(doc, task, by_task[task], fig_dir, ref, warnings, n_boot)
    doc.h2("What produced each run")
    doc.table(_provenance_rows(runs))
    if skipped:
        doc.h2("Logs skipped")
        for s in skipped:
            doc.p(s)
    md = out / "report.md"
    md.write_text(doc.markdown(out), encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(doc.html(), encoding="utf-8")
    return ReportResult(md, html_path, figs, skipped, warnings)
