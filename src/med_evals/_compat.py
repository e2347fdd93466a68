"""The one place that imports Inspect's private API (``inspect_ai._util``).

Inspect has no public home for these yet; if a release moves them, only this module changes.

- ``PrerequisiteError``: Inspect's error for a problem the user must fix before a run. Raised
  while ``inspect eval`` builds its tasks or models, the CLI prints its message alone, without a
  traceback, and exits 1. Raised during a run, Inspect ends the task with status ``error`` and
  shows its usual error panel (with a traceback).
- ``TerminateSampleError``: ends one sample (used to record provider failures as ERROR).
- ``registry_unqualified_name``: a metric's name as Inspect logs it (without the package).
- ``with_metrics``: give one scorer other metrics, as ``Task(metrics=...)`` does for all of a
  task's scorers (through the scorer's registry entry, like Inspect's own override).
"""

from __future__ import annotations

from inspect_ai._util.error import PrerequisiteError
from inspect_ai._util.exception import TerminateSampleError
from inspect_ai._util.registry import (
    RegistryInfo,
    registry_info,
    registry_unqualified_name,
    set_registry_info,
)
from inspect_ai.scorer import Metric, Scorer
from rich.markup import escape

__all__ = [
    "InputError",
    "PrerequisiteError",
    "TerminateSampleError",
    "registry_unqualified_name",
    "with_metrics",
]


def with_metrics(scorer: Scorer, metrics: list[Metric]) -> Scorer:
    """``scorer`` with ``metrics`` instead of the ones its decorator declares (this scorer
    only: ``Task(metrics=...)`` would override every scorer of the task, the judge's too)."""
    info = registry_info(scorer)
    metadata = {**info.metadata, "metrics": metrics}
    set_registry_info(scorer, RegistryInfo(type=info.type, name=info.name, metadata=metadata))
    return scorer


class InputError(ValueError, PrerequisiteError):
    """Bad input a user can fix (a data file, a task parameter, a replay recording).

    A ``ValueError`` for Python callers; for ``inspect eval`` a ``PrerequisiteError``, so the
    command prints ``med_evals: <message>`` without a traceback and exits 1.
    """

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        # Inspect prints the message with rich markup: escape brackets such as "[methods]"
        self.message = escape(f"med_evals: {message}")
