"""``med-evals subset make``: draw a named, versioned, stratified subset of a task's data and
store its ids (:mod:`med_evals.data.subsets`), in the user's subsets folder or in ``--out``."""

from __future__ import annotations

from pathlib import Path

from med_evals.outputs.exit_codes import CommandError


def subset_make_command(task: str, name: str, size: int, out: str | None = None, seed: int = 0,
                        version: int = 1, data_dir: str | None = None) -> int:
    """Write the subset; a stored subset's name, a ``size`` below 1 or above the data's items,
    a task without data to draw from, or a folder that cannot be written: :class:`CommandError`
    (exit 2)."""
    from med_evals.data.subsets import (
        draw_stratified,
        stored_subset_dir,
        subset_file,
        user_subset_dir,
        write_subset,
    )
    from med_evals.outputs.files import check_folder
    from med_evals.tasks import spec

    folder = Path(out) if out else user_subset_dir()
    check_folder(folder, "--out")
    stored = subset_file(task, name, stored_subset_dir())
    if stored.is_file() and folder.resolve() != stored.parent.resolve():
        raise CommandError(
            f"{task} subset '{name}' is a stored subset shipped with med_evals "
            f"({stored}); name yours otherwise (a task reads a user's subset before a stored "
            "one)"
        )
    if size < 1:
        raise CommandError(f"--size {size}: at least 1 item")
    source = spec(task).subset_source
    if source is None:
        raise CommandError(f"{task} has no data to draw a subset from")
    revision, strata, key_text = source(data_dir)
    if size > len(strata):
        raise CommandError(
            f"--size {size}: the {task} data (revision {revision}) holds "
            f"{len(strata)} items; a subset is at most all of them"
        )
    ids = draw_stratified(strata, size, seed=seed)
    path = write_subset(
        task, name, revision, ids, key_text, ["gold label"], seed, version, directory=folder,
    )
    counts: dict[str, int] = {}
    for i in ids:
        counts[str(strata[i])] = counts.get(str(strata[i]), 0) + 1
    print(f"wrote {path}: {len(ids)} items; per stratum: {counts}")
    if folder.resolve() != user_subset_dir().resolve():
        print(f"a task reads it with MED_EVALS_SUBSET_DIR={folder} and -T subset={name}")
    return 0
