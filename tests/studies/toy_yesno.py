"""A toy yes / no / maybe study, for the tests: a plain new study as CONTRIBUTING describes it,
built with label_study (its manifest and data are beside it, written for the tests)."""

from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample

from med_evals.tasks.label_study import label_study

PROMPT = (
    "Answer the medical question with yes, no or maybe.\n\n"
    "Context: {context}\n\nQuestion: {input}\n\nAnswer:"
)


def record_to_sample(row: dict[str, Any], index: int) -> Sample:
    return Sample(id=f"toy-{row['id']}", input=row["question"], target=row["answer"],
                  metadata={"context": row["context"]})


STUDY = label_study(
    task="toy_yesno",
    title="Toy yes/no/maybe (tests)",
    version="1.0.0",
    fingerprint="7c20532833410afe",
    labels=("yes", "no", "maybe"),
    prompt=PROMPT,
    dataset="toy-yesno",
    file="questions.csv",
    record_to_sample=record_to_sample,
    columns=("id", "question", "context", "answer"),
    target_column="answer",
    probe_row={"id": "p", "question": "Does X help?", "context": "Made up.", "answer": "yes"},
)
SPEC = STUDY.spec


@task
def toy_yesno(
    data_dir: str | None = None,
    subset: str | None = None,
    epochs: int = 1,
    metrics: str = "headline",
    **unknown: Any,
) -> Task:
    """The toy study: each question answered yes, no or maybe.

    Args:
        data_dir: Folder holding ``toy-yesno/questions.csv``.
        subset: A stored subset.
        epochs: Replies per question, reduced by majority.
        metrics: ``headline`` or ``full``.
        unknown: Refused, naming the closest parameter.
    """
    return STUDY.task(locals())
