"""Effect direction labels (MedEvidence), the authors' grading of a reply, and our lenient view.

Five classes, the paper's: higher, lower, no difference, uncertain effect, insufficient data.

**Default: the authors' grading** (zyfetcabc/medevidence, ``run-med-evidence/src/rag.py``
``_format_final_answer`` and ``inspect_outputs.ipynb`` ``grade``). The reply, with
``<think>...</think>`` removed and stripped, is read as ``**key**: value`` fields (a value runs
to the next line that starts a ``**key**``, optionally after ``-``, or to the end; a later field
with the same key replaces an earlier one); the ``**Answer**`` value, lower-cased and stripped,
is correct only when it *equals* the gold class. Any other value (``higher.``,
``**uncertain effect**``, a note after the class), or no ``**Answer**`` field, is INVALID and
wrong. Every unqualified MedEvidence metric is computed on this parse.

**Lenient view (ours)**: the last ``Answer:`` line, with or without asterisks, else the whole
reply, must name exactly one class; synonyms map to classes ("no significant difference" ->
no difference, "insufficient evidence" -> insufficient data). Its metrics carry ``_lenient``.

**Three-way scheme (ours)**: Higher / Lower / Uncertain, where Uncertain stands for no
difference, uncertain effect and insufficient data; the prompt states this mapping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from inspect_ai.scorer import Metric, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState

from med_evals.scorers.abstention import abstention
from med_evals.scorers.classification import (
    accuracy_all,
    accuracy_by_group,
    accuracy_of,
    accuracy_valid,
    by_field,
    condition_metric,
    confusion_counts,
    confusion_of,
    headline,
    label_counts,
    macro_f1_all,
    macro_f1_of,
    macro_f1_valid,
    valid_rate,
)
from med_evals.scorers.labels import ERROR, INVALID, LabelSet
from med_evals.scorers.values import EffectValue, score_value
from med_evals.solvers.generate import GENERATE_ERROR
from med_evals.study.spec import Study

FIVE = LabelSet(
    "effect_direction_5",
    ("higher", "lower", "no difference", "uncertain effect", "insufficient data"),
)
THREE = LabelSet("effect_direction_3", ("higher", "lower", "uncertain"))
LABEL_SETS = {"five": FIVE, "three": THREE}

#: The abstentions of each label set (:mod:`med_evals.scorers.abstention`; ours, docs/numbers.md
#: "Abstention"): five classes: "uncertain effect" and "insufficient data", which decline to
#: name a direction ("no difference" is a finding, a committed answer); three: "uncertain",
#: which stands for all three of them (so a gold "no difference" is an abstention there).
ABSTAINING = {"five": ("uncertain effect", "insufficient data"), "three": ("uncertain",)}

#: How each label set is offered in the prompt (five: the authors' ANSWER_CLASSES joined by
#: ", "; three: ours, with the mapping of the five classes stated).
DISPLAY = {
    "five": "Higher, Lower, No Difference, Insufficient Data, Uncertain Effect",
    "three": "Higher, Lower, Uncertain (Uncertain covers no difference, an uncertain effect, "
    "and insufficient data)",
}

#: What the log metadata says about each scheme: the paper's, or ours.
SCHEME_SOURCE = {
    "five": "the paper's five classes",
    "three": "ours (not in the paper): higher, lower, and uncertain for no difference, "
    "uncertain effect and insufficient data",
}

# Phrasings that name a label (lenient view); longest first so a phrase wins over its parts.
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


# --- the authors' grading ----------------------------------------------------------------------

#: the authors' strip_thinking_tokens (case-sensitive, non-greedy, across lines)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
#: the authors' field pattern: ``- **key**: value`` up to the next ``**key`` line or the end
_FIELD = re.compile(
    r"(?:-\s*)?\*\*(?P<key>.*?)\*\*:\s*(?P<value>.*?)(?=\n+(?:-\s*)?\*\*|\Z)", re.DOTALL
)


def reply_fields(reply: str) -> dict[str, str]:
    """The reply's ``**key**: value`` fields as the authors read them (keys lower-cased, spaces
    to ``_``, values stripped; a repeated key keeps its last value). Empty: nothing parsed."""
    text = _THINK.sub("", reply).strip()
    return {
        m["key"].strip().lower().replace(" ", "_"): m["value"].strip()
        for m in _FIELD.finditer(text)
    }


def answer_value(reply: str) -> str:
    """The ``**Answer**`` value, lower-cased and stripped (``""`` when there is none)."""
    return reply_fields(reply).get("answer", "").lower().strip()


def parse_effect(reply: str | None, scheme: str = "five") -> str:
    """The authors' grading: the ``**Answer**`` value if it equals a class of ``scheme``, else
    INVALID; ERROR only when there is no reply at all (a provider failure)."""
    if reply is None:
        return ERROR
    value = answer_value(reply)
    return value if value in LABEL_SETS[scheme].labels else INVALID


# --- the lenient view (ours) -------------------------------------------------------------------

_THINK_ANY_CASE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
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


def parse_effect_lenient(reply: str | None, scheme: str = "five") -> str:
    """Our lenient reading: the last ``Answer:`` line (``**Answer**:``, ``Final answer:``; never
    ``Full Answer``) decides when present, else the whole reply; it must name exactly one label
    (synonyms allowed). Two labels or none: INVALID; no reply or an empty one: ERROR."""
    if reply is None or not reply.strip():
        return ERROR
    text = _THINK_ANY_CASE.sub("", reply)
    lines = [m.group(1) for m in _ANSWER_LINE.finditer(text)]
    found = _labels_in(lines[-1] if lines else text, scheme)
    return found.pop() if len(found) == 1 else INVALID


# --- scorer and metrics ------------------------------------------------------------------------


def effect_value(
    reply: str | None, target: str, scheme: str, condition: str, evidence_quality: str
) -> EffectValue:
    """The score value of one reply (``reply=None``: a provider failure)."""
    labels = LABEL_SETS[scheme]
    prediction = parse_effect(reply, scheme)
    return {
        "prediction": prediction,
        "target": target,
        "valid": labels.is_label(prediction),
        "correct": int(prediction == target),
        "condition": condition,
        "evidence_quality": evidence_quality,
        "lenient": parse_effect_lenient(reply, scheme),
    }


def lenient_values(
    values: Sequence[Mapping[str, Any]], labels: Sequence[str]
) -> list[dict[str, Any]]:
    """The values with the lenient parse as the prediction (for the ``_lenient`` metrics)."""
    return [{**v, "prediction": v["lenient"], "valid": v["lenient"] in labels} for v in values]


@metric
def lenient_view(labels: list[str]) -> Metric:
    """Our lenient parse: accuracy, macro-F1 (all samples and valid only), valid rate."""

    def fn(values: list[Mapping[str, Any]]) -> dict[str, float]:
        lv = lenient_values(values, labels)
        return {
            "accuracy_all_lenient": accuracy_of(lv, False),
            "accuracy_valid_lenient": accuracy_of(lv, True),
            "macro_f1_all_lenient": macro_f1_of(lv, labels, False),
            "macro_f1_valid_lenient": macro_f1_of(lv, labels, True),
            "valid_rate_lenient": sum(v["valid"] for v in lv) / len(lv),
        }

    return condition_metric(fn, "lenient_view")


@metric
def confusion_lenient(labels: list[str]) -> Metric:
    """The lenient parse's confusion matrix (``gold>predicted`` counts)."""

    def fn(values: list[Mapping[str, Any]]) -> dict[str, int]:
        counts = confusion_of(lenient_values(values, labels), labels)
        return {f"{k}_lenient": n for k, n in counts.items()}

    return condition_metric(fn, "confusion_lenient")


