"""``generate_until_parsed``, the solver of the MedREQAL builder's question task: a reply that
does not parse as ``QUESTION: ... LABEL: ...`` is asked again with the same messages, at most
``retries`` times; the attempts are recorded and the scorer reads the last reply."""

from __future__ import annotations

import pytest
from inspect_ai import Task
from inspect_ai.dataset import Sample

from med_evals.data.builders.medreqal_tasks import generate_until_parsed, question_label

from ..conftest import mock_output
from ..support.evals import inspect_eval

GOOD = "QUESTION: Does drug X lower blood pressure? LABEL: SUPPORTED"
BAD = "I cannot tell from this abstract."


def run(tmp_path, replies: list[str], retries: int):
    """One sample through the solver; the model gives ``replies`` in turn; the sample, and the
    messages each model call was sent."""
    sent: list[list[str]] = []
    queue = list(replies)

    def outputs(input, tools, tool_choice, config):  # noqa: A002 - mockllm's signature
        sent.append([m.text for m in input])
        return mock_output(queue.pop(0))

    task = Task(dataset=[Sample(input="the review's abstract", id="pmid1")],
                solver=generate_until_parsed(retries), scorer=question_label())
    [log] = inspect_eval(task, model="mockllm/model", model_args={"custom_outputs": outputs},
                         log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    [sample] = log.samples or []
    return sample, sent


@pytest.mark.parametrize(
    ("replies", "retries", "attempts", "parsed"),
    [
        ([GOOD], 1, 1, True),  # parsed at once: no second call
        ([BAD, GOOD], 1, 2, True),  # asked again once, parsed
        ([BAD, BAD], 1, 2, False),  # retries spent: the last reply is scored, unparsed
        ([BAD], 0, 1, False),  # no retry
        ([BAD, BAD, GOOD], 2, 3, True),
    ],
)
def test_a_reply_that_does_not_parse_is_asked_again(tmp_path, replies, retries, attempts, parsed):
    sample, sent = run(tmp_path, replies, retries)
    assert sample.metadata["attempts"] == attempts == len(sent)
    # each call is sent the sample's own messages, never the earlier unparsed reply
    assert all(messages == ["the review's abstract"] for messages in sent)
    score = sample.scores["question_label"]
    assert score.value == (1 if parsed else 0)
    assert score.metadata["attempts"] == attempts
    if parsed:
        assert (score.answer, score.metadata["question"]) == (
            "SUPPORTED", "Does drug X lower blood pressure?")
    assert sample.output.completion == replies[attempts - 1]
