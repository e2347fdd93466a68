"""Label families and their parsers: one place that turns a model's reply into a label.

A :class:`LabelSet` names the labels of one family, its positive class (for sensitivity and
F1 of one class), and the values a parse can take besides a label: ``INVALID`` (a reply that
states no label of the set, or more than one) and ``ERROR`` (no reply at all, or a provider
failure). Every task that shares a family shares its parser.
"""

from __future__ import annotations

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
