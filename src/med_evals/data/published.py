"""The papers' published tables that ``med-evals report`` prints beside ours.

Each table a study names (:attr:`Study.reference_tables`) is described in the package's
``med_evals/data/published_tables/published.yaml``. A table whose licence allows it ships in that
folder
(MedREQAL's Tables 2 and 3, CC BY 4.0) and is always available, from a wheel as from a checkout.
A table without a licence (the oncology study's Table 1) is never shipped: it has a manifest
(``med_evals/data/manifests/<name>.yaml``: source repository, pinned commit, checksums) and is read
from a local folder (``--reference DIR``, else ``$MED_EVALS_REFERENCE_DIR``, else the
``../shared/reference`` folder beside a source checkout), or else downloaded from its pinned
commit into the user cache (:func:`med_evals.data.datasets.fetch`), verified either way. When it
cannot
be had, the report says so and how to provide it: never silently nothing.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from med_evals.data.datasets import (
    DatasetError,
    Manifest,
    cache_dir,
    fetch,
    load_manifest,
    manifest_dir,
    packaged_manifest_dir,
    read_csv_checked,
)

REFERENCE_ENV = "MED_EVALS_REFERENCE_DIR"
#: the package's folder of published tables (and ``published.yaml``), shipped in the wheel
PACKAGE_DATA = "published_tables"
#: seconds to wait for the download of a table that is not shipped
DOWNLOAD_TIMEOUT = 15.0


@dataclass(frozen=True)
class Published:
    """A published table, or why it is not available (``note``), and where it came from."""

    name: str
    table: pd.DataFrame | None
    origin: str = ""
    note: str = ""


def packaged_dir() -> Path:
    return Path(str(importlib.resources.files("med_evals.data") / PACKAGE_DATA))


@functools.cache
def catalogue() -> dict[str, dict[str, Any]]:
    """``published.yaml``: every published table the report knows, by file name."""
    raw = yaml.safe_load((packaged_dir() / "published.yaml").read_text(encoding="utf-8"))
    return dict(raw["tables"])


def checkout_reference_dir() -> Path | None:
    """``../shared/reference`` beside a source checkout (not beside an installed package)."""
    src = Path(__file__).resolve().parents[2]
    if src.name != "src" or not (src.parent / "pyproject.toml").is_file():
        return None
    folder = src.parent.parent / "shared" / "reference"
    return folder if folder.is_dir() else None


def reference_dir(explicit: str | Path | None) -> Path | None:
    """The local folder of published tables that are not shipped: ``explicit`` (``--reference``),
    else ``$MED_EVALS_REFERENCE_DIR``, else ``../shared/reference`` beside a source checkout;
    None: download them."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(REFERENCE_ENV)
    if env:
        return Path(env).expanduser()
    return checkout_reference_dir()


def load(name: str, reference: str | Path | None = None) -> Published:
    """The published table ``name`` (a file name in ``published.yaml``)."""
    entry = catalogue().get(name)
    if entry is None:
        return Published(name, None, note=f"no published table '{name}' is known to med_evals")
    if "manifest" not in entry:
        path = packaged_dir() / name
        return Published(name, read_csv_checked(path, []), f"shipped ({entry['source']})")
    return _fetched(name, entry["manifest"], reference)


def _fetched(name: str, manifest_name: str, reference: str | Path | None) -> Published:
    folder = reference_dir(reference)
    if reference:
        where = f"{folder} (--reference)"
    elif os.environ.get(REFERENCE_ENV):
        where = f"{folder} (${REFERENCE_ENV})"
    else:
        where = f"{folder} (beside the checkout)"
    try:
        manifest = _manifest(manifest_name)
    except DatasetError as ex:
        return Published(name, None, note=f"the published table {name} is not available: {ex}")
    try:
        got = fetch(
            manifest_name,
            name,
            folder,
            data_dir_env=False,
            timeout=DOWNLOAD_TIMEOUT,
            manifest=manifest,
        )
        table = read_csv_checked(got.path, [])
    except DatasetError as ex:
        if folder is None:
            why = f"it could not be downloaded ({ex.__cause__ or ex})"
        elif not any((d / name).is_file() for d in (folder, folder / manifest.local_dir)):
            why = f"there is no {name} in {where}"
        else:
            why = f"the copy in {where} is not the pinned one ({ex})"
        return Published(name, None, note=_how_to_provide(name, manifest, why))
    origin = "read from" if got.origin == "local" else "downloaded from its pinned source to"
    return Published(name, table, f"{origin} {got.path}")


def _manifest(name: str) -> Manifest:
    """The table's manifest: from ``$MED_EVALS_MANIFEST_DIR`` where it has one, else the
    package's (a folder of test datasets' manifests does not hide it)."""
    if (manifest_dir() / f"{name}.yaml").is_file():
        return load_manifest(name)
    return load_manifest(name, packaged_manifest_dir())


def _how_to_provide(name: str, m: Manifest, why: str) -> str:
    src = m.source
    file = m.files[name]
    what = catalogue()[name]["what"].split(" (")[0]
    return (
        f"{what} is not shown beside ours: it is not shipped with med_evals (it has no licence), "
        f"and {why}. To show it, save "
        f"{src.get('repository')}/blob/{m.revision}/{src.get('path')} (sha256 {file.sha256}) "
        f"as {name} in a folder and pass --reference DIR (or set {REFERENCE_ENV}), or allow "
        f"its download from {file.url} (cached in {cache_dir() / m.name})."
    )
