"""Counterfactual abstracts: build them with a model, and judge their plausibility.

``counterfactual_build`` asks a model to flip each trial's primary-endpoint result with minimal
edits, as the oncology study did by hand. Each rewrite is checked on a diff against the original
sections: it must change the results or conclusions, and may change the background
(introduction) and methods only below a threshold. Accepted rewrites are appended, as they are
scored, to a CSV in the schema of the study's ``trials.csv`` (``counterfactual_title``,
``counterfactual_abstract``, ``target_label``, ``sections_modified``), which
``oncology_rct -T trials_file=...`` reads unchanged. A re-run skips the trials already in the
output file, so an interrupted build resumes without redoing finished trials.

``counterfactual_judges`` has a grader (``--model-role grader=...``) rate counterfactual and
original abstracts for coherence and naturalness, or name the edited one of a pair.
"""

from __future__ import annotations

import csv
import difflib
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState, system_message

from med_evals.data import resolve_file
from med_evals.scorers.judges import detectability_judge, plausibility_judge
from med_evals.scorers.labels import invert_outcome
from med_evals.scorers.reducers import majority_label
from med_evals.solvers.generate import generate_or_record_error
from med_evals.tasks.oncology_rct import DATASET, FILE, read_trials, subset_trials

SECTIONS = ("introduction", "methods", "results", "conclusions")
#: names used in the study's ``sections_modified`` column
STUDY_SECTION_NAMES = {
    "title": "title",
    "introduction": "introduction",
    "methods": "methods",
    "results": "results",
    "conclusions": "conclusion",
}

BUILD_SYSTEM = (
    "You edit abstracts of randomized controlled oncology trials to create counterfactual "
    "versions for a study of whether language models read the evidence they are given."
)

BUILD_PROMPT = """The trial below was {label}: it {met} its primary endpoint. Rewrite it so that \
the primary-endpoint result is reversed (the trial {flip_met} its primary endpoint), with \
minimal edits:
- change only the sentences that report the primary-endpoint result and its statistics \
(usually in RESULTS and CONCLUSIONS), and the title only if it states the result;
- keep the background, design, population, interventions and secondary outcomes unchanged \
unless a change is needed to keep the abstract internally coherent;
- keep each section's heading and style.

Title: {title}

[introduction] {introduction}

[methods] {methods}

[results] {results}

[conclusions] {conclusions}

Return a JSON object only, with the full text of every field: {{"title": "...", \
"introduction": "...", "methods": "...", "results": "...", "conclusions": "..."}}"""


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
    if not isinstance(obj, dict) or not all(
        isinstance(obj.get(k), str) for k in ("title", *SECTIONS)
    ):
        return None
    return {k: obj[k].strip() for k in ("title", *SECTIONS)}


def check_rewrite(
    original: dict[str, str], rewrite: dict[str, str] | None, max_background_change: float
) -> tuple[str | None, dict[str, float]]:
    """(reason for rejection or None, change ratio per field)."""
    if rewrite is None:
        return "unparseable reply", {}
    changes = {k: change_ratio(original[k], rewrite[k]) for k in ("title", *SECTIONS)}
    for k in ("introduction", "methods"):
        if changes[k] > max_background_change:
            return f"{k} changed by {changes[k]:.1%} (> {max_background_change:.1%})", changes
    if changes["results"] == 0 and changes["conclusions"] == 0:
        return "results and conclusions unchanged", changes
    return None, changes


def _original(row: dict[str, Any]) -> dict[str, str]:
    return {
        "title": row["title"].strip(),
        "introduction": row["abstract_introduction"].strip(),
        "methods": row["abstract_methods"].strip(),
        "results": row["abstract_results"].strip(),
        "conclusions": row["abstract_conclusions"].strip(),
    }


def output_row(row: dict[str, Any], rewrite: dict[str, str], changes: dict[str, float]) -> dict:
    """The trial's row of trials.csv with the counterfactual columns filled from the rewrite."""
    out = {
        k: row[k]
        for k in row
        if k
        not in (
            "counterfactual_title",
            "counterfactual_abstract",
            "target_label",
            "sections_modified",
        )
    }
    out["counterfactual_title"] = rewrite["title"]
    out["counterfactual_abstract"] = " ".join(rewrite[s] for s in SECTIONS if rewrite[s])
    out["target_label"] = invert_outcome(row["Annotation_accept"])
    out["sections_modified"] = json.dumps(
        [STUDY_SECTION_NAMES[k] for k in ("title", *SECTIONS) if changes[k] > 0]
    )
    return out


