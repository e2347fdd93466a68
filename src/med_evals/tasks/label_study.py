"""A label-classification study in one call: :func:`label_study`.

A plain study (items in a CSV, one prompt, a set of labels, a reply read as one of them) is one
task module: its ``record_to_sample`` beside its loader's columns, one :func:`label_study` call
and a short ``@task`` that hands its parameters to :meth:`LabelStudy.task`. The call builds,
and registers in :data:`med_evals.study.spec.STUDIES`, everything the rest of the package reads a
study by:

- the spec (:class:`~med_evals.study.spec.Study`): the labels, the parser (:func:`parse_label`
  unless the study brings its own), the headline (accuracy and macro-F1 over all samples, the
  valid rate: :func:`~med_evals.scorers.classification.label_headline`), the metric set
  (:func:`label_metrics`), the probe its fingerprint is taken on, the data pin;
- the scorer (one ``@scorer`` per study, named ``<task>_label``): each reply's
  :func:`label_value` (``prediction``, ``target``, ``valid``, ``condition``);
- the task: the manifest's file fetched and checked (columns, published counts), a stored
  subset kept, the prompt rendered into each sample's input, the study's generation settings,
  the epochs reduced by majority, and what produced the run in the log's metadata (data pin,
  prompt, the code's behaviour the gate compares).

So the report, ``med-evals diff``, ``baseline`` and ``regress`` read a new study's runs with no
other edit; ``inspect eval med_evals/<task>`` finds its ``@task`` because the package imports
every task module (:func:`med_evals.tasks.discover`). CONTRIBUTING.md, "Add a study".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai import Epochs, Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Metric, Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState

from med_evals.data.datasets import check_counts, count_summary, fetch, read_csv_checked
from med_evals.data.subsets import load_subset, select
from med_evals.scorers.classification import (
    accuracy_all,
    accuracy_valid,
    confusion_counts,
    headline,
    label_counts,
    label_headline,
    macro_f1_all,
    macro_f1_valid,
    valid_rate,
)
from med_evals.scorers.labels import ERROR, INVALID, LabelSet
from med_evals.scorers.reducers import majority_label
from med_evals.solvers.generate import GENERATE_ERROR, generate_or_record_error
from med_evals.study.checks import before_run
from med_evals.study.params import (
    CATCH_ALL,
    Check,
    Choice,
    Directory,
    Integer,
    ShardOf,
    Text,
    check_params,
)
from med_evals.study.shards import sharded
from med_evals.study.spec import (
    METRIC_SETS,
    PROBE_REPLIES,
    VALID_RATE,
    Headline,
    Probe,
    Study,
    register,
)

#: the headline of a plain label study: accuracy and macro-F1 over all samples (a reply with
#: no label is wrong: a miss for its gold label), then the valid rate
LABEL_HEADLINE = (
    Headline("accuracy_all", "Accuracy", "all samples (no label = wrong)"),
    Headline("macro_f1_all", "Macro-F1", "all samples (no label = miss)"),
    VALID_RATE,
)
_CUE = r"(?:final\s+answer|answer|label|verdict)\s*(?:is\b|:|=|-)"


def parse_label(reply: str | None, labels: Sequence[str]) -> str:
    """A reply's label: ``ERROR`` for no reply; the label after an ``Answer:`` / ``Label:`` cue
    (the first such cue naming one); else the one label the reply names (as a whole word, any
    case, markup around it ignored); ``INVALID`` when it names none or two different ones."""
    if reply is None or not reply.strip():
        return ERROR
    words = "|".join(re.escape(x).replace(r"\ ", r"\s+")
                     for x in sorted(labels, key=len, reverse=True))
    label = re.compile(r"(?<![\w-])(" + words + r")(?![\w-])", re.IGNORECASE)
    by_text = {" ".join(x.lower().split()): x for x in labels}

    def named(text: str) -> set[str]:
        return {by_text[" ".join(m.group(1).lower().split())] for m in label.finditer(text)}

    for cue in re.finditer(_CUE + r"[\s*_`\"'(\[]*(" + words + r")(?![\w-])", reply, re.I):
        return by_text[" ".join(cue.group(1).lower().split())]
    found = named(reply)
    return next(iter(found)) if len(found) == 1 else INVALID


def label_value(reply: str | None, target: str, label_set: LabelSet, condition: str = "",
                parse: Callable[[str | None], str] | None = None) -> dict[str, Any]:
    """A reply's score value: its label (``parse``, default :func:`parse_label`), the gold
    label, whether the reply named exactly one label, and the sample's condition (``""``:
    none)."""
    prediction = parse(reply) if parse else parse_label(reply, label_set.labels)
    return {"prediction": prediction, "target": target, "valid": label_set.is_label(prediction),
            "condition": condition}


def label_metrics(study: Study, full: bool = False, label_set: str | None = None,
                  **_: Any) -> list[Metric | dict[str, list[Metric]]]:
    """The headline (:func:`~med_evals.scorers.classification.headline`), then with ``full``
    accuracy and macro-F1 over all samples and over valid ones, the valid rate, the
    predicted-label counts and the confusion cells."""
    labels = list(study.labels())
    out: list[Metric | dict[str, list[Metric]]] = [headline(study)]
    if full:
        out += [accuracy_all(), accuracy_valid(), macro_f1_all(labels), macro_f1_valid(labels),
                valid_rate(), label_counts(labels), confusion_counts(labels)]
    return out


def _label_scorer(name: str, label_set: LabelSet, parse: Callable[..., str]) -> Callable[
        ..., Scorer]:
    """The study's ``@scorer``, registered as ``name``: each reply's :func:`label_value` with
    the study's parser (a provider error recorded by the solver is ``ERROR``)."""

    def make() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score:
            reply = None if state.metadata.get(GENERATE_ERROR) else state.output.completion
            value = label_value(reply, target.text, label_set,
                                str(state.metadata.get("condition", "")), parse)
            return Score(value=value, answer=value["prediction"], explanation=reply or "")

        return score

    make.__name__ = name
    return scorer(metrics=[], name=name)(make)


