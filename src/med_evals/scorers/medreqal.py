"""The SUPPORTED / REFUTED / NOT ENOUGH INFORMATION label family: parser and scorer.

MedREQAL and HealthFC share the three labels, the reply parser and the classification scorer.

:func:`parse_verdict` reads a reply in three steps, stopping at the first that finds a label:

1. An explicit ``LABEL: ...`` (as the prompts ask): any case, markdown (``**LABEL:** ...``),
   brackets or quotes around the label, trailing punctuation; ``Predicted label``,
   ``Final label`` and ``The label is ...`` count too. The first such line with a label wins,
   whatever else the reply says.
2. The label written in capitals as instructed (``SUPPORTED``, ``REFUTED``,
   ``NOT ENOUGH INFORMATION``, also ``NOT ENOUGH INFO``), anywhere: one distinct label is the
   answer; two different ones make the reply ``INVALID``. ``NOT SUPPORTED`` is not SUPPORTED.
3. A label in any case where a reply states its answer: its first words (``Supported. ...``),
   its last words (``... the answer is: refuted.``), after ``answer``/``verdict``/``conclusion``
   (``Verdict: Supported``), or alone in brackets (``(Not enough information)``); failing those,
   the phrase ``not enough information`` anywhere. Again two different labels are ``INVALID``.

Lower-case ``supported``/``refuted`` inside a sentence ("supported by two trials") is prose, not
a label. No reply (``None``, empty) is ``ERROR``; a reply with no label is ``INVALID``.

The numbers (MedREQAL Tables 2 and 3) are below the parser: the label counts, the confusion
cells and accuracy / macro-F1 per health category and strength (computed by
:mod:`med_evals.scorers.classification`, the one place accuracy and macro-F1 are computed), the
metric set (:func:`verdict_metrics`; the generation means:
:mod:`med_evals.scorers.generation`). Each
metric reads ``Score.value`` (a dict with ``prediction``, ``target``, ``valid`` and, where the
dataset has them, ``category`` and ``strength``), so it works unchanged after epoch reduction.
Names say over which samples a metric is computed: ``*_all``, every sample, an invalid reply (or
no reply) counting as wrong (the paper's setting); ``*_valid``, only samples whose reply stated
exactly one label. Macro-F1 averages the F1 of the three labels (``zero_division=0``); a
prediction that is not a label is a miss for its gold label and a false positive for no label.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from inspect_ai.scorer import Metric, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState

from med_evals.data.reference_text import REFERENCE, reference_fields
from med_evals.scorers.abstention import abstention
from med_evals.scorers.classification import (
    accuracy_all,
    accuracy_by_codes,
    accuracy_valid,
    condition_metric,
    headline,
    macro_f1_all,
    macro_f1_by_codes,
    macro_f1_valid,
    valid_rate,
)
from med_evals.scorers.generation import (
    NO_SCORES,
    bertscore_f1_mean,
    evidence_mention_counts,
    evidence_mentions_in,
    generation,
    generation_counts,
    rouge_l_mean,
)
from med_evals.scorers.labels import ERROR, INVALID, LabelSet
from med_evals.scorers.score_table import Table, rows_of
from med_evals.scorers.values import GenerationScores, VerdictValue, score_value
from med_evals.solvers.generate import GENERATE_ERROR
from med_evals.study.spec import Study

SUPPORTED = "SUPPORTED"
REFUTED = "REFUTED"
NEI = "NOT ENOUGH INFORMATION"

#: MedREQAL and HealthFC: the order is the one used for confusion matrices and macro-F1.
VERDICT = LabelSet("verdict", (SUPPORTED, REFUTED, NEI))

#: The abstention among the labels (:mod:`med_evals.scorers.abstention`): NOT ENOUGH INFORMATION
#: declines to say whether the research supports or refutes the claim.
ABSTAINING = (NEI,)

#: The datasets' integer codes (MedREQAL ``label`` and HealthFC ``label``).
LABEL_CODES = {"0": SUPPORTED, "1": NEI, "2": REFUTED}

# one alternation, longest first; "NOT ENOUGH INFO" is how the paper itself abbreviates NEI
_LABEL_WORDS = r"not\s+enough\s+info(?:rmation)?|supported|refuted"
_WRAP = r"[\s*_`\"'“”‘’\[\](){}<>]*"

# step 1: "LABEL: X", "**Label**: (X)", "Predicted label - X", "The label is X"
_LABEL_LINE = re.compile(
    r"\blabel\b[\s*_`]*(?::|=|-|–|—|\bis\b)" + _WRAP + r"(" + _LABEL_WORDS + r")\b",
    re.IGNORECASE,
)
# step 2: capitals only, and not "NOT SUPPORTED" / "NOT REFUTED"
_CAPS = re.compile(r"(?<![A-Za-z])(?<!NOT )(NOT\s+ENOUGH\s+INFO(?:RMATION)?|SUPPORTED|REFUTED)\b")
# step 3: where a reply states its answer
_START = re.compile(
    r"^" + _WRAP + r"(?:answer\s*:\s*)?" + _WRAP + r"(" + _LABEL_WORDS + r")\b", re.I
)
_END = re.compile(r"\b(" + _LABEL_WORDS + r")" + r"[\s*_`\"'“”‘’\[\](){}<>.!:;,]*$", re.I)
_CUE = re.compile(
    r"\b(?:answer|verdict|conclusion|prediction|classification|rating)\b[\s*_`]*(?::|\bis\b)"
    + _WRAP
    + r"("
    + _LABEL_WORDS
    + r")\b",
    re.I,
)
_BRACKETED = re.compile(r"[(\[]" + r"[\s*_`\"']*(" + _LABEL_WORDS + r")[\s*_`\"'.]*[)\]]", re.I)
_NEI_PHRASE = re.compile(r"\b(not\s+enough\s+information)\b", re.I)
_NOT_BEFORE = re.compile(r"\bnot[\s*_`\"'(\[]*$", re.I)


def normalise_label(text: str) -> str:
    """``'Not enough  info'`` -> ``NOT ENOUGH INFORMATION``; ``'refuted'`` -> ``REFUTED``."""
    t = " ".join(text.split()).upper()
    return NEI if t.startswith("NOT ENOUGH") else t


def _distinct(matches: list[re.Match[str]], text: str) -> set[str]:
    found = set()
    for m in matches:
        if _NOT_BEFORE.search(text[: m.start(1)]):  # "not supported", "NOT (REFUTED)"
            continue
        found.add(normalise_label(m.group(1)))
    return found


def _one(labels: set[str]) -> str | None:
    """The label if exactly one was found; INVALID for two or more; None for none."""
    if len(labels) == 1:
        return next(iter(labels))
    return INVALID if labels else None


def parse_verdict(reply: str | None) -> str:
    """A reply's label: one of :data:`VERDICT`'s labels, ``INVALID`` or ``ERROR``."""
    if reply is None or reply.strip() == "":
        return ERROR
    text = reply.strip()

    for m in _LABEL_LINE.finditer(text):
        if not _NOT_BEFORE.search(text[m.start() : m.start(1)]):
            return normalise_label(m.group(1))

    found = _one(_distinct(list(_CAPS.finditer(text)), text))
    if found is not None:
        return found

    stated: list[re.Match[str]] = []
    for pattern in (_START, _END):
        found_at = pattern.search(text)
        if found_at:
            stated.append(found_at)
    stated += list(_CUE.finditer(text)) + list(_BRACKETED.finditer(text))
    found = _one(_distinct(stated, text))
    if found is not None:
        return found

    if _distinct(list(_NEI_PHRASE.finditer(text)), text):
        return NEI
    return INVALID


def target_label(target: Target | str) -> str:
    """The gold label of a sample: a label name or its integer code."""
    text = target.text if isinstance(target, Target) else target
    label = LABEL_CODES.get(text.strip(), normalise_label(text))
    if not VERDICT.is_label(label):
        raise ValueError(f"target {text!r} is not one of {VERDICT.labels}")
    return label


def verdict_value(
    reply: str | None, target: Target | str, record: Mapping[str, Any]
) -> VerdictValue:
    """The label part of a reply's score value: its parse, the gold label, whether it is valid,
    and the sample's ``category`` and ``strength`` where its reference record has them."""
    prediction = parse_verdict(reply)
    value: VerdictValue = {
        "prediction": prediction,
        "target": target_label(target),
        "valid": VERDICT.is_label(prediction),
    }
    for key in ("category", "strength"):
        if record.get(key):
            value[key] = str(record[key])
    return value


