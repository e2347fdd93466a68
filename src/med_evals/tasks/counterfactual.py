# inspect-evals-lint: ignore-file[main_file] -- one task module per study is this package's layout
"""Counterfactual abstracts: build them with a model, and judge their plausibility.

``counterfactual_build`` asks a model to flip each trial's primary-endpoint result with minimal
edits, as the oncology study did by hand. Each rewrite is checked (``scorers.rewrite``): results
and conclusions must both change, the background and methods only below a threshold, the edit
must stay small, and the grader (``--model-role grader=...``) must classify the rewrite as the
inverted label. The scorer writes nothing: ``med-evals export-counterfactuals LOG... --out
trials.csv`` writes the accepted rewrites from the logs in the schema of the study's
``trials.csv``, which ``oncology_rct -T trials_file=...`` reads unchanged. ``-T resume=...``
(earlier logs or an exported CSV) skips the trials already accepted.

``counterfactual_judges`` has a grader (``--model-role grader=...``), or a jury (``grader_2=...``,
``grader_3=...``: :mod:`med_evals.scorers.judges`), rate counterfactual and original abstracts for
coherence and naturalness, or name the edited one of a pair. The builder's flip check is not a
judge: it asks the ``grader`` alone, with the study's own prompt (:mod:`med_evals.scorers.rewrite`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.solver import TaskState

from med_evals.data.datasets import DatasetError, indexed_records, resolve_file
from med_evals.logs.files import exists, expand_log_paths, missing
from med_evals.scorers.judges import (
    GRADER_ROLE,
    JUDGE_VERSION,
    detectability_judge,
    grader_model,
    judge_metrics,
    jury_models,
    plausibility_judge,
)
from med_evals.scorers.oncology_rct import invert_outcome
from med_evals.scorers.rewrite import first_accepted, original_fields, rewrite_check
from med_evals.solvers.generate import generate_or_record_error
from med_evals.study.checks import JURY, Roles
from med_evals.study.params import (
    Choice,
    File,
    Integer,
    Number,
    Paths,
)
from med_evals.study.spec import Study
from med_evals.study.task import study_params, study_task
from med_evals.tasks.oncology_rct import DATASET, FILE, read_trials, subset_trials

#: the builder's role: its flip check asks the grader alone
FLIP_CHECK = Roles(
    reads=lambda role: role == GRADER_ROLE,
    names=(GRADER_ROLE,),
    shown=GRADER_ROLE,
    hint="a jury of graders judges in counterfactual_judges",
)

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


def _trials(
    trials_file: str | None, data_dir: str | None, subset: str | None = None
) -> tuple[pd.DataFrame, dict]:
    """The trials, or those of a stored ``oncology_rct`` subset (same ids, DOIs checked)."""
    path, provenance = resolve_file(DATASET, FILE, data_dir, trials_file, "trials_file")
    df = read_trials(path)
    keep = subset_trials(df, subset)
    if keep is not None:
        df = df[[str(i) in keep for i in df.index]]
        provenance = {**provenance, "subset": subset}
    return df, provenance


def build_prompt(state: TaskState) -> list[ChatMessage]:
    """The messages a rewrite is asked with: the system prompt and :data:`BUILD_PROMPT` for the
    sample's trial (its ``row`` metadata), the trial's label and the flipped one."""
    row = state.metadata["row"]
    label = row["Annotation_accept"]
    return [
        ChatMessageSystem(content=BUILD_SYSTEM),
        ChatMessageUser(content=BUILD_PROMPT.format(
            label=label,
            met="met" if label == "POSITIVE" else "did not meet",
            flip_met="did not meet" if label == "POSITIVE" else "met",
            **original_fields(row),
        )),
    ]


@task
def counterfactual_build(
    trials_file: str | None = None,
    resume: str | list[str] | None = None,
    max_background_change: float = 0.02,
    max_outcome_change: float = 0.55,
    max_title_change: float = 0.2,
    data_dir: str | None = None,
    subset: str | None = None,
    shard: str | None = None,
    **unknown: Any,
) -> Task:
    """Have a model write counterfactual abstracts (primary-endpoint result flipped); a grader
    (``--model-role grader=...``) verifies each flip. Export: ``med-evals
    export-counterfactuals``.

    Args:
        trials_file: Input trials CSV (trials.csv schema; default: the study's 250 trials).
        resume: Earlier builder logs (files or directories) or an exported CSV: the trials
            accepted there are skipped (default: none).
        max_background_change: Largest share of the introduction or methods text a rewrite may
            change (difflib ratio, default 2%; the study changed methods in 4 of 250 trials).
        max_outcome_change: Largest share of the results and conclusions together a rewrite may
            change (default 55%; the study's own edits: median 8%, largest 50%).
        max_title_change: Largest share of the title a rewrite may change (default 20%; the
            study's 13 edited titles: largest 15%).
        data_dir: Local data directory for the default input.
        subset: Only the trials of a stored ``oncology_rct`` subset (``smoke``, ``ci``).
        shard: ``i/N``: only shard ``i`` of ``N`` (1-based) of the trials left to build
            (:mod:`med_evals.study.shards`); ``export-counterfactuals`` reads the shards' logs
            together.
        unknown: Any other parameter is refused before the run, naming the closest one.
    """
    p = study_params(
        BUILD_SPEC,
        locals(),
        trials_file=File(),
        resume=Paths(),
        max_background_change=Number(minimum=0.0, maximum=1.0),
        max_outcome_change=Number(minimum=0.0, maximum=1.0),
        max_title_change=Number(minimum=0.0, maximum=1.0),
    )
    df, provenance = _trials(p.trials_file, p.data_dir, p.subset)
    done = accepted_dois(p.resume)
    samples = []
    for trial, row in indexed_records(df):
        if row["doi"] in done:
            continue
        label = row["Annotation_accept"]
        orig = original_fields(row)
        samples.append(
            Sample(
                id=f"build-{int(trial):03d}",
                input=orig["title"],  # what the viewer lists; the prompt: build_prompt
                target=invert_outcome(label),
                metadata={"trial": int(trial), "doi": row["doi"], "row": row},
            )
        )
    if not samples:
        raise ValueError(
            f"nothing to build: all {len(df)} trials are already accepted in {p.resume}")
    return study_task(
        BUILD_SPEC,
        p,
        samples,
        solver=generate_or_record_error(prompt=build_prompt),
        scorer=rewrite_check(p.max_background_change, p.max_outcome_change, p.max_title_change),
        reducer=first_accepted(),
        config=GenerateConfig(temperature=0.0, max_tokens=4096),
        roles=FLIP_CHECK,
        dataset="counterfactual-build",
        metadata={
            "input": provenance,
            "resume": p.resume,
            "skipped_finished": len(done),
            "max_background_change": p.max_background_change,
            "max_outcome_change": p.max_outcome_change,
            "max_title_change": p.max_title_change,
            "flip_check": "the grader classifies each rewrite (study system prompt, "
            "Title/Abstract layout, strict parse); it must give the inverted label",
            "flip_check_grader": str(grader_model()),
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
    metrics: str = "headline",
    **unknown: Any,
) -> Task:
    """A grader judges counterfactual abstracts (bind it: ``--model-role grader=...``; a jury:
    ``grader_2=...``, ``grader_3=...`` as well, each grader's numbers logged apart).

    Args:
        judge: ``rate``: coherence and naturalness 1-5 with a reason, for the counterfactual and
            the original abstract; ``paired``: original and counterfactual in a seeded random
            order, the grader names the edited one (detectability; 50% = indistinguishable).
        trials_file: Trials with counterfactuals (default: the study's 250; or a builder output).
        seed: Seed of the pair order.
        attempts: Judge calls at most per item before it counts as a judge failure.
        data_dir: Local data directory for the default input.
        subset: Only the trials of a stored ``oncology_rct`` subset (``smoke``, ``ci``).
        metrics: ``headline``: the jury's numbers and agreement (one grader: its numbers);
            ``full``: each grader's too, and a rating jury's half-point counts (``med-evals
            report`` shows them all either way, from the same per-sample values).
        unknown: Any other parameter is refused before the run, naming the closest one.
    """
    p = study_params(
        JUDGES_SPEC,
        locals(),
        judge=Choice(values=("rate", "paired")),
        trials_file=File(),
        seed=Integer(),
        attempts=Integer(minimum=1),
    )
    df, provenance = _trials(p.trials_file, p.data_dir, p.subset)
    # judge is "rate" or "paired" (study_params refused anything else)
    if p.judge == "rate":
        judge_scorer = plausibility_judge(attempts=p.attempts)
    else:
        judge_scorer = detectability_judge(seed=p.seed, attempts=p.attempts)
    samples = [
        Sample(
            id=f"{p.judge}-{int(trial):03d}",
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
        for trial, row in indexed_records(df)
    ]
    return study_task(
        JUDGES_SPEC,
        p,
        samples,
        solver=[],
        scorer=judge_scorer,
        metric_options={"judge": p.judge},
        config=GenerateConfig(),
        # only the graders are called
        model_called=False,
        roles=JURY,
        dataset="counterfactual-judges",
        metadata={
            "input": provenance,
            "judge": p.judge,
            "seed": p.seed,
            "attempts": p.attempts,
            "graders": jury_models(),  # role -> model, named beside the judge's numbers
            "judge_version": JUDGE_VERSION,
        },
    )


#: The specs of the tasks that build or judge data rather than measure a model: no headline
#: numbers (not studies the report and the gate compare) and no fingerprint.
BUILD_SPEC = Study(
    task="counterfactual_build",
    title="Counterfactual abstracts of the oncology trials, built and checked",
    version="2.0.0",
    scorer=rewrite_check,
    datasets=(DATASET,),
    item_name="trial",  # a sample is a trial
    view_scores={"status": "Status", "reason": "Rejected because", "grader": "Grader's label"},
)
JUDGES_SPEC = Study(
    task="counterfactual_judges",
    title="Plausibility and detectability of the counterfactual abstracts, judged",
    version="2.0.0",  # 2.0.0: judged texts quoted, a jury (scorers.judges)
    scorer=plausibility_judge,
    metrics=judge_metrics,
    datasets=(DATASET,),
    view_scores={},  # the jury's rating or pick is the answer column
)


# --- accepted rewrites, read back from builder logs (resume; med-evals export-counterfactuals) --

BUILD_TASK = "counterfactual_build"
SCORER = "rewrite_check"


@dataclass
class Accepted:
    """Accepted rows by DOI (first wins) and what was read."""

    rows: dict[str, dict[str, str]] = field(default_factory=dict)
    logs: int = 0
    samples: int = 0
    accepted: int = 0
    duplicates: int = 0
    skipped: list[str] = field(default_factory=list)


def read_accepted(paths: Iterable[str | Path]) -> Accepted:
    """The accepted rewrites in builder logs, one per DOI: the earliest log's, lowest epoch."""
    out = Accepted()
    logs = []
    files: list[str] = []
    for p in paths:  # listed by Inspect: local folders, s3://... alike
        found = expand_log_paths([p])
        if not found:  # a missing path or a file is passed on; a folder may hold nothing
            out.skipped.append(f"{p}: a folder with no Inspect log in it")
        files += found
    for path in files:
        try:
            log = read_eval_log(path)
        except Exception as ex:  # noqa: BLE001 - an unreadable file is reported, not fatal
            out.skipped.append(f"{path}: unreadable log ({unreadable_reason(path, ex)})")
            continue
        if log.eval.task.split("/")[-1] != BUILD_TASK:
            out.skipped.append(f"{path}: not a {BUILD_TASK} log ({log.eval.task})")
            continue
        logs.append(log)
    for log in sorted(logs, key=lambda lg: lg.eval.created):
        out.logs += 1
        for sample in sorted(log.samples or [], key=lambda s: (s.epoch, str(s.id))):
            score = (sample.scores or {}).get(SCORER)
            if score is None:
                continue
            out.samples += 1
            value = score.value if isinstance(score.value, dict) else {}
            if value.get("status") != "accepted":
                continue
            out.accepted += 1
            row = (score.metadata or {}).get("row")
            if not isinstance(row, dict) or "doi" not in row:
                raise DatasetError(f"{log.location}: sample {sample.id}: accepted without a row")
            if row["doi"] in out.rows:
                out.duplicates += 1
            else:
                out.rows[row["doi"]] = {k: str(v) for k, v in row.items()}
    return out


def unreadable_reason(path: str | Path, ex: BaseException) -> str:
    """Why Inspect could not read a log, in words (its own messages can be terse)."""
    import zipfile

    text = str(ex) or type(ex).__name__
    if isinstance(ex, FileNotFoundError) or missing(path):  # s3://: a ClientError, or
        return "no such file"  # "no recorder" for a name without .eval
    if isinstance(ex, IsADirectoryError):
        return "a folder, not a log file"
    if isinstance(ex, zipfile.BadZipFile | EOFError) or "EOCD" in text:
        return f"not a complete .eval file: truncated, or not an Inspect log ({text})"
    if str(path).endswith(".json"):
        return f"not a complete JSON log ({type(ex).__name__}: {text})"
    return f"{type(ex).__name__}: {text}"


def accepted_dois(resume: str | Sequence[str] | None) -> set[str]:
    """DOIs already done: those of an exported CSV, or accepted in builder logs."""
    if not resume:
        return set()
    items = [resume] if isinstance(resume, str) else list(resume)
    dois: set[str] = set()
    logs = []
    for item in items:
        if not exists(item):  # local or anywhere Inspect reads logs (s3://...)
            raise FileNotFoundError(f"resume: {item} does not exist (logs or an exported CSV)")
        if str(item).endswith(".csv"):
            dois |= set(pd.read_csv(item, dtype=str, keep_default_na=False)["doi"])
        else:
            logs.append(item)
    return dois | set(read_accepted(logs).rows) if logs else dois
