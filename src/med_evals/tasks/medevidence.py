# inspect-evals-lint: ignore-file[main_file] -- one task module per study is this package's layout
"""MedEvidence: does the outcome go higher, lower, show no difference, an uncertain effect, or
is data insufficient? (Polzak et al., "Can Large Language Models Match the Conclusions of
Systematic Reviews?", ICLR 2026.)

250 questions from 66 Cochrane reviews, each with the abstracts of the review's cited studies;
``relevant_sources`` names those that answer a question. Closed book sends the question alone;
evidence adds its relevant abstracts, as the authors' "barebones abstract" runs did.

What is the paper's and what is ours (:data:`FIDELITY`, recorded in each log's metadata): the
paper's headline accuracies come from the sources' full texts, ours from the abstracts file;
closed book is ours (the authors' code has no such configuration); macro-F1 is ours (the
authors' code computes accuracy, the parsable share and the confusion matrix); the authors'
refine chain for prompts longer than a model's context is not implemented.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.solver import TaskState

from med_evals.data.datasets import DatasetError, fetch, indexed_records, read_csv_checked
from med_evals.scorers.classification import label_headline
from med_evals.scorers.medevidence import (
    ABSTAINING,
    DISPLAY,
    FIVE,
    LABEL_SETS,
    SCHEME_SOURCE,
    effect_direction,
    effect_metrics,
    effect_value,
    gold_label,
    parse_effect,
)
from med_evals.solvers import medevidence as prompts
from med_evals.solvers.generate import Prompt, generate_or_record_error
from med_evals.study.params import Choice, ParamError
from med_evals.study.spec import PROBE_REPLIES, VALID_RATE, Headline, Probe, Study
from med_evals.study.task import study_params, study_task, subset_items

DATASET = "medevidence"
FILE_250 = "manual_250-abstract.jsonl"
FILE_284 = "manual_284-data_spreadsheet.csv"
CONDITIONS = ("closed_book", "evidence")
QUALITIES = {"high", "moderate", "low", "very low", ""}
#: The authors' generation settings: temperature 0, at most 4,096 output tokens.
AUTHORS_CONFIG = GenerateConfig(temperature=0.0, max_tokens=4096)

#: What a run's numbers are, against the paper (the log's metadata ``fidelity``, per condition).
FIDELITY = {
    "evidence": "the relevant sources' abstracts (manual_250-abstract.jsonl, the authors' "
    "barebones-abstract setting); the paper's headline accuracies come from the full texts, so "
    "these numbers are not those",
    "closed_book": "ours: the question alone; the authors' code has no closed-book "
    "configuration (it sends 'No text available' only for a question without sources)",
    "macro_f1": "ours: the authors' code computes accuracy, the parsable share and the "
    "confusion matrix, not macro-F1",
    "long_prompts": "not implemented: the authors split a prompt longer than the model's "
    "context less 1,000 tokens (4,096 for a model they list no context for) and answer "
    "through a refine chain; this task sends every prompt whole",
}


def read_questions(path: Path) -> list[dict[str, Any]]:
    """Questions of the 250-question JSONL, each with its review's sources resolved.

    Raises DatasetError naming the file, line and field for malformed content.
    """
    questions = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                review = json.loads(line)
            except json.JSONDecodeError as ex:
                raise DatasetError(f"{path}: line {lineno}: malformed JSON ({ex.msg})") from None
            for field in ("original_review", "question_data", "sources"):
                if field not in review:
                    raise DatasetError(f"{path}: line {lineno}: missing field '{field}'")
            sources = {str(s["article_id"]): s for s in review["sources"]}
            for qa in review["question_data"]:
                where = f"{path}: line {lineno}, question {qa.get('question_id')!r}"
                for field in ("question_id", "question", "answer", "relevant_sources"):
                    if field not in qa:
                        raise DatasetError(f"{where}: missing field '{field}'")
                if not str(qa["question"]).strip():
                    raise DatasetError(f"{where}, field 'question': empty value")
                if qa["answer"].strip().lower() not in FIVE.labels:
                    raise DatasetError(f"{where}, field 'answer': unknown label {qa['answer']!r}")
                quality = str(qa.get("evidence_quality", "")).strip().lower()
                if quality not in QUALITIES:
                    raise DatasetError(f"{where}, field 'evidence_quality': unknown {quality!r}")
                missing = [s for s in qa["relevant_sources"] if str(s) not in sources]
                if missing:
                    raise DatasetError(
                        f"{where}, field 'relevant_sources': {missing} not among the "
                        "review's sources"
                    )
                qid = f"{review['original_review']}-{qa['question_id']}"
                if qid in seen:
                    raise DatasetError(f"{where}: duplicate question id {qid}")
                seen.add(qid)
                questions.append(
                    {
                        "id": qid,
                        "review": str(review["original_review"]),
                        "question": qa["question"].strip(),
                        "answer": qa["answer"].strip().lower(),
                        "evidence_quality": quality or "not rated",
                        "sources": [sources[str(s)] for s in qa["relevant_sources"]],
                    }
                )
    return questions


def read_spreadsheet(path: Path) -> list[dict[str, Any]]:
    """All 284 questions (no source texts): closed book only."""
    df = read_csv_checked(
        path,
        ["Cochrane PubMed ID", "Question", "Answer", "Evidence Quality"],
        non_empty=["Question", "Answer"],
    )
    out = []
    for i, row in indexed_records(df):
        answer = row["Answer"].strip().lower()
        if answer not in FIVE.labels:
            raise DatasetError(f"{path}: row {i + 1}, column 'Answer': unknown label {answer!r}")
        out.append(
            {
                "id": f"{row['Cochrane PubMed ID']}-row{i + 1}",
                "review": row["Cochrane PubMed ID"],
                "question": row["Question"].strip(),
                "answer": answer,
                "evidence_quality": row["Evidence Quality"].strip().lower() or "not rated",
                "sources": [],
            }
        )
    return out


def user_prompt(question: str, sources: list[Mapping[str, Any]] | None, scheme: str) -> str:
    """The authors' final-answer prompt; ``sources=None`` is closed book."""
    text = prompts.HEADER.format(question=question)
    if sources:
        text += "".join(
            prompts.ARTICLE.format(
                article_id=s.get("article_id"),
                title=s.get("title") or "No title provided",
                date=s.get("date") or "No date provided",
                content=s.get("content") or "No article content provided",
            )
            for s in sources
        )
    else:
        text += prompts.NO_TEXT
    return prompts.FINAL_ANSWER.replace("{CLASSES}", DISPLAY[scheme]).replace("{text}", text)


