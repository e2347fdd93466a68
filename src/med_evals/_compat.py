"""The one place that imports Inspect's private API (``inspect_ai._util``).

Inspect has no public home for these yet; if a release moves them, only this module changes.

- ``PrerequisiteError``: Inspect's error for a problem the user must fix before a run. Raised
  while ``inspect eval`` builds its tasks or models, the CLI prints its message alone, without a
  traceback, and exits 1 (but through its console, which ``--display none`` silences: see
  :class:`InputError`). Raised during a run, Inspect ends the task with status ``error`` and
  shows its usual error panel (with a traceback).
- ``TerminateSampleError``: ends one sample (used to record provider failures as ERROR).
- ``registry_unqualified_name``: a metric's name as Inspect logs it (without the package).
- ``with_metrics``: give one scorer other metrics, as ``Task(metrics=...)`` does for all of a
  task's scorers (through the scorer's registry entry, like Inspect's own override).
- ``active_model``: the model under evaluation while Inspect builds a task (None outside a run;
  unlike ``get_model()``, it never creates one).
- ``registry_find``: the model providers Inspect knows, to name the closest to a misspelt one
  (:func:`unknown_provider_message`).
"""

from __future__ import annotations

import difflib
import re
import sys
from types import TracebackType

from inspect_ai._util.error import PrerequisiteError
from inspect_ai._util.exception import TerminateSampleError
from inspect_ai._util.registry import (
    RegistryInfo,
    registry_find,
    registry_info,
    registry_unqualified_name,
    set_registry_info,
)
from inspect_ai.model._model import active_model
from inspect_ai.scorer import Metric, Scorer
from rich.markup import escape

__all__ = [
    "InputError",
    "active_model",
    "PrerequisiteError",
    "TerminateSampleError",
    "registry_unqualified_name",
    "with_metrics",
]


def with_metrics(scorer: Scorer, metrics: list[Metric | dict[str, list[Metric]]]) -> Scorer:
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

    Inspect prints an uncaught ``PrerequisiteError`` from its exception hook through its rich
    console, to stdout, and ``--display none`` makes that console quiet: the run exited 1 and
    printed nothing. So creating an InputError puts :func:`_print_uncaught_input_error` in
    front of whatever ``sys.excepthook`` is then (Inspect's, once ``inspect eval`` has started):
    an InputError that ends the process is printed by us, one line on stderr, whatever the
    display, and Inspect's hook is not called for it (so it is printed once); every other
    exception goes to the hook as before. A Python caller that catches the error sees nothing.
    """

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        # Inspect prints the message with rich markup: escape brackets such as "[methods]"
        self.message = escape(f"med_evals: {message}")
        install_excepthook()


def install_excepthook() -> None:
    """Put :func:`_print_uncaught_input_error` and :func:`unknown_provider_message` in front of
    the current ``sys.excepthook`` (once: a hook already ours is left alone). Called when an
    InputError is made, and when Inspect loads this package's entry point (which it does when a
    name it looks up, a task or a provider, is not among its own: a misspelt ``--model``)."""
    current = sys.excepthook
    if getattr(current, "_med_evals_input_errors", False):
        return

    def hook(kind: type[BaseException], ex: BaseException, tb: TracebackType | None) -> None:
        if isinstance(ex, InputError):
            _print_uncaught_input_error(ex)
        elif (message := unknown_provider_message(ex)) is not None:
            print(f"med_evals: {message}", file=sys.stderr, flush=True)
        else:
            current(kind, ex, tb)

    setattr(hook, "_med_evals_input_errors", True)  # noqa: B010 - an attribute of a function
    sys.excepthook = hook


def _print_uncaught_input_error(ex: InputError) -> None:
    """``med_evals: <message>`` on stderr (the interpreter then exits 1, as Inspect's would)."""
    print(f"med_evals: {ex}", file=sys.stderr, flush=True)


#: Inspect's message for a provider it does not know (``get_model``)
_UNKNOWN_PROVIDER = re.compile(r"Model API (\S+) of model '(.+)' not recognized\.")


def _leaves(ex: BaseException) -> list[BaseException]:
    if isinstance(ex, BaseExceptionGroup):
        return [leaf for inner in ex.exceptions for leaf in _leaves(inner)]
    return [ex]


def unknown_provider_message(ex: BaseException) -> str | None:
    """One line for Inspect's error on an unknown ``--model`` provider (raised inside a task
    group, so Python would print it as an exception group: 213 lines), naming the closest
    provider Inspect knows; None for any other exception, which keeps its traceback."""
    leaves = _leaves(ex)
    if len(leaves) != 1 or not isinstance(leaves[0], ValueError):
        return None
    match = _UNKNOWN_PROVIDER.fullmatch(str(leaves[0]))
    if match is None:
        return None
    api, model = match.groups()
    known = {
        registry_unqualified_name(registry_info(o))
        for o in registry_find(lambda info: info.type == "modelapi")
    }
    close = difflib.get_close_matches(api, sorted(known), n=1)
    hint = f"; did you mean {close[0]}/{model.split('/', 1)[1]}?" if close else ""
    return (
        f"--model {model}: unknown model provider '{api}'{hint} (providers: Inspect's "
        "documentation of models, and embedded and replay from med_evals: docs/models.md)"
    )
