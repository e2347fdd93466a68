"""LLM-judge scorers. The grader is bound through Inspect's model roles:
``--model-role grader=<provider/model>``; a missing binding fails when the task is created.

A judge reply that cannot be parsed is asked again, at most ``attempts`` times in all (the
follow-up turn says what was wrong); after that the sample counts as a judge failure, which
every judge metric reports (``judge_failures``): never a silent NaN.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageUser, Model, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState
from scipy.stats import binomtest

from med_evals.reference import reference_text
from med_evals.solvers.generate import GENERATE_ERROR
from med_evals.stats import proportion_with_intervals

GRADER_ROLE = "grader"
JUDGE_FAILURE = "JUDGE_FAILURE"
#: a sample the judge was not asked about (no reply to judge, or nothing to compare it with)
NO_REPLY = "NO_REPLY"
NO_REFERENCE = "NO_REFERENCE"


def score_values(scores: list[SampleScore]) -> list[dict[str, Any]]:
    """The dict score values of ``scores`` (every judge scores a dict)."""
    out = []
    for s in scores:
        if not isinstance(s.score.value, dict):
            raise ValueError(f"judge metrics need dict score values, got {s.score.value!r}")
        out.append(s.score.value)
    return out


def grader_model() -> Model:
    """The model bound to the ``grader`` role; a clear error when there is none."""
    return get_model(role=GRADER_ROLE, required=True)


def _json_object(text: str) -> dict[str, Any] | None:
    for m in re.finditer(r"\{.*?\}", text, re.DOTALL):
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


async def ask_judge(
    grader: Model,
    prompt: str,
    parse: Callable[[str], Any | None],
    attempts: int,
    fix_hint: str,
) -> tuple[Any | None, list[str]]:
    """Ask ``prompt``; re-ask (with ``fix_hint``) until ``parse`` accepts, ``attempts`` at most."""
    messages: list[ChatMessage] = [ChatMessageUser(content=prompt)]
    replies: list[str] = []
    for _ in range(max(1, attempts)):
        output = await grader.generate(messages)
        text = output.completion
        replies.append(text)
        parsed = parse(text)
        if parsed is not None:
            return parsed, replies
        messages += [ChatMessageAssistant(content=text), ChatMessageUser(content=fix_hint)]
    return None, replies


# --- counterfactual plausibility --------------------------------------------------------------

RATE_PROMPT = """You are an experienced reviewer of oncology trial publications. Read the abstract \
of a randomized controlled trial below and rate how internally coherent and natural it is: do \
the results, statistics and conclusions agree with each other, and does it read like a genuine \
published abstract?

Scale: 1 = incoherent or obviously edited, 2 = clear inconsistencies, 3 = some awkward or \
inconsistent passages, 4 = minor oddities only, 5 = fully coherent and natural.

Title: {title}

Abstract: {abstract}

Reply with a JSON object only: {{"rating": <1-5>, "reason": "<one sentence>"}}"""

PAIRED_PROMPT = """Two abstracts of the same randomized controlled oncology trial follow. One is \
the published abstract; the other was edited from it so that the trial's primary-endpoint \
result is reversed. Which abstract is the edited one?

Abstract A:
Title: {title_a}
{abstract_a}

Abstract B:
Title: {title_b}
{abstract_b}