# --- the numbers ---------------------------------------------------------------------------

#: each label's and non-label's name in metric keys
_KEY = {
    SUPPORTED: "supported",
    REFUTED: "refuted",
    NEI: "nei",
    INVALID: "invalid",
    ERROR: "error",
}


def _table_pairs(table: Table) -> tuple[list[str], list[str]]:
    """The gold and predicted labels of every value (as text), from the scores' table."""
    gold = table.column(("str", "target"), lambda v: str(v["target"]))
    pred = table.column(("str", "prediction"), lambda v: str(v["prediction"]))
    return gold, pred


@metric
def predicted_label_counts() -> Metric:
    """How often each label was predicted, and how many replies were invalid or missing.

    Keys: ``predicted_supported``, ``predicted_refuted``, ``predicted_nei``,
    ``predicted_invalid``, ``predicted_error`` (the paper's Table 3 plus the replies it could not
    count).
    """

    def count(rows: list[Any]) -> dict[str, int]:
        table = rows_of(rows).table
        pred = _table_pairs(table)[1]
        counts = table.memo("predicted_counts", lambda: Counter(pred))
        return {f"predicted_{key}": counts.get(label, 0) for label, key in _KEY.items()}

    return condition_metric(count, "predicted_label_counts")


@metric
def confusion_matrix() -> Metric:
    """Counts of gold label x predicted label, flattened: ``gold_nei_pred_supported``.

    Columns include ``invalid`` and ``error``, so every sample is counted once.
    """

    def cells(rows: list[Any]) -> dict[str, int]:
        counts = Counter(zip(*_table_pairs(rows_of(rows).table), strict=True))
        return {
            f"gold_{_KEY[g]}_pred_{_KEY[p]}": counts.get((g, p), 0)
            for g in VERDICT.labels
            for p in _KEY
        }

    return condition_metric(cells, "confusion_matrix")


