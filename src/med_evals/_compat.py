"""The one place that imports Inspect's private API (``inspect_ai._util``).

Inspect has no public home for these yet; if a release moves them, only this module changes.

- ``PrerequisiteError``: Inspect's error for a problem the user must fix before a run. Raised
  while ``inspect eval`` builds its tasks or models, the CLI prints its message alone, without a
  traceback, and exits 1. Raised during a run, Inspect ends the task with status ``error`` and
  shows its usual error panel (with a traceback).
- ``TerminateSampleError``: ends one sample (used to record provider failures as ERROR).
"""

from __future__ import annotations

from inspect_ai._util.error import PrerequisiteError
from inspect_ai._util.exception import TerminateSampleError
from rich.markup import escape

__all__ = ["InputError", "PrerequisiteError", "TerminateSampleError"]


class InputError(ValueError, PrerequisiteError):
    """Bad input a user can fix (a data file, a task parameter, a replay recording).

    A ``ValueError`` for Python callers; for ``inspect eval`` a ``PrerequisiteError``, so the
    command prints ``med_evals: <message>`` without a traceback and exits 1.
    """

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        # Inspect prints the message with rich markup: escape brackets such as "[methods]"
        self.message = escape(f"med_evals: {message}")