@dataclass(frozen=True)
class LabelStudy:
    """A study :func:`label_study` built: its spec, and the task it runs."""

    spec: Study
    dataset: str
    file: str
    prompt: str
    record_to_sample: Callable[[dict[str, Any], int], Sample]
    columns: tuple[str, ...]
    target_column: str
    config: GenerateConfig
    #: the study's own task parameters (name -> check), beside the common ones
    params: Mapping[str, Check] = field(default_factory=dict)
    paper: str = ""

    def samples(self, data_dir: str | None) -> tuple[list[Sample], dict[str, Any]]:
        """Every sample of the manifest's file (fetched and checked), with its prompt, and the
        data's provenance for the log."""
        got = fetch(self.dataset, self.file, data_dir)
        labels = self.spec.labels()
        df = read_csv_checked(got.path, self.columns, labels={self.target_column: labels},
                              non_empty=(self.target_column,))
        count_problem = check_counts(got.path, list(df[self.target_column]), self.dataset)
        out = []
        for i, row in enumerate(df.to_dict("records")):
            s = self.record_to_sample(row, i)
            text = self.prompt.format(input=s.input, **(s.metadata or {}))
            out.append(s.model_copy(update={"input": text}))
        data = {**got.provenance(),
                "count_check": count_problem or count_summary(self.dataset)}
        return out, data

    def task(self, values: Mapping[str, Any]) -> Task:
        """The Task for the ``@task`` function's parameters (``locals()`` at its top, ending
        with ``**unknown``: a parameter it does not take is refused, naming the closest).
        ``-T shard=i/N`` is taken by every such task, named in its signature or not (it
        arrives in ``**unknown`` then)."""
        values = _with_shard(values)
        p = check_params(self.spec.task, values, data_dir=Directory(), subset=Text(),
                         epochs=Integer(minimum=1), metrics=Choice(values=METRIC_SETS),
                         shard=ShardOf(), **self.params)
        samples, data = self.samples(p.data_dir)
        if p.subset:
            by_id = {str(s.id): s for s in samples}
            samples = [by_id[i] for i in select(by_id, load_subset(self.spec.task, p.subset))]
        before_run(self.spec.task, samples)
        return sharded(self.spec.task, Task(
            dataset=MemoryDataset(samples, name=self.spec.task),
            solver=generate_or_record_error(),
            scorer=self.spec.make_scorer(full=p.metrics == "full"),
            config=self.config,
            epochs=Epochs(p.epochs, majority_label()),
            version=self.spec.version,
            headline_metric=self.spec.scorer_name,
            metadata={"study": self.spec.title, "paper": self.paper, "data": data,
                      "prompt": None, "behaviour": self.spec.behaviour(),
                      "subset": p.subset},
        ), p.shard)


