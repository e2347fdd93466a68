"""Generation that records a provider failure on the sample instead of ending the run.

The oncology study called each API once per trial and recorded a failed call as ``ERROR``,
counted apart from invalid replies. :func:`generate_or_record_error` does the same inside
Inspect: Inspect's own retries run first (``--max-retries``, ``--timeout``); an error that is
still raised after them is stored in ``state.metadata["generate_error"]`` and the sample is
scored as ``ERROR``. Inspect's own control flow (limits, cancellation) is never caught.

A study whose prompt is a template around the item (MedREQAL's and HealthFC's Table 7 prompts,
MedEvidence's final-answer prompt) passes it as ``prompt``: the sample's input stays the item
itself (the question, the claim: what ``inspect view`` lists), and the messages sent are
rendered here from the sample's state, in this one solver (no prompt solver of its own, whose
span and state event Inspect would record for every sample: docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inspect_ai.model import ChatMessage, ModelRefusalError
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.solver import generate as generate_solver
from inspect_ai.util import LimitExceededError

from med_evals.inspect_internals.compat import PrerequisiteError, TerminateSampleError

GENERATE_ERROR = "generate_error"

#: Inspect's own control flow and configuration errors: never recorded as a provider failure
#: (here, nor as a judge failure: :func:`med_evals.scorers.judges.ask_judge`). A refusal
#: raised because the run asked for it (``--fail-on-refusal``) fails its sample, as Inspect does.
CONTROL_FLOW = (LimitExceededError, TerminateSampleError, PrerequisiteError, ModelRefusalError)


#: A study's prompt: the messages to send for a sample, rendered from its state (its input, the
#: item; its metadata: the sample's condition); the plan in the log names the function.
Prompt = Callable[[TaskState], Sequence[ChatMessage]]


@solver
def generate_or_record_error(prompt: Prompt | None = None) -> Solver:
    """Generate once; a provider error is recorded on the sample rather than raised. With
    ``prompt``, the messages sent are ``prompt(state)`` (they replace the state's messages: the
    sample's input as a user message) rather than the input itself."""
    gen = generate_solver()

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if prompt is not None:
            state.messages = list(prompt(state))
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