def prompt_messages(
    question: str, sources: list[Mapping[str, Any]] | None, scheme: str
) -> list[ChatMessageSystem | ChatMessageUser]:
    """The authors' messages for one question: their system message, then the final-answer
    prompt (:func:`user_prompt`); ``sources=None`` is closed book."""
    return [
        ChatMessageSystem(content=prompts.SYSTEM),
        ChatMessageUser(content=user_prompt(question, sources, scheme)),
    ]


def final_answer_prompt(sources: Mapping[str, list[Mapping[str, Any]]], scheme: str) -> Prompt:
    """The messages sent for a sample (:func:`prompt_messages`), rendered by the study's
    generate solver from its input (the question) and metadata: under the condition
    ``evidence``, the relevant sources of its ``question_id`` (``sources``: question id -> its
    relevant sources, kept here rather than in every sample's metadata)."""

    def final_answer(state: TaskState) -> list[ChatMessageSystem | ChatMessageUser]:
        evidence = state.metadata["condition"] == "evidence"
        chosen = sources[state.metadata["question_id"]] if evidence else None
        return prompt_messages(state.input_text, chosen, scheme)

    return final_answer


def record_to_sample(q: Mapping[str, Any], condition: str, scheme: str) -> Sample:
    """One question under one condition and label scheme: the input is the question itself (as
    ``inspect view`` lists it); the authors' prompt around it, with the relevant sources under
    ``evidence``, is sent by the study's solver (:func:`final_answer_prompt`)."""
    return Sample(
        id=f"{condition}-{q['id']}",
        input=q["question"],
        target=gold_label(q["answer"], scheme),
        metadata={
            "condition": condition,
            "question_id": q["id"],
            "review": q["review"],
            "gold_answer": q["answer"],
            "evidence_quality": q["evidence_quality"],
            "n_sources": len(q["sources"]),
        },
    )


