"""Shards of one run by task parameter: ``-T shard=i/N`` runs part ``i`` of ``N`` of a task.

Any launcher runs one shard per process, node or job (``med-evals run --processes N``, a Slurm
array, a Kubernetes Indexed Job: docs/scale.md), and ``med-evals report``, ``baseline``,
``regress`` and ``diff`` read the shards' logs back as one run
(:func:`med_evals.logs.runs.merge_shards`). The parameter is checked by
:class:`med_evals.study.params.ShardOf` (``-T shard=3/2``: one line).

**The partition** (:func:`shard_items`): after every other selection (subset, conditions,
``published_after``, ...), the run's items are numbered in the task's order, and item ``k``
(0-based) goes to shard ``k mod N + 1`` (round-robin by position). An item is what must stay
together: a trial with all its conditions in the oncology study (its flip rates pair a trial's
conditions, so a trial is never split between shards), a question with all its conditions in
MedEvidence, one sample elsewhere. Round-robin rather than a hash of the id: the shards' sizes
differ by at most one item even for a small subset; and the shards of one run share every
selection argument (they are part of the key that merges them), so each shard numbers the same
items the same way.

Each shard's log records, in the task's metadata ``shard`` (:func:`shard_record`), which shard
it is and how many samples the shard and the whole partition hold, so a reader tells from one
log whether the shards it was given cover the run (:func:`med_evals.logs.runs.coverage`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from inspect_ai import Task, task_with
from inspect_ai.dataset import MemoryDataset, Sample

from med_evals.study.params import ParamError, Shard

#: the task parameter's name (a selection argument:
# :data:`med_evals.logs.comparable.SELECTION_ARGS`)
SHARD_ARG = "shard"
#: the partition rule, as each shard's log records it
RULE = "round-robin by position after every other selection: item k (0-based) -> shard k mod N + 1"

T = TypeVar("T")


def shard_items(items: Sequence[T], shard: Shard, key: Callable[[T], Hashable]) -> list[T]:
    """The items of ``shard``: items with the same ``key`` are one item of the partition,
    numbered in order of first appearance; item ``k`` goes to shard ``k mod N + 1``."""
    number: dict[Hashable, int] = {}
    out = []
    for it in items:
        k = number.setdefault(key(it), len(number))
        if k % shard.count == shard.index - 1:
            out.append(it)
    return out


def shard_record(shard: Shard, samples: int, total: int, items: int, all_items: int,
                 item: str) -> dict[str, Any]:
    """What a shard's log records (its task metadata ``shard``): the shard, its samples and
    the whole partition's (``partition_samples``), its items and the partition's, what an item
    is, and the rule."""
    return {"shard": str(shard), "index": shard.index, "count": shard.count,
            "samples": samples, "partition_samples": total, "items": items,
            "partition_items": all_items, "item": item, "rule": RULE}


def _sample_id(sample: Sample) -> Hashable:
    return str(sample.id)


def sharded(task_name: str, task: Task, shard: Shard | None,
            key: Callable[[Sample], Hashable] = _sample_id, item: str = "sample") -> Task:
    """``task`` with only the samples of ``shard`` (all of them for ``None``) and the shard
    recorded in its metadata (:func:`shard_record`). ``key``: the item a sample belongs to
    (default: the sample itself), called ``item`` in the record and in messages. A shard that
    would hold no sample (more shards than items) is a
    :class:`~med_evals.study.params.ParamError`."""
    if shard is None:
        return task
    samples = list(task.dataset)
    kept = shard_items(samples, shard, key)
    items = len({key(s) for s in samples})
    if not kept:
        raise ParamError(
            f"{task_name}: -T {SHARD_ARG}={shard}: the run has {items} {item}(s) after its other "
            f"selections, so at most {items} shard(s); shard {shard.index} would be empty"
        )
    dataset = MemoryDataset(kept, name=task.dataset.name, location=task.dataset.location)
    record = shard_record(shard, len(kept), len(samples), len({key(s) for s in kept}), items,
                          item)
    return task_with(task, dataset=dataset,
                     metadata={**(task.metadata or {}), SHARD_ARG: record})
