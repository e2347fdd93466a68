"""Score recorded replies of the oncology study without calling any model.

Two table layouts are read:

- *wide*, as the study group published its predictions (``trials_with_predictions.csv``): one
  row per trial with ``Annotation_accept`` and one column per model and condition named
  ``<model>_<condition>_response_raw``;
- *long*, as the counterfactual study's ``predictions.csv``: one row per reply with
  ``trial_idx`` (or ``trial``), ``condition``, ``raw_output`` (or ``reply``), optionally
  ``model`` / ``vendor`` and ``ground_truth`` (else taken from the trials dataset).

Every reply goes through the same parser and metrics as the Inspect task
(:func:`~med_evals.scorers.oncology_rct.outcome_value`, :func:`summarize_condition`): the
counterfactual study's rules (strict validity, macro-F1 over valid predictions, clipped Wald
intervals with z = 1.96). Applied to the earlier paper's recorded GPT-3.5 / GPT-4o / o1
replies, these are *not* that paper's own analysis (it used POSITIVE-class F1, unclipped Wald
intervals with n = 250, and read ``NEGATIVE.`` as NEGATIVE).

A blank recorded reply (empty or whitespace) is INVALID, as in the study's analysis: its
``run_evaluation.py`` stored each reply stripped, so a reply of whitespace only reads back blank
(and was parsed INVALID), while a call that returned no text was stored blank too but parsed
ERROR. A table that carries the study's own parse (``parsed_output``, as ``predictions.csv``
does) keeps ERROR for those rows; without it, a blank reply is INVALID. (A live run's empty reply
stays ERROR: :func:`~med_evals.scorers.oncology_rct.parse_outcome_strict`.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals.data.datasets import DatasetError, read_csv_checked, row_error
from med_evals.scorers.labels import ERROR
from med_evals.scorers.oncology_rct import (
    TRIAL_OUTCOME,
    invert_outcome,
    outcome_value,
    summarize_condition,
)
from med_evals.tasks.oncology_conditions import (
    CONDITION_ALIASES,
    CONDITIONS,
    COUNTERFACTUAL,
    condition_name,
)

#: a wide table's reply column, ``<model>_<condition>_response_raw``: any condition of the
#: study (:data:`CONDITIONS`) or a name the study groups' scripts use for one, longest first
#: (so ``counterfactual_doi`` is not read as ``counterfactual``)
_WIDE = re.compile(
    r"^(?P<model>.+?)_(?P<condition>"
    + "|".join(sorted((*CONDITIONS, *CONDITION_ALIASES), key=len, reverse=True))
    + r")_response_raw$"
)


#: what a recorded reply stored blank stands for (see the module docstring)
RECORDED_ERROR = "no reply recorded (the study's parse of this row: ERROR)"
#: the reply a blank INVALID recording is scored (and replayed) as: text without a label
BLANK_REPLY = " "


def is_blank(reply: object) -> bool:
    """A recorded reply that is missing, empty or whitespace only."""
    return reply is None or (isinstance(reply, float) and reply != reply) or not str(reply).strip()


def read_recorded(path: Path, trials: pd.DataFrame | None = None) -> pd.DataFrame:
    """Replies as a long table: model, condition, trial, reply, target, error.

    ``error`` is set (:data:`RECORDED_ERROR`) where the reply is blank and the table's own parse
    (``parsed_output``) says ERROR; any other blank reply is INVALID.

    Raises:
        DatasetError: the file is missing, empty, not CSV, or not a recorded table (names what
            is wrong: the file, row and column).
    """
    df = read_csv_checked(path, [], aliases={"trial": ["trial_idx"], "reply": ["raw_output"]})
    wide_cols = [c for c in df.columns if _WIDE.match(c)]
    if wide_cols:
        return _read_wide(path, df, wide_cols)
    for col in ("trial", "condition", "reply"):
        if col not in df.columns:
            raise DatasetError(
                f"{path}: not a table of recorded replies: neither "
                "'<model>_<condition>_response_raw' columns nor a long table with trial/trial_idx, "
                f"condition and reply/raw_output (missing '{col}'; found: "
                f"{', '.join(map(repr, df.columns[:8]))}{' ...' if len(df.columns) > 8 else ''})"
            )
    model = (
        df["model"]
        if "model" in df.columns
        else df.get("vendor", pd.Series(["recorded"] * len(df)))
    )
    trial = pd.to_numeric(df["trial"].str.strip(), errors="coerce")
    bad = df.index[trial.isna() | (trial < 0) | (trial % 1 != 0)]
    if len(bad):
        raise row_error(
            path, bad, "trial", f"{df['trial'][bad[0]]!r} is not a trial index (0, 1, ...)"
        )
    out = pd.DataFrame(
        {
            "model": model,
            "condition": df["condition"].map(condition_name),
            "trial": trial.astype(int),
            "reply": df["reply"],
        }
    )
    parsed = df["parsed_output"].str.strip().str.upper() if "parsed_output" in df.columns else None
    out["error"] = [
        RECORDED_ERROR if parsed is not None and parsed[i] == ERROR and is_blank(r) else None
        for i, r in zip(df.index, df["reply"], strict=True)
    ]
    if "ground_truth" in df.columns:
        out["target"] = df["ground_truth"]
    elif trials is not None:
        truth = trials["Annotation_accept"].reset_index(drop=True)
        beyond = out.index[out["trial"] >= len(truth)]
        if len(beyond):
            raise row_error(
                path,
                beyond,
                "trial",
                f"trial {out['trial'][beyond[0]]} is not in the trials dataset "
                f"(0-{len(truth) - 1})",
            )
        out["target"] = [
            invert_outcome(truth[t]) if c in COUNTERFACTUAL else truth[t]
            for t, c in zip(out["trial"], out["condition"], strict=True)
        ]
    else:
        raise DatasetError(
            f"{path}: no ground_truth column; pass the trials dataset (--with-trials)"
        )
    bad = out.index[~out["target"].isin(TRIAL_OUTCOME.labels)]
    if len(bad):
        raise DatasetError(f"{path}: row {bad[0] + 1}: unknown target {out['target'][bad[0]]!r}")
    return out


def _read_wide(path: Path, df: pd.DataFrame, wide_cols: list[str]) -> pd.DataFrame:
    """The study group's wide layout (one row per trial, one column per model and condition)."""
    if "Annotation_accept" not in df.columns:
        raise DatasetError(
            f"{path}: a wide table of recorded replies needs the ground truth column "
            "'Annotation_accept'"
        )
    bad = df.index[~df["Annotation_accept"].isin(TRIAL_OUTCOME.labels)]
    if len(bad):
        raise row_error(
            path,
            bad,
            "Annotation_accept",
            f"unknown label {df['Annotation_accept'][bad[0]]!r} "
            f"(allowed: {', '.join(sorted(TRIAL_OUTCOME.labels))})",
        )
    rows = []
    for col in wide_cols:
        m = _WIDE.match(col)
        assert m is not None  # wide_cols are the columns _WIDE matches
        cond = condition_name(m["condition"])
        for trial, (truth, reply) in enumerate(zip(df["Annotation_accept"], df[col], strict=True)):
            target = invert_outcome(truth) if cond in COUNTERFACTUAL else truth
            rows.append((m["model"], cond, trial, reply, target, None))
    return pd.DataFrame(
        rows, columns=["model", "condition", "trial", "reply", "target", "error"]
    )


