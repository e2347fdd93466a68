"""Effect direction labels (MedEvidence) and the parser for a reply's final answer.

Five classes, the paper's: higher, lower, no difference, uncertain effect, insufficient data.
A three-way scheme offers Higher / Lower / Uncertain; every other gold answer counts as
Uncertain there.
"""

from __future__ import annotations

import re

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState

from med_evals.scorers.classification import classification_metrics
from med_evals.scorers.labels import ERROR, INVALID, LabelSet
from med_evals.solvers.generate import GENERATE_ERROR

FIVE = LabelSet(
    "effect_direction_5",
    ("higher", "lower", "no difference", "uncertain effect", "insufficient data"),
)
THREE = LabelSet("effect_direction_3", ("higher", "lower", "uncertain"))
LABEL_SETS = {"five": FIVE, "three": THREE}

#: How each label set is offered in the prompt (the authors' ANSWER_CLASSES order for five).
DISPLAY = {
    "five": "Higher, Lower, No Difference, Insufficient Data, Uncertain Effect",
    "three": "Higher, Lower, Uncertain",
}

# Phrasings that name a label; longest first so "no significant difference" wins over parts.
_SYNONYMS = {
    "five": {
        "no statistically significant difference": "no difference",
        "no significant difference": "no difference",
        "no difference": "no difference",
        "uncertain effect": "uncertain effect",
        "insufficient data": "insufficient data",
        "insufficient evidence": "insufficient data",
        "higher": "higher",
        "lower": "lower",
    },
    "three": {"uncertain": "uncertain", "higher": "higher", "lower": "lower"},
}


def gold_label(answer: str, scheme: str) -> str:
    """The gold label of a dataset answer (three-way: not higher or lower -> uncertain)."""
    answer = answer.strip().lower()
    if answer not in FIVE.labels:
        raise ValueError(f"unknown MedEvidence answer {answer!r}")
    if scheme == "three":
        return answer if answer in ("higher", "lower") else "uncertain"
    return answer


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_ANSWER_LINE = re.compile(
    r"^[\s>*_#-]*(?:final\s+)?(?:answer|classification)[\s*_]*:[\s*_]*(.+)$",
    re.IGNORECASE | re.MULTILINE,
)


def _labels_in(text: str, scheme: str) -> set[str]:
    text = text.lower()
    found: set[str] = set()
    for phrase, label in _SYNONYMS[scheme].items():
        pattern = r"\b" + re.escape(phrase) + r"\b"
        if re.search(pattern, text):
            found.add(label)
            text = re.sub(pattern, " ", text)
    return found


def parse_effect(reply: str | None, scheme: str = "five") -> str:
    """The final answer of a reply as a label of ``scheme``, or INVALID / ERROR.

    The last ``Answer:`` line (``**Answer**:``, ``Final answer:``; never ``Full Answer``) decides
    when present; otherwise the reply must name exactly one label. Two labels: INVALID.
    """
    if reply is None or not reply.strip():
        return ERROR
    text = _THINK.sub("", reply)
    lines = [m.group(1) for m in _ANSWER_LINE.finditer(text)]
    found = _labels_in(lines[-1] if lines else text, scheme)
    return found.pop() if len(found) == 1 else INVALID


@scorer(metrics=classification_metrics(FIVE.labels, fields=("evidence_quality",)))
def effect_direction(scheme: str = "five") -> Scorer:
    """Parse the final answer into the scheme's labels; invalid otherwise."""
    labels = LABEL_SETS[scheme]

    async def score(state: TaskState, target: Target) -> Score:
        error = state.metadata.get(GENERATE_ERROR) or state.output.error
        reply = None if error else state.output.completion
        prediction = parse_effect(reply, scheme)
        return Score(
            value={
                "prediction": prediction,
                "target": target.text,
                "valid": labels.is_label(prediction),
                "correct": int(prediction == target.text),
                "condition": state.metadata["condition"],
                "evidence_quality": state.metadata["evidence_quality"],
            },
            answer=prediction,
            explanation=reply if error is None else f"provider error: {error}",
        )

    return score
