"""Checks on a counterfactual rewrite (``counterfactual_build``), recorded in its score only.

The oncology study flipped each trial's primary-endpoint result by hand with minimal edits, and
changed both the Results and the Conclusions in 250 of 250 trials, the title in 13 and the
Methods in 4 (never the Introduction). A model's rewrite is accepted only when

1. it parses (a JSON object with the title and the four sections);
2. the introduction and methods change by at most ``max_background_change`` each;
3. the results *and* the conclusions both change;
4. the edit stays small: results and conclusions together change by at most
   ``max_outcome_change``, the title by at most ``max_title_change`` (difflib ratios);
5. the grader (``--model-role grader=...``), given the rewrite as the study gave abstracts to
   its models, classifies it as the inverted label: the flip is verified, not assumed. Its
   label is read by the study's own strict rule (the reply, stripped, is exactly a label), so
   its verdict is its whole reply: a reply that gives a label and quotes anything (the other
   label the rewrite plants, in a ``>`` line, quote marks or a fenced block) is ``INVALID``,
   and the rewrite is rejected (``grader_disagrees``); a label the grader quotes is never read
   as its verdict, and never accepts a rewrite.

A provider failure (builder or grader) is an ``error``, counted apart from rejections. The
scorer writes nothing: the accepted rewrite's ``trials.csv`` row travels in the score's
metadata, and ``med-evals export-counterfactuals`` writes the CSV from the logs.
"""

from __future__ import annotations

import difflib
import json
import math
import statistics
from collections.abc import Mapping
from typing import Any

from inspect_ai.model import ChatMessageSystem, ChatMessageUser, Model, get_model
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    ScoreReducer,
    Target,
    metric,
    score_reducer,
    scorer,
)
from inspect_ai.solver import TaskState

from med_evals.scorers.judges import GRADER_ROLE, error_name, grader_config
from med_evals.scorers.oncology_rct import invert_outcome, parse_outcome_strict
from med_evals.solvers import oncology_rct as prompts
from med_evals.solvers.generate import GENERATE_ERROR

SECTIONS = ("introduction", "methods", "results", "conclusions")
FIELDS = ("title", *SECTIONS)
#: names used in the study's ``sections_modified`` column
STUDY_SECTION_NAMES = {
    "title": "title",
    "introduction": "introduction",
    "methods": "methods",
    "results": "results",
    "conclusions": "conclusion",
}
#: what is measured for the edit-size bound and its distribution
CHANGE_KEYS = (*FIELDS, "outcome")

ACCEPTED, REJECTED, ERROR = "accepted", "rejected", "error"


def change_ratio(before: str, after: str) -> float:
    """Share of the text changed: 1 - difflib's similarity ratio (0 = identical)."""
    if before == after:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(None, before, after, autojunk=False).ratio()


def parse_rewrite(text: str) -> dict[str, str] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) for k in FIELDS):
        return None
    return {k: obj[k].strip() for k in FIELDS}


def _outcome(fields: Mapping[str, str]) -> str:
    return f"{fields['results']} {fields['conclusions']}"


def measure(original: Mapping[str, str], rewrite: Mapping[str, str]) -> dict[str, float]:
    """Change ratio per field, and of results and conclusions together (``outcome``)."""
    changes = {k: change_ratio(original[k], rewrite[k]) for k in FIELDS}
    changes["outcome"] = change_ratio(_outcome(original), _outcome(rewrite))
    return changes


def check_rewrite(
    original: Mapping[str, str],
    rewrite: Mapping[str, str] | None,
    max_background_change: float,
    max_outcome_change: float,
    max_title_change: float,
) -> tuple[str | None, str, dict[str, float]]:
    """(rejection code or None, what is wrong, change ratios) from the diff alone."""
    if rewrite is None:
        return "unparseable", "no JSON object with the title and the four sections", {}
    changes = measure(original, rewrite)
    for k in ("introduction", "methods"):
        if changes[k] > max_background_change:
            return (
                "background",
                f"{k} changed by {changes[k]:.1%} (> {max_background_change:.1%})",
                changes,
            )
    unchanged = [k for k in ("results", "conclusions") if changes[k] == 0]
    if unchanged:
        return (
            "outcome_unchanged",
            f"{' and '.join(unchanged)} unchanged (both must change)",
            changes,
        )
    if changes["outcome"] > max_outcome_change:
        return (
            "edit_too_large",
            f"results and conclusions changed by {changes['outcome']:.1%} "
            f"(> {max_outcome_change:.1%})",
            changes,
        )
    if changes["title"] > max_title_change:
        return (
            "title_too_large",
            f"title changed by {changes['title']:.1%} (> {max_title_change:.1%})",
            changes,
        )
    return None, "", changes


def original_fields(row: Mapping[str, Any]) -> dict[str, str]:
    return {
        "title": row["title"].strip(),
        "introduction": row["abstract_introduction"].strip(),
        "methods": row["abstract_methods"].strip(),
        "results": row["abstract_results"].strip(),
        "conclusions": row["abstract_conclusions"].strip(),
    }