def append_row(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def finished_dois(path: Path) -> set[str]:
    if not path.exists() or path.stat().st_size == 0:
        return set()
    return set(pd.read_csv(path, dtype=str, keep_default_na=False)["doi"])


@metric
def build_summary() -> Metric:
    """Accepted rewrites, rejections by reason, and how often each section changed."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        vals = [s.score.value for s in scores]
        accepted = [v for v in vals if v["accepted"]]
        out: dict[str, float] = {
            "accepted": len(accepted),
            "rejected": len(vals) - len(accepted),
            "accept_rate": len(accepted) / len(vals) if vals else math.nan,
        }
        for v in vals:
            if not v["accepted"]:
                key = "rejected_" + v["reason"].split(" ")[0]
                out[key] = out.get(key, 0) + 1
        for k in ("title", *SECTIONS):
            out[f"modified_{k}"] = sum(1 for v in accepted if v[f"change_{k}"] > 0)
        return out

    return compute


@scorer(metrics=[build_summary()])
def rewrite_check(out_csv: str, max_background_change: float) -> Scorer:
    """Check each rewrite on a diff; append accepted ones to ``out_csv`` as they come."""
    out_path = Path(out_csv)

    async def score(state: TaskState, target: Target) -> Score:
        row = state.metadata["row"]
        rewrite = parse_rewrite(state.output.completion or "")
        reason, changes = check_rewrite(_original(row), rewrite, max_background_change)
        if reason is None:
            append_row(out_path, output_row(row, rewrite, changes))
        value: dict[str, Any] = {"accepted": reason is None, "reason": reason or ""}
        value.update({f"change_{k}": round(changes.get(k, 0.0), 4) for k in ("title", *SECTIONS)})
        return Score(
            value=value,
            answer="accepted" if reason is None else "rejected",
            explanation=reason or "accepted",
        )

    return score


def _trials(
    trials_file: str | None, data_dir: str | None, subset: str | None = None
) -> tuple[pd.DataFrame, dict]:
    """The trials, or those of a stored ``oncology_rct`` subset (same ids, DOIs checked)."""
    path, provenance = resolve_file(DATASET, FILE, data_dir, trials_file)
    df = read_trials(path)
    keep = subset_trials(df, subset)
    if keep is not None:
        df = df[[str(i) in keep for i in df.index]]
        provenance = {**provenance, "subset": subset}
    return df, provenance


@task
def counterfactual_build(
    out_csv: str = "counterfactual_trials.csv",
    trials_file: str | None = None,
    max_background_change: float = 0.02,
    data_dir: str | None = None,
    subset: str | None = None,
) -> Task:
    """Have a model write counterfactual abstracts (primary-endpoint result flipped).

    Args:
        out_csv: Output CSV in the schema of the study's trials.csv; accepted rewrites are
            appended as they are scored, and trials already in it are skipped (resume).
        trials_file: Input trials CSV (trials.csv schema; default: the study's 250 trials).
        max_background_change: Largest share of the introduction or methods text a rewrite may
            change (difflib ratio, default 2%); above it the rewrite is rejected.
        data_dir: Local data directory for the default input.
        subset: Only the trials of a stored ``oncology_rct`` subset (``smoke``, ``ci``).
    """
    df, provenance = _trials(trials_file, data_dir, subset)
    done = finished_dois(Path(out_csv))
    samples = []
    for trial, row in df.iterrows():
        if row["doi"] in done:
            continue
        label = row["Annotation_accept"]
        orig = _original(row.to_dict())
        samples.append(
            Sample(
                id=f"build-{int(trial):03d}",
                input=BUILD_PROMPT.format(
                    label=label,
                    met="met" if label == "POSITIVE" else "did not meet",
                    flip_met="did not meet" if label == "POSITIVE" else "met",
                    **orig,
                ),
                target=invert_outcome(label),
                metadata={"trial": int(trial), "doi": row["doi"], "row": row.to_dict()},
            )
        )
    return Task(
        dataset=MemoryDataset(samples, name="counterfactual-build"),
        solver=[system_message(BUILD_SYSTEM), generate_or_record_error()],
        scorer=rewrite_check(out_csv, max_background_change),
        epochs=Epochs(1, majority_label()),
        config=GenerateConfig(temperature=0.0, max_tokens=4096),
        metadata={
            "input": provenance,
            "out_csv": out_csv,
            "skipped_finished": len(done),
            "max_background_change": max_background_change,
        },
    )


@task
def counterfactual_judges(
    judge: str = "rate",
    trials_file: str | None = None,
    seed: int = 0,
    attempts: int = 3,
    data_dir: str | None = None,
    subset: str | None = None,
) -> Task:
    """A grader judges counterfactual abstracts (bind it: ``--model-role grader=...``).

    Args:
        judge: ``rate``: coherence and naturalness 1-5 with a reason, for the counterfactual and
            the original abstract; ``paired``: original and counterfactual in a seeded random
            order, the grader names the edited one (detectability; 50% = indistinguishable).
        trials_file: Trials with counterfactuals (default: the study's 250; or a builder output).
        seed: Seed of the pair order.
        attempts: Judge calls at most per item before it counts as a judge failure.
        data_dir: Local data directory for the default input.
        subset: Only the trials of a stored ``oncology_rct`` subset (``smoke``, ``ci``).
    """
    df, provenance = _trials(trials_file, data_dir, subset)
    if judge == "rate":
        judge_scorer = plausibility_judge(attempts=attempts)
    elif judge == "paired":
        judge_scorer = detectability_judge(seed=seed, attempts=attempts)
    else:
        raise ValueError(f"judge must be 'rate' or 'paired', got {judge!r}")
    samples = [
        Sample(
            id=f"{judge}-{int(trial):03d}",
            input=row["counterfactual_abstract"],
            metadata={
                k: row[k]
                for k in (
                    "doi",
                    "title",
                    "abstract",
                    "counterfactual_title",
                    "counterfactual_abstract",
                    "sections_modified",
                )
            },
        )
        for trial, row in df.iterrows()
    ]
    return Task(
        dataset=MemoryDataset(samples, name="counterfactual-judges"),
        solver=[],
        scorer=judge_scorer,
        epochs=Epochs(1, majority_label()),
        metadata={"input": provenance, "judge": judge, "seed": seed, "attempts": attempts},
    )
