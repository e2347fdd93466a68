"""The two Table 6 prompts as Inspect tasks, so each generation is logged (``inspect view``).

``medreqal_questions`` asks for one question and one label per review; a reply that does not parse
as ``QUESTION: ... LABEL: ...`` with one of the three labels is asked again once (the first reply
stays in the transcript). ``medreqal_categories`` sorts the questions into the prompt's classes at
temperature 0, as the paper did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver

from med_evals.data.builders.prompts import (
    CATEGORIES,
    CLASSIFICATION_SYSTEM,
    QUESTION_LABEL_SYSTEM,
    parse_category,
    parse_question_label,
    question_label_user,
)
from med_evals.data.builders.pubmed import Review

QUESTIONS_TASK = "medreqal_questions"
CATEGORIES_TASK = "medreqal_categories"


@solver
def generate_until_parsed(retries: int = 1) -> Solver:
    """Generate; while the reply does not parse, ask the same messages again (``retries`` times)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        prompt = list(state.messages)
        attempts = 0
        for attempts in range(1, retries + 2):  # noqa: B007
            state.messages = list(prompt)
            state = await generate(state)
            if parse_question_label(state.output.completion) is not None:
                break
        state.metadata["attempts"] = attempts
        return state

    return solve


@scorer(metrics=[mean()])
def question_label() -> Any:
    """1 when the reply parses (``answer`` is the label; the question is in ``metadata``)."""

    async def score(state: TaskState, target: Target) -> Score:
        reply = state.output.completion
        parsed = parse_question_label(reply)
        attempts = state.metadata.get("attempts", 1)
        if parsed is None:
            return Score(value=0, answer=None, explanation=reply, metadata={"attempts": attempts})
        return Score(
            value=1,
            answer=parsed.label,
            explanation=reply,
            metadata={"question": parsed.question, "label": parsed.label, "attempts": attempts},
        )

    return score


@scorer(metrics=[mean()])
def category() -> Any:
    """The class named by the reply (``answer``); 1 when the reply was a class itself."""

    async def score(state: TaskState, target: Target) -> Score:
        reply = state.output.completion
        parsed = parse_category(reply)
        exact = " ".join(reply.lower().strip(" .\n\"'").split()) in CATEGORIES
        return Score(value=1 if exact else 0, answer=parsed, explanation=reply)

    return score


def questions_task(reviews: Sequence[Review], retries: int = 1) -> Task:
    samples = [
        Sample(
            id=r.pmid,
            input=[
                ChatMessageSystem(content=QUESTION_LABEL_SYSTEM),
                ChatMessageUser(
                    content=question_label_user(
                        r.sections.get("background", ""),
                        r.sections["objectives"],
                        r.sections["conclusions"],
                    )
                ),
            ],
            metadata={"pmid": r.pmid, "review_id": r.review_id, "doi": r.doi},
        )
        for r in reviews
    ]
    return Task(
        name=QUESTIONS_TASK,
        dataset=MemoryDataset(samples, name=QUESTIONS_TASK),
        solver=generate_until_parsed(retries),
        scorer=question_label(),
        metadata={"prompt": "MedREQAL Table 6, Question & Label generation", "retries": retries},
    )


def categories_task(questions: dict[str, str]) -> Task:
    samples = [
        Sample(
            id=pmid,
            input=[ChatMessageSystem(content=CLASSIFICATION_SYSTEM), ChatMessageUser(content=q)],
        )
        for pmid, q in questions.items()
    ]
    return Task(
        name=CATEGORIES_TASK,
        dataset=MemoryDataset(samples, name=CATEGORIES_TASK),
        solver=generate(),
        scorer=category(),
        config=GenerateConfig(temperature=0.0),
        metadata={"prompt": "MedREQAL Table 6, Classification", "temperature": 0.0},
    )


def sample_results(log: EvalLog, scorer_name: str) -> dict[str, Score | str]:
    """Per sample id: its score, or the error text of a sample that failed."""
    if log.status != "success" and not log.samples:
        raise RuntimeError(f"{log.eval.task} did not run: {log.error.message if log.error else ''}")
    out: dict[str, Score | str] = {}
    for s in log.samples or []:
        if s.error is not None:
            out[str(s.id)] = s.error.message
        elif s.scores and scorer_name in s.scores:
            out[str(s.id)] = s.scores[scorer_name]
        else:
            out[str(s.id)] = "no score"
    return out