Reply with a JSON object only: {{"edited": "A" or "B", "reason": "<one sentence>"}}"""

_FIX = "Your reply could not be read. Reply with a JSON object only: "
FIX_RATING = _FIX + '{"rating": <1-5>, "reason": "..."}'
FIX_PAIRED = _FIX + '{"edited": "A" or "B", "reason": "..."}'


def parse_rating(text: str) -> dict[str, Any] | None:
    obj = _json_object(text)
    if obj is not None:
        rating = obj.get("rating")
    else:
        m = re.search(r"\brating\W{0,5}([1-5])\b", text, re.IGNORECASE)
        rating = m.group(1) if m else None
    try:
        rating = int(rating)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not 1 <= rating <= 5:
        return None
    return {"rating": rating, "reason": str((obj or {}).get("reason", "")).strip()}


def parse_edited(text: str) -> dict[str, Any] | None:
    obj = _json_object(text)
    choice = obj.get("edited") if obj else None
    if choice is None:
        m = re.search(r"\bedited\W{0,5}\b([AB])\b", text)
        choice = m.group(1) if m else None
    choice = str(choice).strip().upper() if choice is not None else None
    if choice not in ("A", "B"):
        return None
    return {"edited": choice, "reason": str((obj or {}).get("reason", "")).strip()}


@metric
def plausibility_summary() -> Metric:
    """Mean rating of counterfactual and original abstracts, their paired difference, failures."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        vals = score_values(scores)
        ok = [v for v in vals if v["cf_rating"] > 0 and v["orig_rating"] > 0]
        cf = [v["cf_rating"] for v in vals if v["cf_rating"] > 0]
        orig = [v["orig_rating"] for v in vals if v["orig_rating"] > 0]
        out = {
            "cf_rating_mean": sum(cf) / len(cf) if cf else math.nan,
            "orig_rating_mean": sum(orig) / len(orig) if orig else math.nan,
            "paired_difference_mean": (
                sum(v["cf_rating"] - v["orig_rating"] for v in ok) / len(ok) if ok else math.nan
            ),
            "judge_failures": sum(v["judge_failures"] for v in vals),
            "n": len(vals),
        }
        for r in range(1, 6):
            out[f"cf_rating_{r}"] = sum(1 for x in cf if x == r)
        return out

    return compute


@metric
def detectability() -> Metric:
    """Share of trials where the grader named the edited abstract (0.5: indistinguishable)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        vals = score_values(scores)
        judged = [v for v in vals if v["picked"] != JUDGE_FAILURE]
        hits = sum(v["correct"] for v in judged)
        pr = proportion_with_intervals(hits, len(judged))
        return {
            "detect_rate": pr["p"],
            "detect_wilson_lo": pr["wilson"][0],
            "detect_wilson_hi": pr["wilson"][1],
            "p_value_vs_chance": binomtest(hits, len(judged), 0.5).pvalue if judged else math.nan,
            "judge_failures": len(vals) - len(judged),
            "n": len(vals),
        }

    return compute


@scorer(metrics=[plausibility_summary()])
def plausibility_judge(attempts: int = 3) -> Scorer:
    """The grader rates the counterfactual abstract, and the original, 1-5 with a reason."""
    grader = grader_model()

    async def score(state: TaskState, target: Target) -> Score:
        md = state.metadata
        value: dict[str, Any] = {"judge_failures": 0}
        notes = []
        for key, title, abstract in (
            ("cf", md["counterfactual_title"], md["counterfactual_abstract"]),
            ("orig", md["title"], md["abstract"]),
        ):
            parsed, replies = await ask_judge(
                grader,
                RATE_PROMPT.format(title=title, abstract=abstract),
                parse_rating,
                attempts,
                FIX_RATING,
            )
            value[f"{key}_rating"] = parsed["rating"] if parsed else 0
            value["judge_failures"] += parsed is None
            notes.append(
                f"{key}: {parsed['reason'] if parsed else 'JUDGE FAILURE: ' + replies[-1][:300]}"
            )
        return Score(value=value, answer=str(value["cf_rating"]), explanation="\n".join(notes))

    return score


@scorer(metrics=[detectability()])
def detectability_judge(seed: int = 0, attempts: int = 3) -> Scorer:
    """The grader sees original and counterfactual in a seeded random order, names the edited."""
    grader = grader_model()

    async def score(state: TaskState, target: Target) -> Score:
        md = state.metadata
        cf_first = random.Random(f"{seed}-{state.sample_id}").random() < 0.5
        orig = (md["title"], md["abstract"])
        cf = (md["counterfactual_title"], md["counterfactual_abstract"])
        (ta, aa), (tb, ab) = (cf, orig) if cf_first else (orig, cf)
        prompt = PAIRED_PROMPT.format(title_a=ta, abstract_a=aa, title_b=tb, abstract_b=ab)
        parsed, replies = await ask_judge(grader, prompt, parse_edited, attempts, FIX_PAIRED)
        truth = "A" if cf_first else "B"
        picked = parsed["edited"] if parsed else JUDGE_FAILURE
        return Score(
            value={"picked": picked, "edited": truth, "correct": int(picked == truth)},
            answer=picked,
            explanation=parsed["reason"] if parsed else f"JUDGE FAILURE: {replies[-1][:300]}",
        )

    return score


# --- long-answer agreement (MedREQAL, HealthFC) -----------------------------------------------

AGREEMENT = ("agrees", "partly agrees", "contradicts")

AGREEMENT_PROMPT = """You compare a model's answer to a medical question with the conclusion of a \
systematic review on the same question.

