"""A toy yes / no / maybe study, for the tests: a plain new study as CONTRIBUTING describes it
(its manifest and data are beside it, written for the tests). A study of the package would be
registered in ``med_evals/tasks/__init__.py``; the toy registers itself, for the tests."""

from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig

from med_evals.data.datasets import fetch, read_csv_checked
from med_evals.scorers import plain_labels as plain
from med_evals.scorers.classification import label_headline
from med_evals.scorers.labels import LabelSet
from med_evals.study.params import Integer
from med_evals.study.spec import Probe, Study, register
from med_evals.study.task import study_params, study_task, subset_items

LABELS = LabelSet("toy_yesno", ("yes", "no", "maybe"))
CONFIG = GenerateConfig(temperature=0.0)
PROMPT = ("Answer the medical question with yes, no or maybe.\n\n"
          "Context: {context}\n\nQuestion: {question}\n\nAnswer:")


def record_to_sample(row: dict[str, Any]) -> Sample:
    return Sample(id=f"toy-{row['id']}", input=PROMPT.format(**row), target=row["answer"],
                  metadata={"question": row["question"]})


def parse(reply: str | None) -> str:
    return plain.parse_label(reply, LABELS.labels)


def probe_prompts() -> list[str]:
    s = record_to_sample({"id": "p", "question": "Does X help?", "context": "Made up.",
                          "answer": "yes"})
    return [repr(CONFIG), str(s.target), str(s.input)]


def probe_values(_: str | None = None) -> list[dict[str, Any]]:
    return [plain.label_value(r, LABELS.labels[i % 3], LABELS, "", parse)
            for i, r in enumerate(plain.probe_replies(LABELS.labels))]


SPEC = Study(
    task="toy_yesno", title="Toy yes/no/maybe (tests)", version="1.0.0",
    fingerprint_recorded="2d7cb372d874e935", datasets=("toy-yesno",),
    scorer=plain.label_scorer("toy_yesno_label", LABELS, parse), metrics=plain.label_metrics,
    label_sets={"toy_yesno": LABELS}, parser=parse, headline=plain.LABEL_HEADLINE,
    compute=label_headline, probe=Probe(prompts=probe_prompts, values=probe_values,
                                        replies=plain.probe_replies(LABELS.labels)),
)
register(SPEC)


@task
def toy_yesno(data_dir: str | None = None, subset: str | None = None, epochs: int = 1,
              metrics: str = "headline", shard: str | None = None, **unknown: Any) -> Task:
    """The toy study: each question answered yes, no or maybe.

    Args:
        data_dir: Folder holding ``toy-yesno/questions.csv``.
        subset: A stored subset.
        epochs: Replies per question, reduced by majority.
        metrics: ``headline`` or ``full``.
        shard: ``i/N``: shard ``i`` of ``N`` of the questions.
        unknown: Refused, naming the closest parameter.
    """
    p = study_params(SPEC, locals(), epochs=Integer(minimum=1))
    got = fetch("toy-yesno", "questions.csv", p.data_dir)
    df = read_csv_checked(got.path, ("id", "question", "context", "answer"),
                          labels={"answer": LABELS.labels}, non_empty=("answer",))
    rows = {str(r["id"]): r for r in df.to_dict("records")}
    keep = subset_items(SPEC, p.subset, {k: r["question"] for k, r in rows.items()})
    samples = [record_to_sample(rows[k]) for k in (rows if keep is None else keep)]
    return study_task(SPEC, p, samples, config=CONFIG,
                      metadata={"study": SPEC.title, "data": got.provenance()})
