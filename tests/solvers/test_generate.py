"""The text recorded for a provider failure (``generate_error``)."""

from tenacity import Future, RetryError

from med_evals.solvers.generate import error_text


def test_a_failure_after_inspects_retries_is_named_by_its_last_error():
    """Inspect's retries, run out, raise tenacity's RetryError: it was recorded as
    `RetryError: RetryError[<Future at 0x7f... state=finished raised AttemptTimeoutError>]`."""
    last = Future(attempt_number=3)
    last.set_exception(TimeoutError("attempt_timeout '2' exceeded."))
    assert error_text(RetryError(last)) == "TimeoutError: attempt_timeout '2' exceeded."
    assert error_text(ValueError("bad request")) == "ValueError: bad request"