def scored_reply(reply: object, error: object) -> tuple[str | None, str | None]:
    """(reply, error) as the task's scorer takes them: a recorded ERROR stays one; any other
    blank reply becomes :data:`BLANK_REPLY`, text without a label (INVALID), as the study
    parsed it."""
    if isinstance(error, str) and error:
        return None, error
    return (BLANK_REPLY if is_blank(reply) else str(reply)), None


def score_recorded(replies: pd.DataFrame) -> list[dict[str, Any]]:
    """One summary per (model, condition), computed exactly as the task's metrics."""
    results = []
    for (model, cond), group in replies.groupby(["model", "condition"], sort=False):
        values = []
        for r in group.itertuples():
            reply, error = scored_reply(r.reply, getattr(r, "error", None))
            values.append(outcome_value(reply, r.target, cond, r.trial, error))
        results.append({"model": model, "condition": cond, **summarize_condition(values)})
    return results


def score_recorded_command(table: str | Path, with_trials: bool = False,
                           data_dir: str | None = None, out: str | None = None) -> int:
    """``med-evals score-recorded``: print (and with ``out`` write as CSV) the study's numbers
    of each recorded model and condition of ``table``; ``with_trials``: the ground truth from
    the trials dataset (a long table without ``ground_truth``)."""
    from med_evals.commands.console import emit_table
    from med_evals.commands.report.oncology_rct import recorded_table
    from med_evals.outputs.files import check_file

    if out:
        check_file(out, "--out")  # before any work
    trials = None
    if with_trials:
        from med_evals.tasks.oncology_rct import load_trials

        trials, _ = load_trials(data_dir)
    replies = read_recorded(Path(table), trials)
    emit_table(recorded_table(score_recorded(replies)), out)
    return 0
