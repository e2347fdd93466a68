"""The one task builder: every task of the package is its spec, its samples and this call.

A task module's ``@task`` function reads like the paper's method: it checks its parameters
(:func:`study_params`: the task's own and the ones every task takes), loads its data, keeps a
stored subset of its items (:func:`subset_items`), makes its samples, and hands them to
:func:`study_task`, which checks the run before Inspect starts it
(:func:`med_evals.study.checks.before_run`), builds the ``Task`` (the study's scorer with its
metric set, the epochs reduced by majority, the version, the viewer's headline column), records
what produced the run in the log's metadata (the gated numbers' ``behaviour``, the subset) and
keeps the samples of ``-T shard=i/N`` (:mod:`med_evals.study.shards`, by the spec's ``item``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from inspect_ai import Epochs, Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Scorer, ScoreReducer
from inspect_ai.solver import Solver
from inspect_ai.util import registry_info
from inspect_ai.viewer import TaskSamplesColumn, TaskSamplesSort, TaskSamplesView, ViewerConfig

from med_evals.data.subsets import load_subset, select
from med_evals.scorers.reducers import majority_label
from med_evals.solvers.generate import generate_or_record_error
from med_evals.study.checks import NO_ROLES, Roles, before_run
from med_evals.study.params import Check, Choice, Directory, ShardOf, Text, check_params
from med_evals.study.shards import sharded
from med_evals.study.spec import METRIC_SETS, Study

#: the parameters every task takes, beside its own (a task names each in its signature)
COMMON_PARAMS: dict[str, Check] = {
    "data_dir": Directory(),
    "subset": Text(),
    "metrics": Choice(values=METRIC_SETS),
    "shard": ShardOf(),
}


def study_params(spec: Study, values: Mapping[str, Any], **checks: Check) -> SimpleNamespace:
    """The task's parameters, checked (:func:`med_evals.study.params.check_params`):
    ``values`` is ``locals()`` at the top of the ``@task`` function, ``checks`` its own
    parameters' checks beside :data:`COMMON_PARAMS` (those of them its signature names)."""
    common = {k: c for k, c in COMMON_PARAMS.items() if k in values and k not in checks}
    return check_params(spec.task, values, **common, **checks)


def subset_items(spec: Study, subset: str | None, texts: Mapping[str, str]) -> list[str] | None:
    """The ids of a stored subset's items (``-T subset=<name>``), each checked to be one of
    ``texts`` (item id -> its identifying text, which the subset records a digest of), in the
    subset's order; None without a subset (every item)."""
    if not subset:
        return None
    return select(texts, load_subset(spec.task, subset), texts)


#: the sample list's built-in columns the task views leave out (their data stays one click away:
#: the viewer's Columns menu)
HIDDEN_COLUMNS = ("sampleStatus", "epoch", "tokens", "duration", "error", "retries", "limit")


def viewer_of(spec: Study, scorer: str, value_keys: Sequence[str] = (),
              conditions: bool = True) -> ViewerConfig:
    """How ``inspect view`` lists the task's samples: each by its id, what it asks (the
    sample's input: the claim, the question, the trial's text), its gold label (target), the
    label read from the reply (answer) and the spec's ``view_scores`` (its ``condition`` only
    in a run with ``conditions``), sorted by the spec's ``view_sort`` and then the id; the other
    keys of the score value (``value_keys``) and the built-in columns of :data:`HIDDEN_COLUMNS`
    hidden."""
    views = {k: v for k, v in spec.view_scores.items() if conditions or k != "condition"}
    shown = [TaskSamplesColumn.score(scorer, key) for key in views]
    hidden = [TaskSamplesColumn.score(scorer, key, visible=False)
              for key in value_keys if key not in views]
    return ViewerConfig(task_samples_view=TaskSamplesView(
        name=spec.title,
        columns=[TaskSamplesColumn(id="sampleId"), TaskSamplesColumn(id="input"),
                 TaskSamplesColumn(id="target"), TaskSamplesColumn(id="answer"), *shown,
                 *hidden, *(TaskSamplesColumn(id=c, visible=False) for c in HIDDEN_COLUMNS)],
        sort=[*(TaskSamplesSort.score(scorer, key) for key in spec.view_sort),
              TaskSamplesSort(column="sampleId")],
        score_labels=views,
        multiline=True,
    ))


