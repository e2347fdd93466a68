"""MedREQAL's sources for the task: the pinned GitHub CSV (default) or the Hugging Face copy, and
the ``published_after`` filter on a built file's ``publication_date``.

The Hugging Face copy (``hf:`` in ``datasets/medreqal.yaml``: repository, pinned revision, split)
is loaded with ``datasets`` and exported once to a CSV in the cache, which the task then reads
with the same checks as the GitHub file (its ``verdicts`` column reads as ``verdict``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

from med_evals.data.datasets import DatasetError, cache_dir, load_manifest, resolve_file, sha256_of
from med_evals.data.dates import check_iso
from med_evals.study.params import ParamError

SOURCES = ("github", "hf")
DATE_COLUMN = "publication_date"


def hf_copy(dataset: str) -> tuple[Path, dict[str, Any]]:
    """(CSV path, provenance) of the dataset's Hugging Face copy at the manifest's revision."""
    manifest = load_manifest(dataset)
    spec = manifest.extra.get("hf")
    if not isinstance(spec, dict) or not spec.get("repo") or not spec.get("revision"):
        raise DatasetError(f"manifest '{dataset}' has no hf: block with repo and revision")
    repo, revision, split = str(spec["repo"]), str(spec["revision"]), spec.get("split", "train")
    out = cache_dir() / manifest.name / f"hf-{revision}" / f"{manifest.name}-{split}.csv"
    if not out.is_file():
        try:  # Hugging Face's datasets package: optional (med_evals[hf])
            import datasets
        except ImportError as ex:
            raise DatasetError(
                "source=hf needs the 'datasets' package: pip install 'med_evals[hf]'"
            ) from ex
        try:
            ds = datasets.load_dataset(
                repo, revision=revision, split=split, cache_dir=str(cache_dir() / "hf")
            )
        except Exception as ex:  # network, missing revision, missing split: one clear message
            raise DatasetError(
                f"could not load the Hugging Face dataset {repo} at revision {revision} "
                f"(split {split}): {ex}"
            ) from ex
        out.parent.mkdir(parents=True, exist_ok=True)
        frame = ds.to_pandas()
        assert isinstance(frame, pd.DataFrame)
        tmp = out.with_suffix(".part")
        frame.to_csv(tmp, index=False)
        tmp.replace(out)
    return out, {
        "dataset": dataset,
        "origin": "huggingface",
        "repository": repo,
        "revision": revision,
        "split": split,
        "file": out.name,
        "path": str(out),
        "sha256": sha256_of(out),
    }


def medreqal_file(
    source: str, dataset: str, file: str, data_dir: str | None, data_file: str | None
) -> tuple[Path, dict[str, Any]]:
    """The task's input: ``github`` (the pinned CSV, a data directory or ``data_file``) or
    ``hf`` (the Hugging Face copy)."""
    if source not in SOURCES:
        raise ParamError(f"-T source= must be one of {', '.join(SOURCES)}, not {source!r}")
    if source == "hf":
        if data_file or data_dir:
            raise ParamError(
                "-T source=hf loads the Hugging Face copy: leave out -T data_file and -T data_dir"
            )
        return hf_copy(dataset)
    return resolve_file(dataset, file, data_dir, data_file)


def published_after_rows(df: pd.DataFrame, published_after: str, path: Path) -> pd.DataFrame:
    """Rows whose ``publication_date`` is after the ISO date (rows without one are left out)."""
    cutoff = check_iso(published_after, "published_after")
    if DATE_COLUMN not in df.columns:
        raise DatasetError(
            f"{path}: published_after needs a '{DATE_COLUMN}' column (files written by "
            "`med-evals build medreqal` have one; the published MedREQAL files do not)"
        )
    dates = df[DATE_COLUMN].fillna("").astype(str).str.strip()
    return df[(dates != "") & (dates > cutoff)].reset_index(drop=True)