def output_row(
    row: Mapping[str, Any], rewrite: Mapping[str, str], changes: Mapping[str, float]
) -> dict[str, str]:
    """The trial's row of trials.csv with the counterfactual columns filled from the rewrite."""
    cf_cols = (
        "counterfactual_title",
        "counterfactual_abstract",
        "target_label",
        "sections_modified",
    )
    out = {k: str(v) for k, v in row.items() if k not in cf_cols}
    out["counterfactual_title"] = rewrite["title"]
    out["counterfactual_abstract"] = " ".join(rewrite[s] for s in SECTIONS if rewrite[s])
    out["target_label"] = invert_outcome(row["Annotation_accept"])
    out["sections_modified"] = json.dumps(
        [STUDY_SECTION_NAMES[k] for k in FIELDS if changes[k] > 0]
    )
    return out


async def classify(grader: Model, title: str, abstract: str) -> tuple[str, str]:
    """The grader's label for a rewrite, asked as the study asked its models: (label, reply).
    The call has the run's per-attempt timeouts, as a judge's has (:func:`grader_config`)."""
    output = await grader.generate(
        [
            ChatMessageSystem(content=prompts.ONCOLOGY_SYSTEM_PROMPT),
            ChatMessageUser(content=prompts.TITLE_ABSTRACT.format(title=title, abstract=abstract)),
        ],
        config=grader_config(grader),
    )
    if output.error:
        raise RuntimeError(output.error)
    return parse_outcome_strict(output.completion), output.completion


def _value(status: str, reason: str, changes: Mapping[str, float], grader: str) -> dict[str, Any]:
    value: dict[str, Any] = {
        "status": status,
        "accepted": status == ACCEPTED,
        "reason": reason,
        "grader": grader,
    }
    value.update(
        {f"change_{k}": round(changes[k], 4) if k in changes else None for k in CHANGE_KEYS}
    )
    return value


@score_reducer(name="first_accepted")
def first_accepted() -> ScoreReducer:
    """Several epochs of a build: the first accepted epoch's whole score, else the first's (the
    export takes the same epoch)."""

    def reduce(scores: list[Score]) -> Score:
        for s in scores:
            if isinstance(s.value, Mapping) and s.value.get("status") == ACCEPTED:
                return s
        return scores[0]

    return reduce


def _quantiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"median": math.nan, "p90": math.nan, "max": math.nan}
    p90 = statistics.quantiles(xs, n=10, method="inclusive")[-1] if len(xs) > 1 else xs[0]
    return {"median": statistics.median(xs), "p90": p90, "max": max(xs)}


@metric
def build_summary() -> Metric:
    """Accepted, rejected by reason, errors; how often each field changed and the distribution
    of change ratios (median, 90th percentile, max) over accepted rewrites."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        vals: list[Mapping[str, Any]] = [
            s.score.value for s in scores if isinstance(s.score.value, Mapping)
        ]
        accepted = [v for v in vals if v["status"] == ACCEPTED]
        errors = [v for v in vals if v["status"] == ERROR]
        decided = len(vals) - len(errors)
        out: dict[str, float] = {
            "accepted": len(accepted),
            "rejected": decided - len(accepted),
            "errors": len(errors),
            "accept_rate": len(accepted) / decided if decided else math.nan,
        }
        for v in vals:
            if v["status"] != ACCEPTED:
                key = f"{v['status']}_{v['reason']}"
                out[key] = out.get(key, 0) + 1
        for k in FIELDS:
            out[f"modified_{k}"] = sum(1 for v in accepted if float(v[f"change_{k}"]) > 0)
        for k in CHANGE_KEYS:
            for q, x in _quantiles([float(v[f"change_{k}"]) for v in accepted]).items():
                out[f"change_{k}_{q}"] = x
        return out

    return compute


@scorer(metrics=[build_summary()])
def rewrite_check(
    max_background_change: float, max_outcome_change: float, max_title_change: float
) -> Scorer:
    """Check each rewrite (diff bounds, then the grader's classification); write nothing.

    The grader role is resolved here, so a missing ``--model-role grader=...`` stops the task
    when it is created, before any rewrite is generated.
    """
    grader = get_model(role=GRADER_ROLE, required=True)

    async def score(state: TaskState, target: Target) -> Score:
        row = state.metadata["row"]
        error = state.metadata.get(GENERATE_ERROR) or state.output.error
        if error:
            return Score(
                value=_value(ERROR, "provider_error", {}, ""),
                answer=ERROR,
                explanation=f"provider error: {error}",
            )
        rewrite = parse_rewrite(state.output.completion or "")
        code, detail, changes = check_rewrite(
            original_fields(row),
            rewrite,
            max_background_change,
            max_outcome_change,
            max_title_change,
        )
        if code is not None or rewrite is None:
            return Score(
                value=_value(REJECTED, code or "", changes, ""), answer=REJECTED, explanation=detail
            )
        cf = output_row(row, rewrite, changes)
        try:
            label, reply = await classify(
                grader, cf["counterfactual_title"], cf["counterfactual_abstract"]
            )
        except Exception as ex:  # noqa: BLE001 - a grader failure is an error, not a verdict
            return Score(
                value=_value(ERROR, "grader_error", changes, ""),
                answer=ERROR,
                explanation=f"grader error: {error_name(ex)}",
            )
        if label != target.text:
            return Score(
                value=_value(REJECTED, "grader_disagrees", changes, label),
                answer=REJECTED,
                explanation=f"grader classified the rewrite {label}, not {target.text}: {reply!r}",
                metadata={"grader_reply": reply},
            )
        return Score(
            value=_value(ACCEPTED, "", changes, label),
            answer=ACCEPTED,
            explanation="accepted",
            metadata={"row": cf, "grader_reply": reply},
        )

    return score