Question: {question}

Conclusion of the review: {reference}

Answer to assess: {answer}

Does the answer agree with, partly agree with, or contradict the review's conclusion? Reply with \
a JSON object only: {{"verdict": "agrees" | "partly agrees" | "contradicts", "reason": "<one \
sentence>"}}"""

FIX_AGREEMENT = _FIX + '{"verdict": "agrees" | "partly agrees" | "contradicts", "reason": "..."}'


def parse_agreement(text: str) -> dict[str, Any] | None:
    obj = _json_object(text)
    verdict = str(obj.get("verdict", "")) if obj else text
    verdict = verdict.strip().lower().strip(".!*\"' ")
    if verdict in AGREEMENT:
        return {"verdict": verdict, "reason": str((obj or {}).get("reason", "")).strip()}
    return None


@metric
def agreement_shares() -> Metric:
    """Share of judged replies that agree, partly agree or contradict; judge failures and the
    samples never judged (no reply, no reference) counted apart."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        c = Counter(v["agreement"] for v in score_values(scores))
        judged = sum(c[a] for a in AGREEMENT)
        out = {a.replace(" ", "_"): (c[a] / judged if judged else math.nan) for a in AGREEMENT}
        out["judge_failures"] = c[JUDGE_FAILURE]
        out["not_judged_no_reply"] = c[NO_REPLY]
        out["not_judged_no_reference"] = c[NO_REFERENCE]
        out["n"] = len(scores)
        return out

    return compute


@scorer(metrics=[agreement_shares()])
def conclusion_agreement(
    reference_field: str = "reference", question_field: str = "question", attempts: int = 3
) -> Scorer:
    """The grader judges whether the reply agrees with the reference conclusion.

    A sample without a reply (provider error, empty reply) or without a reference text is not
    sent to the grader: it scores ``NO_REPLY`` / ``NO_REFERENCE``, counted apart.

    Args:
        reference_field: Sample metadata key of the reference conclusion: a string, or a
            record whose ``text`` it is (:mod:`med_evals.reference`).
        question_field: Sample metadata key of the question (the input text if absent).
        attempts: Judge calls at most per sample before a judge failure.
    """
    grader = grader_model()

    async def score(state: TaskState, target: Target) -> Score:
        question = state.metadata.get(question_field) or state.input_text
        reply = "" if state.metadata.get(GENERATE_ERROR) else (state.output.completion or "")
        reference = reference_text(state.metadata, reference_field)
        missing = NO_REPLY if not reply.strip() else NO_REFERENCE if not reference.strip() else None
        if missing:
            return Score(value={"agreement": missing}, answer=missing, explanation="not judged")
        prompt = AGREEMENT_PROMPT.format(question=question, reference=reference, answer=reply)
        parsed, replies = await ask_judge(grader, prompt, parse_agreement, attempts, FIX_AGREEMENT)
        verdict = parsed["verdict"] if parsed else JUDGE_FAILURE
        return Score(
            value={"agreement": verdict},
            answer=verdict,
            explanation=parsed["reason"] if parsed else f"JUDGE FAILURE: {replies[-1][:300]}",
        )

    return score
