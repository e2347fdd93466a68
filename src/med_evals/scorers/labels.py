"""Label families and their parsers: one place that turns a model's reply into a label.

A :class:`LabelSet` names the labels of one family, its positive class (for sensitivity and
F1 of one class), and the values a parse can take besides a label: ``INVALID`` (a reply that
states no label of the set, or more than one) and ``ERROR`` (no reply at all, or a provider
failure). Every task that shares a family shares its parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INVALID = "INVALID"
ERROR = "ERROR"


@dataclass(frozen=True)
class LabelSet:
    """The labels of one family, in the order used for confusion matrices and macro-F1."""

    name: str
    labels: tuple[str, ...]
    positive: str | None = None

    def __post_init__(self) -> None:
        if self.positive is not None and self.positive not in self.labels:
            raise ValueError(f"positive class {self.positive!r} is not one of {self.labels}")

    def is_label(self, value: str) -> bool:
        return value in self.labels


#: The oncology study: was the trial's primary endpoint met?
TRIAL_OUTCOME = LabelSet("trial_outcome", ("POSITIVE", "NEGATIVE"), positive="POSITIVE")

_INVERSE = {"POSITIVE": "NEGATIVE", "NEGATIVE": "POSITIVE"}


def invert_outcome(label: str) -> str:
    """The counterfactual target: POSITIVE <-> NEGATIVE."""
    try:
        return _INVERSE[label]
    except KeyError:
        raise ValueError(f"cannot invert {label!r}: not POSITIVE or NEGATIVE") from None


def parse_outcome_strict(reply: str | None) -> str:
    """The study's own rule (``run_evaluation.py``): the reply, stripped and upper-cased, is
    exactly a label.

    ``ERROR`` only when the API returned no text: ``None``, or an empty string (the study's
    ``... if content else None`` turns it into ``None``). A reply of whitespace only is text: the
    study strips it to ``""`` and parses it ``INVALID``, as any other text that is not a label.
    """
    if not reply:
        return ERROR
    text = reply.strip().upper()
    return text if text in TRIAL_OUTCOME.labels else INVALID


def is_exact_case(reply: str | None) -> bool:
    """The reply, stripped, is a label exactly as instructed (all caps)."""
    return reply is not None and reply.strip() in TRIAL_OUTCOME.labels


_OUTCOME_WORD = re.compile(r"\b(POSITIVE|NEGATIVE)\b", re.IGNORECASE)


def parse_outcome_lenient(reply: str | None) -> str:
    """A lenient reading: exactly one of the two label words occurs (in any case).

    ``"**POSITIVE**"``, ``"POSITIVE."`` and ``"The trial was negative"`` parse; a reply naming
    both labels, or neither (whitespace only), is ``INVALID``; no text at all is ``ERROR``, as in
    the strict parse. Reported beside the strict parse, never instead.
    """
    if not reply:
        return ERROR
    found = {m.upper() for m in _OUTCOME_WORD.findall(reply)}
    return found.pop() if len(found) == 1 else INVALID
