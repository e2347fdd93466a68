"""Generation that records a provider failure on the sample instead of ending the run.

The oncology study called each API once per trial and recorded a failed call as ``ERROR``,
counted apart from invalid replies. :func:`generate_or_record_error` does the same inside
Inspect: Inspect's own retries run first (``--max-retries``, ``--timeout``); an error that is
still raised after them is stored in ``state.metadata["generate_error"]`` and the sample is
scored as ``ERROR``. Inspect's own control flow (limits, cancellation) is never caught.
"""

from __future__ import annotations

from inspect_ai.model import ModelRefusalError
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.solver import generate as generate_solver
from inspect_ai.util import LimitExceededError

from med_evals.inspect_internals.compat import PrerequisiteError, TerminateSampleError

GENERATE_ERROR = "generate_error"

#: Inspect's own control flow and configuration errors: never recorded as a provider failure
#: (here, nor as a judge failure: :func:`med_evals.scorers.judges.ask_judge`). A refusal
#: raised because the run asked for it (``--fail-on-refusal``) fails its sample, as Inspect does.
CONTROL_FLOW = (LimitExceededError, TerminateSampleError, PrerequisiteError, ModelRefusalError)


@solver
def generate_or_record_error() -> Solver:
    """Generate once; a provider error is recorded on the sample rather than raised."""
    gen = generate_solver()

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        try:
            return await gen(state, generate)
        except Exception as ex:  # noqa: BLE001 - recorded, counted and shown in the log
            if isinstance(ex, CONTROL_FLOW):
                raise
            state.metadata[GENERATE_ERROR] = error_text(ex)
            return state

    return solve


def error_text(ex: BaseException) -> str:
    """``<error type>: <message>``. When Inspect's retries ran out (its ``--max-retries`` or
    ``--timeout``), the last attempt's error: tenacity's ``RetryError`` wrapping it read
    ``RetryError[<Future at 0x7f... state=finished raised AttemptTimeoutError>]``."""
    attempt = getattr(ex, "last_attempt", None)  # RetryError: tenacity, Inspect's retries
    last = attempt.exception() if attempt is not None and attempt.failed else None
    return f"{type(last).__name__}: {last}" if last is not None else f"{type(ex).__name__}: {ex}"
