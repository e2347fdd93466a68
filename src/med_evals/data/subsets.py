"""Named, versioned, stratified subsets whose ids are stored in the package's data folder
``med_evals/data/manifests/subsets/`` (``src/med_evals/data/manifests/subsets/`` in the source tree;
read
through :func:`med_evals.data.datasets.manifest_dir`, so a wheel finds them as an editable install
does).

A subset file pins the item ids of one task's dataset (trial row indices, question ids, ...),
the dataset revision they were drawn from, and a short hash of each item's identifying text, so
a subset never drifts: if the data under an id changes, loading the subset fails instead of
silently testing something else. Subsets are drawn once with :func:`draw_stratified` (largest-
remainder allocation across strata, seeded) by ``med-evals subset make``.

Where subsets live: the stored ones (``smoke``, ``ci``, ...) ship with the package and are never
written by a user's command; a user's own subsets are written to, and read from, the folder
:func:`user_subset_dir` names (``$MED_EVALS_SUBSET_DIR``, else ``subsets`` in the platform's
user data folder, e.g. ``~/.local/share/med_evals/subsets``), or to a folder given with
``--out`` (then read from it by setting ``$MED_EVALS_SUBSET_DIR``). A task's ``-T subset=NAME``
looks in the user folder first, then among the stored subsets; a user subset cannot take a
stored subset's name (maintainers redraw a stored subset with ``--out
src/med_evals/data/manifests/subsets``).
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from med_evals.data.datasets import DatasetError, manifest_dir

SUBSET_DIR_NAME = "subsets"


def key_hash(text: str) -> str:
    """A short, non-reversible fingerprint of an item's identifying text."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Subset:
    task: str
    name: str
    version: int
    revision: str
    ids: list[str]
    hashes: dict[str, str]
    stratified_by: list[str]

    def check(self, item_id: str, key_text: str) -> None:
        want = self.hashes.get(item_id)
        if want is not None and key_hash(key_text) != want:
            raise DatasetError(
                f"subset '{self.name}' (v{self.version}) of {self.task}: item {item_id} no longer "
                f"holds the data it was drawn from (revision {self.revision}); redraw the subset"
            )


#: the folder of a user's own subsets (default: :func:`user_subset_dir`)
SUBSET_DIR_ENV = "MED_EVALS_SUBSET_DIR"


def stored_subset_dir() -> Path:
    """The stored subsets shipped with the package (or ``$MED_EVALS_MANIFEST_DIR``'s)."""
    return manifest_dir() / SUBSET_DIR_NAME


def user_subset_dir() -> Path:
    """Where ``med-evals subset make`` writes a user's subsets and the tasks look first:
    ``$MED_EVALS_SUBSET_DIR``, else ``subsets`` in the platform's user data folder."""
    override = os.environ.get(SUBSET_DIR_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("med_evals", appauthor=False)) / SUBSET_DIR_NAME


def subset_file(task: str, name: str, folder: Path) -> Path:
    return folder / f"{task}-{name}.yaml"


def subset_path(task: str, name: str) -> Path:
    """The file of subset ``name`` of ``task``: the user's, else the stored one (the stored
    one's path when neither exists)."""
    user = subset_file(task, name, user_subset_dir())
    return user if user.is_file() else subset_file(task, name, stored_subset_dir())


def known_subsets(task: str) -> list[str]:
    names: list[str] = []
    for folder in (user_subset_dir(), stored_subset_dir()):
        if folder.is_dir():
            names += [p.stem.removeprefix(f"{task}-") for p in folder.glob(f"{task}-*.yaml")]
    return sorted(set(names))


def load_subset(task: str, name: str) -> Subset:
    path = subset_path(task, name)
    if not path.is_file():
        raise DatasetError(
            f"no subset '{name}' for task {task} (looked in {user_subset_dir()} and "
            f"{stored_subset_dir()}); known: {', '.join(known_subsets(task)) or 'none'}. Draw "
            f"one with: med-evals subset make {task} {name} --size N"
        )
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Subset(
        task=raw["task"],
        name=raw["name"],
        version=int(raw["version"]),
        revision=str(raw["revision"]),
        ids=[str(i) for i in raw["ids"]],
        hashes={str(k): v for k, v in (raw.get("hashes") or {}).items()},
        stratified_by=list(raw.get("stratified_by") or []),
    )


def select(
    items: Mapping[str, Any], subset: Subset, key_text: Mapping[str, str] | None = None
) -> list[str]:
    """The subset's ids, each checked to exist (and to hold the same text) in ``items``."""
    missing = [i for i in subset.ids if i not in items]
    if missing:
        raise DatasetError(
            f"subset '{subset.name}' of {subset.task}: ids {missing[:5]} are not in the dataset"
        )
    for i in subset.ids:
        if key_text is not None:
            subset.check(i, key_text[i])
    return list(subset.ids)


def draw_stratified(strata: Mapping[str, Hashable], n: int, seed: int = 0) -> list[str]:
    """``n`` ids drawn so each stratum keeps its share (largest remainder), seeded."""
    groups: dict[Hashable, list[str]] = defaultdict(list)
    for item, stratum in strata.items():
        groups[stratum].append(item)
    total = len(strata)
    if n >= total:
        return sorted(strata, key=_natural)
    quotas = {s: n * len(g) / total for s, g in groups.items()}
    alloc = {s: int(q) for s, q in quotas.items()}
    for s in sorted(quotas, key=lambda s: (quotas[s] - alloc[s], len(groups[s])), reverse=True):
        if sum(alloc.values()) >= n:
            break
        alloc[s] += 1
    rng = random.Random(seed)
    chosen: list[str] = []
    for s in sorted(groups, key=str):
        members = sorted(groups[s], key=_natural)
        chosen += rng.sample(members, min(alloc[s], len(members)))
    return sorted(chosen, key=_natural)


def _natural(item: str) -> tuple:
    return (0, int(item), "") if str(item).isdigit() else (1, 0, str(item))


def write_subset(
    task: str,
    name: str,
    revision: str,
    ids: Sequence[str],
    key_text: Mapping[str, str],
    stratified_by: Sequence[str],
    seed: int,
    version: int = 1,
    directory: Path | None = None,
) -> Path:
    """Write a subset file into ``directory`` (default :func:`user_subset_dir`), whole or not
    at all (:func:`med_evals.outputs.files.write_text`)."""
    from med_evals.outputs.files import make_folder, write_text

    path = subset_file(task, name, directory or user_subset_dir())
    make_folder(path.parent)
    body = {
        "task": task,
        "name": name,
        "version": version,
        "revision": revision,
        "stratified_by": list(stratified_by),
        "seed": seed,
        "size": len(ids),
        "ids": [int(i) if str(i).isdigit() else str(i) for i in ids],
        "hashes": {str(i): key_hash(key_text[i]) for i in ids},
    }
    header = (
        f"# Subset '{name}' of {task}: {len(ids)} items, stratified by "
        f"{', '.join(stratified_by)}; drawn by `med-evals subset make`. Do not edit by hand:\n"
        "# bump the version and redraw instead, so baselines never compare different items.\n"
    )
    return write_text(path, header + yaml.safe_dump(body, sort_keys=False))