def slug(text: str) -> str:
    """``'Cognitive and mental health'`` -> ``cognitive_and_mental_health``."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def by_group(values: Sequence[Mapping[str, Any]], key: str, kind: str) -> dict[str, float]:
    """``kind`` (``accuracy`` or ``macro_f1``, all samples) within each value of ``key``;
    samples without the field (HealthFC has no category or strength) are left out. The one
    function behind the logged per-category and per-strength metrics and the report's figure."""
    by_codes = _BY_CODES[kind]
    table = rows_of(values).table
    names, codes = table.group_codes(key)
    kept = table.memo(("kept", key), lambda: np.flatnonzero(codes >= 0))
    if not len(kept):
        return {}
    g = table.codes("target", VERDICT.labels, as_str=True)[kept]
    p = table.codes("prediction", VERDICT.labels, as_str=True)[kept]
    return by_codes(names, codes[kept], g, p)


def _macro_f1_by_codes(
    names: Sequence[str], group_codes: np.ndarray, g: np.ndarray, p: np.ndarray
) -> dict[str, float]:
    return macro_f1_by_codes(names, group_codes, g, p, len(VERDICT.labels))


_BY_CODES: dict[str, Callable[..., dict[str, float]]] = {
    "accuracy": accuracy_by_codes,
    "macro_f1": _macro_f1_by_codes,
}


def _by_group(key: str, kind: str) -> Metric:
    """Per value of ``key``: ``{kind}_{key}_{slug(value)}`` (Inspect flattens metric dicts)."""

    def groups(rows: list[Any]) -> dict[str, float]:
        values = by_group(rows, key, kind)
        return {f"{kind}_{key}_{slug(g)}": values[g] for g in sorted(values)}

    return condition_metric(groups, f"{kind}_by_{key}")


@metric
def accuracy_by_category() -> Metric:
    """Accuracy (all samples) within each health category."""
    return _by_group("category", "accuracy")


@metric
def macro_f1_by_category() -> Metric:
    """Macro-F1 (all samples) within each health category."""
    return _by_group("category", "macro_f1")


@metric
def accuracy_by_strength() -> Metric:
    """Accuracy (all samples) within each strength of evidence (LOW / MEDIUM / HIGH)."""
    return _by_group("strength", "accuracy")


@metric
def macro_f1_by_strength() -> Metric:
    """Macro-F1 (all samples) within each strength of evidence (LOW / MEDIUM / HIGH)."""
    return _by_group("strength", "macro_f1")