def _with_shard(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with ``shard`` as a parameter of its own, taken out of ``**unknown`` where
    the ``@task`` function does not name it."""
    out = dict(values)
    if "shard" not in out:
        unknown = dict(out.get(CATCH_ALL) or {})
        out["shard"] = unknown.pop("shard", None)
        out[CATCH_ALL] = unknown
    return out


def label_study(
    *,
    task: str,
    title: str,
    version: str,
    fingerprint: str,
    labels: Sequence[str],
    prompt: str,
    dataset: str,
    file: str,
    record_to_sample: Callable[[dict[str, Any], int], Sample],
    columns: Sequence[str],
    target_column: str,
    probe_row: Mapping[str, Any],
    config: GenerateConfig | None = None,
    parser: Callable[[str | None], str] | None = None,
    params: Mapping[str, Check] | None = None,
    paper: str = "",
) -> LabelStudy:
    """Build and register a label-classification study (see the module's docstring).

    Args:
        task: The task's name (``inspect eval med_evals/<task>``), the ``@task`` function's.
        title: The study as the report names it (authors and year).
        version: The task's version, for Inspect and for people (the gate compares behaviour).
        fingerprint: The recorded fingerprint of its behaviour (``python -m
        med_evals.tasks``
            prints it; tests/test_studies.py compares).
        labels: The labels, in the order of confusion matrices and macro-F1.
        prompt: The user message: ``{input}`` is the sample's input, ``{field}`` any of its
            metadata (the paper's words, verbatim).
        dataset: Its manifest's name (``manifests/<dataset>.yaml``: source, pin, checksums,
            licence, published counts); ``file`` the file of it read.
        record_to_sample: One row (a dict of the CSV's columns) and its index -> a Sample whose
            target is the gold label.
        columns: The columns the CSV must have; ``target_column`` the gold label's (checked to
            hold only ``labels``).
        probe_row: A made-up row (never the dataset's) the fingerprint renders the prompt with.
        config: Generation settings (default: temperature 0).
        parser: The reply parser (default :func:`parse_label` over ``labels``).
        params: The task's own parameters and their checks, beside ``data_dir``, ``subset``,
            ``epochs``, ``metrics`` and ``shard`` (``i/N``: :mod:`med_evals.study.shards`).
        paper: The paper, for the log.
    """
    label_set = LabelSet(task, tuple(labels))
    parse = parser or (lambda reply: parse_label(reply, label_set.labels))
    replies = (*PROBE_REPLIES, *labels, *(x.lower() for x in labels),
               *(f"Answer: {x}" for x in labels), " and ".join(labels))

    def probe_prompts() -> list[str]:
        s = record_to_sample(dict(probe_row), 0)
        return [repr(config), s.target if isinstance(s.target, str) else str(s.target),
                prompt.format(input=s.input, **(s.metadata or {}))]

    def probe_values(_: str | None = None) -> list[dict[str, Any]]:
        return [label_value(r, labels[i % len(labels)], label_set, "", parse)
                for i, r in enumerate(replies)]

    spec = Study(
        task=task, title=title, version=version, fingerprint_recorded=fingerprint,
        scorer=_label_scorer(f"{task}_label", label_set, parse), metrics=label_metrics,
        label_sets={task: label_set}, parser=parse, headline=LABEL_HEADLINE,
        compute=label_headline,
        probe=Probe(prompts=probe_prompts, replies=replies, values=probe_values),
        datasets=(dataset,),
    )
    register(spec)
    return LabelStudy(spec, dataset, file, prompt, record_to_sample, tuple(columns),
                      target_column, config or GenerateConfig(temperature=0.0),
                      dict(params or {}), paper)
