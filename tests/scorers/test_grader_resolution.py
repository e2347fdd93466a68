"""Where the graders are resolved: each judge and the builder's flip check resolve the ``grader``
role inside their ``@scorer`` (``get_model(role=..., required=True)``: Inspect's own error when
it is not bound), and a task's metadata reads the model Inspect bound to the role
(:func:`~med_evals.scorers.judges.grader_model`, no model made)."""

from __future__ import annotations

import pytest
from inspect_ai.model import get_model

from med_evals.inspect_internals.compat import InputError, PrerequisiteError
from med_evals.scorers.judges import (
    GRADER_ROLE,
    conclusion_agreement,
    detectability_judge,
    grader_model,
    jury_models,
    plausibility_judge,
)
from med_evals.scorers.rewrite import rewrite_check

JUDGES = (
    plausibility_judge,
    detectability_judge,
    conclusion_agreement,
    lambda: rewrite_check(0.02, 0.55, 0.2),
)


@pytest.mark.parametrize("make", JUDGES)
def test_a_judge_without_a_grader_stops_when_it_is_made(make):
    with pytest.raises(PrerequisiteError, match="Model role 'grader' is required"):
        make()


def test_the_metadata_names_the_model_bound_to_the_role(set_model_roles):
    with pytest.raises(InputError, match="model role 'grader' is not bound: --model-role"):
        grader_model()
    grader, second = get_model("mockllm/grader"), get_model("mockllm/second")
    with set_model_roles(grader=grader, grader_2=second):
        assert grader_model() is get_model(role=GRADER_ROLE, required=True) is grader
        assert jury_models() == {"grader": "mockllm/grader", "grader_2": "mockllm/second"}
        assert all(make() for make in JUDGES)  # each resolves its grader