def verdict_metrics(
    study: Study, full: bool = True, label_set: str | None = None
) -> list[Metric | dict[str, list[Metric]]]:
    """The verdict scorer's metrics: ``study``'s headline and the generation means (Table 2's
    numbers), then (``full``) the numbers over valid replies, abstention (NOT ENOUGH
    INFORMATION), counts, confusion cells, strata, generation counts and evidence mentions."""
    if not full:
        return [headline(study), rouge_l_mean(), bertscore_f1_mean()]
    return [
        headline(study),
        accuracy_valid(),
        macro_f1_valid([SUPPORTED, REFUTED, NEI]),
        abstention(list(VERDICT.labels), list(study.abstaining_of(label_set))),
        predicted_label_counts(),
        confusion_matrix(),
        accuracy_by_category(),
        macro_f1_by_category(),
        accuracy_by_strength(),
        macro_f1_by_strength(),
        rouge_l_mean(),
        bertscore_f1_mean(),
        generation_counts(),
        evidence_mention_counts(),
    ]


@scorer(metrics=[accuracy_all(), macro_f1_all(list(VERDICT.labels)), valid_rate()])
def verdict(
    reference_key: str | None = None,
    bertscore_model: str | None = None,
    bertscore_layers: int | None = None,
    bertscore_rescale: bool = False,
    bertscore_batch_size: int = 64,
    bertscore: bool = True,
    mentions: bool = True,
) -> Scorer:
    """Score a reply: its S/R/NEI label, and optionally its explanation and evidence mentions.

    ``Score.value`` holds what the metrics need and what must survive epoch reduction:
    ``prediction``, ``target``, ``valid`` (the reply stated one label) and, when the sample's
    reference record (under ``reference_key``, default ``reference``;
    :mod:`med_evals.data.reference_text`) has them, ``category`` and ``strength``.
    In a run of several prompt variants the value also holds the sample's ``condition`` (its
    variant), and every metric of the set is computed per condition.
    ``answer`` is the parsed label; ``explanation`` the reply.
    With ``reference_key`` the value also holds the :func:`~med_evals.scorers.generation.generation`
    scores of the reply against that metadata field (``rouge_l``, ``bertscore_f1``,
    ``bertscore_precision``, ``bertscore_recall``); with ``mentions``, Table 5's flags
    (``cochrane``, ``review``, ``meta_analysis``).

    One scorer rather than three: Inspect's cost per scorer (events, log writes, summaries,
    live metrics) is paid once per sample. The generation means are NaN when no sample has a
    generation score (``reference_key`` unset, or no sample with a reference).

    Args:
        reference_key: Sample metadata field holding the reference text (or its record) for
            ROUGE-L and BERTScore; None: the label only (no generation scores).
        bertscore_model: BERTScore encoder (see :func:`~med_evals.scorers.generation.generation`).
        bertscore_layers: Encoder layer compared by BERTScore.
        bertscore_rescale: Rescale BERTScore with ``bert-score``'s baseline.
        bertscore_batch_size: Sentences per encoder forward pass.
        bertscore: False: ROUGE-L only (BERTScore values are None; no encoder is loaded).
        mentions: Flag mentions of Cochrane, reviews and meta-analyses (Table 5).
    """
    text_score = (
        generation(
            reference_key=reference_key,
            bertscore_model=bertscore_model,
            bertscore_layers=bertscore_layers,
            bertscore_rescale=bertscore_rescale,
            bertscore_batch_size=bertscore_batch_size,
            bertscore=bertscore,
        )
        if reference_key
        else None
    )

    async def score(state: TaskState, target: Target) -> Score:
        reply = state.output.completion if state.output and state.output.choices else None
        if state.metadata.get(GENERATE_ERROR):
            reply = None
        value = verdict_value(
            reply, target, reference_fields(state.metadata, reference_key or REFERENCE)
        )
        if state.metadata.get("condition"):  # a run of several prompt variants
            value["condition"] = str(state.metadata["condition"])
        prediction = value["prediction"]
        # constant settings (parser, encoder) are in the task's metadata, not on every sample
        metadata = None
        if text_score is not None and prediction == ERROR:
            # no reply: nothing to compare (missing, not 0), counted by generation_counts
            value.update(NO_SCORES)
            value["no_reply"] = True
        elif text_score is not None:
            text = await text_score(state, target)
            assert text is not None and isinstance(text.value, dict)
            value.update(cast(GenerationScores, text.value))
            if (text.metadata or {}).get("no_reference"):
                metadata = {"no_reference": True}
                value["no_reference"] = True
        if mentions:
            value.update(evidence_mentions_in(reply or ""))
        return Score(
            value=score_value(value),
            answer=prediction,
            explanation=reply or state.metadata.get(GENERATE_ERROR) or "",
            metadata=metadata,
        )

    return score