def subset_source(data_dir: str | None = None) -> tuple[str, dict[str, str], dict[str, str]]:
    """(revision, stratum = gold answer, identifying text = question) of the 250 questions."""
    file = fetch(DATASET, FILE_250, data_dir)
    qs = read_questions(file.path)
    return (
        file.manifest.revision,
        {q["id"]: q["answer"] for q in qs},
        {q["id"]: q["question"] for q in qs},
    )


@task
def medevidence(
    condition: str | list[str] = "evidence",
    labels: str = "five",
    questions: str = "250",
    data_dir: str | None = None,
    subset: str | None = None,
    metrics: str = "headline",
    shard: str | None = None,
    **unknown: Any,
) -> Task:
    """Effect direction from Cochrane review questions (MedEvidence).

    Args:
        condition: ``evidence`` (default: the question and its relevant source abstracts, the
            authors' barebones-abstract setting; the paper's headline accuracies use the full
            texts), ``closed_book`` (ours: the question only; no such configuration in the
            authors' code), or both (comma-separated) in one run.
        labels: ``five`` (default, the paper's classes: higher, lower, no difference,
            uncertain effect, insufficient data) or ``three`` (ours, not the paper's: Higher /
            Lower / Uncertain, the prompt saying that Uncertain covers no difference, an
            uncertain effect and insufficient data; those gold answers count as Uncertain).
        questions: ``250`` (default: the questions answerable from abstracts, with sources) or
            ``284`` (all questions from the spreadsheet; closed book only).
        data_dir: Local data directory (default ``$MED_EVALS_DATA_DIR``; else downloaded at the
            pinned commit).
        subset: A stored subset of the 250 questions (``smoke``: 20, ``ci``: 100; stratified
            by gold answer; ``med_evals/data/manifests/subsets/medevidence-<name>.yaml``). Default:
            all.
        metrics: ``headline`` (default): the log's metrics are the headline per condition
            (accuracy and macro-F1 (ours) over all questions, valid rate), so the viewer and the
            console fit a screen; ``full``: also the numbers over valid replies, label counts,
            confusion cells, strata by evidence quality, accuracy per gold class and the
            lenient reading. ``med-evals report`` shows all of them from either log.
        shard: ``i/N``: run only shard ``i`` of ``N`` (1-based) of the questions selected by
            the other parameters, every condition of a question in the same shard (round-robin
            by question: :mod:`med_evals.study.shards`); the shards' logs read back as one run.
        unknown: Any other parameter is refused before the run, naming the closest one.

    Defaults as in the authors' code: temperature 0, at most 4,096 output tokens. Replies are
    graded as the authors graded them (the ``**Answer**`` field must equal a class); our lenient
    reading is reported beside it (metrics suffixed ``_lenient``).
    """
    p = study_params(
        SPEC,
        locals(),
        condition=Choice(values=CONDITIONS, many=True),
        labels=Choice(values=tuple(LABEL_SETS)),
        questions=Choice(values=("250", "284")),
    )
    # study_params allowed only known values: the conditions, a label set, 250 or 284
    conds = [c.strip() for c in (
        p.condition.split(",") if isinstance(p.condition, str) else list(p.condition))]
    if str(p.questions) == "250":
        file = fetch(DATASET, FILE_250, p.data_dir)
        qs = read_questions(file.path)
    else:  # 284
        if "evidence" in conds:
            raise ParamError("medevidence: -T questions=284 has no source texts: closed_book only")
        if p.subset:
            raise ParamError("medevidence: -T subset=... is drawn from -T questions=250 only")
        file = fetch(DATASET, FILE_284, p.data_dir)
        qs = read_spreadsheet(file.path)
    by_id = {q["id"]: q for q in qs}
    keep = subset_items(SPEC, p.subset, {k: q["question"] for k, q in by_id.items()})
    kept = qs if keep is None else [by_id[i] for i in keep]
    return study_task(
        SPEC,
        p,
        [record_to_sample(q, c, p.labels) for q in kept for c in conds],
        solver=generate_or_record_error(
            final_answer_prompt({q["id"]: q["sources"] for q in kept}, p.labels)),
        task_args={"labels": p.labels},
        config=AUTHORS_CONFIG,
        scorer=SPEC.scorer(p.labels),
        dataset=f"medevidence-{p.questions}",
        location=str(file.path),
        metadata={
            "study": "Polzak et al. 2026 (MedEvidence)",
            "conditions": conds,
            "labels": p.labels,
            "label_scheme": SCHEME_SOURCE[p.labels],
            "grading": "authors' (inspect_outputs.ipynb grade): the **Answer** field, lower-cased "
            "and stripped, equals a class, else invalid; lenient parse (ours) as *_lenient",
            "fidelity": {
                k: v for k, v in FIDELITY.items() if k not in CONDITIONS or k in conds
            },
            "prompt": "run-med-evidence basic final_answer (barebones abstract); "
            "system 'follow instruction'",
            "data": file.provenance(),
        },
    )


