"""The agreement judge never grades a missing answer or a missing reference."""

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import get_model

from med_evals.scorers.judges import NO_REFERENCE, NO_REPLY, conclusion_agreement
from med_evals.scorers.reducers import majority_label

from ..conftest import mock_output, replying
from ..support.evals import inspect_eval


def test_agreement_judge_skips_samples_without_reply_or_reference(tmp_path):
    asked: list[str] = []

    def grade(input, *args):  # noqa: A002
        asked.append(str(input))
        return mock_output('{"verdict": "agrees", "reason": "same"}')

    @task
    def agreement_task():
        return Task(
            dataset=[
                Sample(id="ok", input="Q1?", metadata={"reference": "Drug helps."}),
                Sample(id="no-reply", input="Q2?", metadata={"reference": "It does not."}),
                Sample(id="no-ref", input="Q3?", metadata={"reference": "  "}),
            ],
            scorer=conclusion_agreement(attempts=1),
            epochs=Epochs(1, majority_label()),
        )

    [log] = inspect_eval(
        agreement_task,
        model=get_model(
            "mockllm/model", custom_outputs=replying(lambda t: "" if "Q2" in t else "It helps.")
        ),
        model_roles={"grader": get_model("mockllm/model", custom_outputs=grade)},
        display="none",
        log_dir=str(tmp_path),
        max_samples=1,
    )
    assert log.status == "success"
    values = {s.id: s.scores["conclusion_agreement"].value["agreement"] for s in log.samples}
    assert values == {"ok": "agrees", "no-reply": NO_REPLY, "no-ref": NO_REFERENCE}
    assert len(asked) == 1  # only the sample with a reply and a reference reached the grader
    m = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    assert m["agrees"] == 1.0 and m["n"] == 3
    assert m["not_judged_no_reply"] == 1 and m["not_judged_no_reference"] == 1