def study_task(
    spec: Study,
    p: SimpleNamespace,
    samples: Sequence[Sample],
    *,
    metadata: Mapping[str, Any],
    config: GenerateConfig,
    solver: Solver | list[Solver] | None = None,
    scorer: Scorer | None = None,
    scorers: Sequence[Scorer] = (),
    task_args: Mapping[str, Any] | None = None,
    metric_options: Mapping[str, Any] | None = None,
    reducer: ScoreReducer | None = None,
    roles: Roles = NO_ROLES,
    model_called: bool = True,
    dataset: str | None = None,
    location: str | None = None,
) -> Task:
    """The ``Task`` of ``spec`` over ``samples`` (see the module's docstring).

    Args:
        spec: The task's spec.
        p: Its checked parameters (:func:`study_params`): ``metrics``, ``subset``, ``shard``
            and ``epochs`` are read where the task takes them.
        samples: The run's samples, after every selection of the task's own (the subset's
            items, conditions, dates); ``-T shard=`` is taken here.
        metadata: What produced the run, the study's own keys (its data's provenance, prompt,
            settings); the builder adds the gated numbers' ``behaviour`` and the ``subset``
            for a study with headline numbers.
        config: The study's generation settings (the paper's).
        solver: The solver (default: one generation that records a provider failure on the
            sample, :func:`~med_evals.solvers.generate.generate_or_record_error`).
        scorer: The study's scorer (default: the spec's, made with no arguments).
        scorers: Other scorers beside the study's (a judge): the study's then carries its
            metric set itself, as ``Task(metrics=...)`` would give the set to every scorer.
        task_args: The arguments that choose the spec's label set (its ``label_arg``).
        metric_options: Options of the spec's metric set (the oncology study's flip pairs).
        reducer: The epoch reducer (default: the majority label, ties to the first epoch).
        roles: The model roles the task's scorers and solvers read.
        model_called: False for a task whose solver never calls the model under evaluation.
        dataset: The dataset's name in the log (default: the task's).
        location: Where the data was read from (the log's dataset location).
    """
    before_run(spec.task, samples, model_called=model_called, roles=roles,
               reducer=registry_info(reducer).name if reducer is not None else "majority_label")
    full = getattr(p, "metrics", "headline") == "full"
    study_scorer = scorer if scorer is not None else spec.scorer()
    metrics = None
    if spec.metrics is not None:
        metric_set = spec.metric_set(full, task_args, **(metric_options or {}))
        if scorers:
            # Task-level metrics would replace the other scorers' own
            from med_evals.inspect_internals.compat import with_metrics

            study_scorer = with_metrics(study_scorer, metric_set)
        else:
            # Task-level metrics: kept with the log, so `inspect score` re-scores with the set
            metrics = metric_set
    recorded: dict[str, Any] = dict(metadata)
    if spec.headline:
        # what the gated numbers depend on in the code (the gate compares it, not the version)
        recorded["behaviour"] = spec.behaviour(task_args)
        recorded["subset"] = getattr(p, "subset", None)
    value_keys = sorted({k for v in spec.probe.values(None) for k in v}) if spec.probe else []
    conditions = any((s.metadata or {}).get("condition") for s in samples)
    task = Task(
        dataset=MemoryDataset(list(samples), name=dataset or spec.task, location=location),
        solver=generate_or_record_error() if solver is None else solver,
        scorer=[study_scorer, *scorers] if scorers else study_scorer,
        metrics=metrics,
        config=config,
        epochs=Epochs(getattr(p, "epochs", 1), reducer or majority_label()),
        version=spec.version,
        # the viewer's score column: the study's headline first
        headline_metric=spec.scorer_name if spec.headline else None,
        metadata=recorded,
        viewer=viewer_of(spec, spec.scorer_name, value_keys, conditions),
    )
    return sharded(spec.task, task, getattr(p, "shard", None), key=spec.item,
                   item=spec.item_name)