# --- the study ---------------------------------------------------------------------------------

#: A made-up question (not the dataset's) on which the spec's behaviour is fingerprinted.
_PROBE_QUESTION: dict[str, Any] = {
    "id": "00000000-q1",
    "review": "00000000",
    "question": "Is drug A compared to placebo associated with higher survival?",
    "answer": "uncertain effect",
    "evidence_quality": "low",
    "sources": [
        {"article_id": 1, "title": "Trial one", "date": "2001", "content": "No difference."},
        {"article_id": 2, "title": "", "date": "", "content": ""},
    ],
}


def _probe_inputs() -> list[str]:
    """The probe question's messages and target under every condition and label scheme."""
    out = [repr(AUTHORS_CONFIG)]
    for scheme in LABEL_SETS:
        for condition in CONDITIONS:
            s = record_to_sample(_PROBE_QUESTION, condition, scheme)
            sources = _PROBE_QUESTION["sources"] if condition == "evidence" else None
            messages = prompt_messages(str(s.input), sources, scheme)
            out.append(f"{s.id}|{s.target}|" + "|".join(f"{m.role}: {m.text}" for m in messages))
    return out


def _probe_values(label_set: str | None = None) -> list[dict[str, Any]]:
    """Score values of the probe replies under a label scheme, over both conditions."""
    scheme = label_set or "five"
    answers = list(FIVE.labels)
    return [
        dict(effect_value(reply, gold_label(answers[i % len(answers)], scheme), scheme,
                          CONDITIONS[i % 2], ("high", "low", "not rated")[i % 3]))
        for i, reply in enumerate(PROBE_REPLIES * 2)
    ]


SPEC = Study(
    task="medevidence",
    title="MedEvidence (Polzak et al. 2026)",
    version="2.2.0",
    fingerprint_recorded="537f3634bd119a4f",
    scorer=effect_direction,
    metrics=effect_metrics,
    label_sets=LABEL_SETS,
    abstaining=ABSTAINING,
    label_arg="labels",
    parser=parse_effect,
    headline=(
        Headline("accuracy_all", "Accuracy", "all questions (invalid = wrong)"),
        # the authors' notebook computes accuracy, the parsable share and the confusion matrix
        Headline(
            "macro_f1_all", "Macro-F1", "all questions (invalid = miss)", "ours",
            "ours: the authors' code computes accuracy, not macro-F1",
        ),
        VALID_RATE,
    ),
    compute=label_headline,
    probe=Probe(prompts=_probe_inputs, replies=PROBE_REPLIES, values=_probe_values),
    conditions=CONDITIONS,
    subset_source=subset_source,
    datasets=(DATASET,),
    source="review",  # the Cochrane review each question came from (sample metadata)
    # a shard and a subset keep every condition of a question (compared question by question)
    item=lambda s: (s.metadata or {})["question_id"],
    item_name="question",
    view_scores={"condition": "Condition", "evidence_quality": "Evidence quality",
                 "correct": "Correct"},
)
