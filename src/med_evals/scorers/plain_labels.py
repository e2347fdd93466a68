"""A plain label study's parts: the parser, the per-sample value, the scorer and the metric set.

A plain study (items in a CSV, one prompt, a set of labels, a reply read as one of them) needs
no parser, scorer or metric of its own: its task module names these in its spec
(:class:`~med_evals.study.spec.Study`) and builds its task with
:func:`med_evals.study.task.study_task` (CONTRIBUTING.md, "Add a study";
``tests/studies/toy_yesno.py`` is one). Its headline is :data:`LABEL_HEADLINE`, computed by
:func:`~med_evals.scorers.classification.label_headline`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from inspect_ai.scorer import Metric, Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState

from med_evals.scorers.classification import (
    accuracy_valid,
    confusion_counts,
    headline,
    label_counts,
    macro_f1_valid,
)
from med_evals.scorers.labels import ERROR, INVALID, LabelSet
from med_evals.solvers.generate import GENERATE_ERROR
from med_evals.study.spec import PROBE_REPLIES, VALID_RATE, Headline, Study

#: the headline of a plain label study: accuracy and macro-F1 over all samples (a reply with
#: no label is wrong: a miss for its gold label), then the valid rate
LABEL_HEADLINE = (
    Headline("accuracy_all", "Accuracy", "all samples (no label = wrong)"),
    Headline("macro_f1_all", "Macro-F1", "all samples (no label = miss)"),
    VALID_RATE,
)
_CUE = r"(?:final\s+answer|answer|label|verdict)\s*(?:is\b|:|=|-)"


def parse_label(reply: str | None, labels: Sequence[str]) -> str:
    """A reply's label: ``ERROR`` for no reply; the label after an ``Answer:`` / ``Label:`` cue
    (the first such cue naming one); else the one label the reply names (as a whole word, any
    case, markup around it ignored); ``INVALID`` when it names none or two different ones."""
    if reply is None or not reply.strip():
        return ERROR
    words = "|".join(re.escape(x).replace(r"\ ", r"\s+")
                     for x in sorted(labels, key=len, reverse=True))
    label = re.compile(r"(?<![\w-])(" + words + r")(?![\w-])", re.IGNORECASE)
    by_text = {" ".join(x.lower().split()): x for x in labels}

    def named(text: str) -> set[str]:
        return {by_text[" ".join(m.group(1).lower().split())] for m in label.finditer(text)}

    for cue in re.finditer(_CUE + r"[\s*_`\"'(\[]*(" + words + r")(?![\w-])", reply, re.I):
        return by_text[" ".join(cue.group(1).lower().split())]
    found = named(reply)
    return next(iter(found)) if len(found) == 1 else INVALID


def label_value(reply: str | None, target: str, label_set: LabelSet, condition: str = "",
                parse: Callable[[str | None], str] | None = None) -> dict[str, Any]:
    """A reply's score value: its label (``parse``, default :func:`parse_label`), the gold
    label, whether the reply named exactly one label, and the sample's condition (``""``:
    none)."""
    prediction = parse(reply) if parse else parse_label(reply, label_set.labels)
    return {"prediction": prediction, "target": target, "valid": label_set.is_label(prediction),
            "condition": condition}


def label_metrics(study: Study, full: bool = False, label_set: str | None = None,
                  **_: Any) -> list[Metric | dict[str, list[Metric]]]:
    """The headline (:func:`~med_evals.scorers.classification.headline`: accuracy and macro-F1
    over all samples, the valid rate), then with ``full`` accuracy and macro-F1 over the valid
    replies, the predicted-label counts and the confusion cells (each name logged once)."""
    labels = list(study.labels())
    out: list[Metric | dict[str, list[Metric]]] = [headline(study)]
    if full:
        out += [accuracy_valid(), macro_f1_valid(labels), label_counts(labels),
                confusion_counts(labels)]
    return out


def label_scorer(name: str, label_set: LabelSet,
                 parse: Callable[[str | None], str]) -> Callable[..., Scorer]:
    """A plain study's ``@scorer``, registered as ``name`` (its name in the log): each reply's
    :func:`label_value` with the study's parser (a provider failure the solver recorded is
    ``ERROR``). Its metrics are the study's metric set, which the task gives it."""

    def make() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score:
            reply = None if state.metadata.get(GENERATE_ERROR) else state.output.completion
            value = label_value(reply, target.text, label_set,
                                str(state.metadata.get("condition", "")), parse)
            return Score(value=value, answer=value["prediction"], explanation=reply or "")

        return score

    make.__name__ = name
    return scorer(metrics=[], name=name)(make)


def probe_replies(labels: Sequence[str]) -> tuple[str | None, ...]:
    """The replies a plain study's parser is fingerprinted on: every study's
    (:data:`~med_evals.study.spec.PROBE_REPLIES`), then each label as is, in lower case, after
    an ``Answer:`` cue, and all of them in one reply."""
    return (*PROBE_REPLIES, *labels, *(x.lower() for x in labels),
            *(f"Answer: {x}" for x in labels), " and ".join(labels))
