"""``generate_or_record_error``: a provider failure left after Inspect's retries is recorded on
the sample (``generate_error``, scored ERROR by the studies) and the run goes on; Inspect's own
control flow (an operator's termination, a limit, a configuration error) is never recorded."""

from __future__ import annotations

from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes

from med_evals.inspect_internals.compat import PrerequisiteError, TerminateSampleError
from med_evals.solvers.generate import GENERATE_ERROR, generate_or_record_error

from ..conftest import mock_output
from ..support.evals import inspect_eval


def run(tmp_path, reply, **task_args):
    """Samples ``ok`` and ``bad`` through the solver; ``reply(text)`` is the model's reply (or
    raises), the log's samples by id."""

    def outputs(input, tools, tool_choice, config):  # noqa: A002 - mockllm's signature
        return mock_output(reply(input[-1].text))

    task = Task(dataset=[Sample(input="ok", target="yes", id="ok"),
                         Sample(input="bad", target="yes", id="bad")],
                solver=generate_or_record_error(), scorer=includes(), **task_args)
    [log] = inspect_eval(task, model="mockllm/model", model_args={"custom_outputs": outputs},
                         log_dir=str(tmp_path), display="none", max_retries=0)
    return log, {str(s.id): s for s in log.samples or []}


def test_a_provider_failure_is_recorded_and_the_run_goes_on(tmp_path):
    def reply(text):
        if text == "bad":
            raise RuntimeError("HTTP 500 from provider")
        return "yes"

    log, samples = run(tmp_path, reply)
    assert log.status == "success"
    assert samples["bad"].error is None
    assert samples["bad"].metadata[GENERATE_ERROR] == "RuntimeError: HTTP 500 from provider"
    assert GENERATE_ERROR not in samples["ok"].metadata
    assert samples["ok"].output.completion == "yes"
    assert samples["ok"].scores["includes"].value == "C"


def test_an_operators_termination_is_not_a_provider_failure(tmp_path):
    def reply(text):
        if text == "bad":
            raise TerminateSampleError("stopped by the operator")
        return "yes"

    log, samples = run(tmp_path, reply)
    bad = samples["bad"]
    assert bad.limit is not None and bad.limit.type == "operator"
    assert GENERATE_ERROR not in bad.metadata


def test_a_limit_is_not_a_provider_failure(tmp_path):
    log, samples = run(tmp_path, lambda text: "yes", message_limit=1)
    for sample in samples.values():
        assert sample.limit is not None and sample.limit.type == "message"
        assert GENERATE_ERROR not in sample.metadata


def test_a_configuration_error_stops_the_run(tmp_path):
    """A problem the user must fix (a missing API key) ends the run with Inspect's error, never
    a sample scored ERROR that a report would count as the model's failure."""
    def reply(text):
        if text == "bad":
            raise PrerequisiteError("no API key")
        return "yes"

    log, samples = run(tmp_path, reply)
    assert log.status == "error" and log.error is not None and log.error.message == "no API key"
    assert samples["bad"].error is not None and GENERATE_ERROR not in samples["bad"].metadata


def test_a_refusal_the_run_asked_to_fail_on_is_not_a_provider_failure(tmp_path):
    """With ``fail_on_refusal`` Inspect raises ModelRefusalError to fail the sample: it stays a
    sample error (retried by eval-retry), not a reply scored ERROR."""
    from inspect_ai.model import ModelRefusalError

    def reply(text):
        if text == "bad":
            raise ModelRefusalError(mock_output("I can't help with that."), "mockllm/model")
        return "yes"

    log, samples = run(tmp_path, reply)
    bad = samples.get("bad")
    # the sample failed as Inspect fails it (the log errors, or the sample holds the error)
    assert bad is None or (bad.error is not None and GENERATE_ERROR not in bad.metadata)
    assert log.status == "error" or bad is not None
