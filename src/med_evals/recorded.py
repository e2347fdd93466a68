"""Score recorded replies of the oncology study without calling any model.

Two table layouts are read:

- *wide*, as the study group published its predictions (``trials_with_predictions.csv``): one
  row per trial with ``Annotation_accept`` and one column per model and condition named
  ``<model>_<condition>_response_raw``;
- *long*, as the counterfactual study's ``predictions.csv``: one row per reply with
  ``trial_idx`` (or ``trial``), ``condition``, ``raw_output`` (or ``reply``), optionally
  ``model`` / ``vendor`` and ``ground_truth`` (else taken from the trials dataset).

Every reply goes through the same parser and metrics as the Inspect task
(:func:`~med_evals.scorers.outcome.outcome_value`, :func:`summarize_condition`): the
counterfactual study's rules (strict validity, macro-F1 over valid predictions, clipped Wald
intervals with z = 1.96). Applied to the earlier paper's recorded GPT-3.5 / GPT-4o / o1
replies, these are *not* that paper's own analysis (it used POSITIVE-class F1, unclipped Wald
intervals with n = 250, and read ``NEGATIVE.`` as NEGATIVE).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals.data import DatasetError, read_csv_checked
from med_evals.scorers.labels import TRIAL_OUTCOME, invert_outcome
from med_evals.scorers.outcome import outcome_value, summarize_condition

#: Condition names used by the study groups' scripts, mapped to this package's.
CONDITION_ALIASES = {
    "baseline": "title_abstract",
    "counterfactual_with_doi": "counterfactual_doi",
    "conclusion": "conclusion_only",
}
_WIDE = re.compile(
    r"^(?P<model>.+?)_(?P<condition>methods_results_conclusion|methods_conclusion|conclusion"
    r"|title_abstract|title_only|doi_only|counterfactual_with_doi|counterfactual)_response_raw$"
)
_COUNTERFACTUAL = {"counterfactual", "counterfactual_doi", "counterfactual_title_only"}


def _condition(name: str) -> str:
    return CONDITION_ALIASES.get(name, name)


def read_recorded(path: Path, trials: pd.DataFrame | None = None) -> pd.DataFrame:
    """Replies as a long table: model, condition, trial, reply, target."""
    head = pd.read_csv(path, nrows=0).columns
    wide_cols = [c for c in head if _WIDE.match(c)]
    if wide_cols:
        df = read_csv_checked(
            path,
            ["Annotation_accept", *wide_cols],
            labels={"Annotation_accept": TRIAL_OUTCOME.labels},
        )
        rows = []
        for col in wide_cols:
            m = _WIDE.match(col)
            assert m is not None  # wide_cols are the columns _WIDE matches
            cond = _condition(m["condition"])
            for trial, (truth, reply) in enumerate(
                zip(df["Annotation_accept"], df[col], strict=True)
            ):
                target = invert_outcome(truth) if cond in _COUNTERFACTUAL else truth
                rows.append((m["model"], cond, trial, reply, target))
        return pd.DataFrame(rows, columns=["model", "condition", "trial", "reply", "target"])

    df = read_csv_checked(path, [], aliases={"trial": ["trial_idx"], "reply": ["raw_output"]})
    for col in ("trial", "condition", "reply"):
        if col not in df.columns:
            raise DatasetError(
                f"{path}: neither '<model>_<condition>_response_raw' columns nor a long table "
                f"with trial/trial_idx, condition and reply/raw_output (missing '{col}')"
            )
    model = (
        df["model"]
        if "model" in df.columns
        else df.get("vendor", pd.Series(["recorded"] * len(df)))
    )
    out = pd.DataFrame(
        {
            "model": model,
            "condition": df["condition"].map(_condition),
            "trial": df["trial"].astype(int),
            "reply": df["reply"],
        }
    )
    if "ground_truth" in df.columns:
        out["target"] = df["ground_truth"]
    elif trials is not None:
        truth = trials["Annotation_accept"].reset_index(drop=True)
        out["target"] = [
            invert_outcome(truth[t]) if c in _COUNTERFACTUAL else truth[t]
            for t, c in zip(out["trial"], out["condition"], strict=True)
        ]
    else:
        raise DatasetError(f"{path}: no ground_truth column; pass the trials dataset")
    bad = out.index[~out["target"].isin(TRIAL_OUTCOME.labels)]
    if len(bad):
        raise DatasetError(f"{path}: row {bad[0] + 1}: unknown target {out['target'][bad[0]]!r}")
    return out


def score_recorded(replies: pd.DataFrame) -> list[dict[str, Any]]:
    """One summary per (model, condition), computed exactly as the task's metrics."""
    results = []
    for (model, cond), group in replies.groupby(["model", "condition"], sort=False):
        values = [outcome_value(r.reply, r.target, cond, r.trial) for r in group.itertuples()]
        results.append({"model": model, "condition": cond, **summarize_condition(values)})
    return results


def _ci(value: float, interval: tuple[float, float]) -> str:
    from med_evals.report.document import fmt_ci

    return fmt_ci(value, interval)


def table(results: list[dict[str, Any]]) -> pd.DataFrame:
    """The study's Table 1 layout (Wald intervals), with Wilson intervals and counts beside."""
    rows = []
    for r in results:
        s = r["strict"]
        rows.append(
            {
                "Condition": r["condition"],
                "Model": r["model"],
                "Valid predictions (%)": f"{100 * r['valid_rate']:.1f}",
                "Accuracy (95% CI)": _ci(s["accuracy"], s["accuracy_wald"]),
                "Sensitivity (95% CI)": _ci(s["sensitivity"], s["sensitivity_wald"]),
                "Specificity (95% CI)": _ci(s["specificity"], s["specificity_wald"]),
                "F1 Score (95% CI)": _ci(s["macro_f1"], s["macro_f1_wald"]),
                "F1 POSITIVE": f"{s['f1_positive']:.3f}",
                "Accuracy (Wilson 95% CI)": _ci(s["accuracy"], s["accuracy_wilson"]),
                "F1 (Wilson 95% CI)": _ci(s["macro_f1"], s["macro_f1_wilson"]),
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