@metric
def accuracy_by_gold() -> Metric:
    """Accuracy within each gold class (the paper's per-class breakdown), all samples."""

    def fn(values: list[Mapping[str, Any]]) -> dict[str, float]:
        gold = [v["target"] for v in values]
        acc = accuracy_by_group(gold, gold, [v["prediction"] for v in values])
        out: dict[str, float] = {}
        for label in sorted(acc):
            out[f"gold={label}/accuracy_all"] = acc[label]
            out[f"gold={label}/n"] = gold.count(label)
        return out

    return condition_metric(fn, "accuracy_by_gold")


def effect_metrics(
    study: Study, full: bool = True, label_set: str | None = None
) -> list[Metric | dict[str, list[Metric]]]:
    """The metrics of a label scheme (``label_set``, default five): ``study``'s headline, then
    (``full``) the authors' grading unqualified (abstention: the scheme's uncertain classes),
    per evidence quality and per gold class, and the lenient view suffixed ``_lenient``."""
    scheme = label_set or "five"
    labels = list(LABEL_SETS[scheme].labels)
    if not full:
        return [headline(study, scheme)]
    return [
        headline(study, scheme),
        accuracy_valid(),
        macro_f1_valid(labels),
        abstention(labels, list(study.abstaining_of(scheme))),
        label_counts(labels),
        confusion_counts(labels),
        by_field("evidence_quality", labels),
        accuracy_by_gold(),
        lenient_view(labels),
        confusion_lenient(labels),
    ]


@scorer(metrics=[accuracy_all(), macro_f1_all(list(FIVE.labels)), valid_rate()])
def effect_direction(scheme: str = "five") -> Scorer:
    """Grade the reply as the authors did (lenient parse beside it).

    The study's task replaces the metrics declared here with its spec's set for the scheme in
    use (:func:`effect_metrics` through :func:`~med_evals.study.task.study_task`).
    """
    if scheme not in LABEL_SETS:
        raise ValueError(f"scheme must be one of {', '.join(LABEL_SETS)}, got {scheme!r}")

    async def score(state: TaskState, target: Target) -> Score:
        error = state.metadata.get(GENERATE_ERROR) or state.output.error
        reply = None if error else state.output.completion
        value = effect_value(
            reply,
            target.text,
            scheme,
            state.metadata["condition"],
            state.metadata["evidence_quality"],
        )
        return Score(
            value=score_value(value),
            answer=value["prediction"],
            explanation=reply if error is None else f"provider error: {error}",
        )

    return score
