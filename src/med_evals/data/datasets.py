"""One dataset layer for every study.

Each dataset is described by a manifest, ``<name>.yaml`` in the package's data folder
``med_evals/data/manifests/`` (read with :mod:`importlib.resources`, so a wheel and an editable
install find them the same way): where its files live at a pinned revision, their checksums,
licence and citation. :func:`fetch` returns a verified local
path for one file of a dataset, either

- from a local data directory (task parameter ``data_dir`` or the ``MED_EVALS_DATA_DIR``
  environment variable), looked up as ``<data_dir>/<manifest.local_dir>/<file>`` and then
  ``<data_dir>/<file>``, or
- from the user cache (``MED_EVALS_CACHE_DIR``, default: the platform cache directory), after
  downloading it from the pinned source.

Every file is verified against the manifest's ``sha256`` and/or ``git_blob_sha1`` (git's blob id,
which pins a file at a commit without having the file). A mismatch is an error, never a warning.

:func:`read_csv_checked` reads a CSV and checks it: a malformed file (an unbalanced quote, a
record with more or fewer fields than the header) is an error naming the line where the problem
starts; missing columns, empty required values and unknown label values are errors that name the
file, the data row and the column.

Every problem with a data file is a :class:`DatasetError`: a ``ValueError`` that ``inspect eval``
prints as one message, without a traceback (see :mod:`med_evals.inspect_internals.compat`).
"""

from __future__ import annotations

import csv
import hashlib
import http.client
import importlib.resources
import io
import os
import shutil
import tempfile
import urllib.request
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from med_evals.inspect_internals.compat import InputError

DATA_DIR_ENV = "MED_EVALS_DATA_DIR"
CACHE_DIR_ENV = "MED_EVALS_CACHE_DIR"
MANIFEST_DIR_ENV = "MED_EVALS_MANIFEST_DIR"

#: The package's data folder of manifests (and ``subsets/``), shipped in the wheel.
PACKAGE_DATA = "manifests"


class DatasetError(InputError):
    """A dataset file is missing, corrupt or does not have the expected content."""


@dataclass(frozen=True)
class FileSpec:
    name: str
    url: str | None = None
    sha256: str | None = None
    git_blob_sha1: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class Manifest:
    name: str
    local_dir: str
    revision: str
    source: dict[str, Any]
    license: str
    citation: str
    files: dict[str, FileSpec]
    extra: dict[str, Any] = field(default_factory=dict)

    def file(self, name: str) -> FileSpec:
        try:
            return self.files[name]
        except KeyError:
            raise DatasetError(
                f"dataset '{self.name}' has no file '{name}' in its manifest "
                f"(known: {', '.join(sorted(self.files))})"
            ) from None


@dataclass(frozen=True)
class DatasetFile:
    """A verified local copy of one dataset file, with what pins it."""

    path: Path
    manifest: Manifest
    spec: FileSpec
    origin: str  # "local" or "cache"

    def provenance(self) -> dict[str, Any]:
        """What to record in a log so the run can be traced back to its data."""
        return {
            "dataset": self.manifest.name,
            "revision": self.manifest.revision,
            "file": self.spec.name,
            "sha256": self.spec.sha256,
            "git_blob_sha1": self.spec.git_blob_sha1,
            "origin": self.origin,
            "path": str(self.path),
        }


def packaged_manifest_dir() -> Path:
    """``med_evals/manifests`` of the installed package (wheel or editable install)."""
    folder = importlib.resources.files("med_evals.data") / PACKAGE_DATA
    if not isinstance(folder, Path) or not folder.is_dir():
        raise DatasetError(
            f"no dataset manifests in the installed package ({folder}): the installation is "
            "incomplete; reinstall med_evals"
        )
    return folder


def manifest_dir() -> Path:
    """The manifests' folder: ``$MED_EVALS_MANIFEST_DIR`` if set, else the package's own."""
    override = os.environ.get(MANIFEST_DIR_ENV)
    if override:
        return Path(override)
    return packaged_manifest_dir()


def load_manifest(name: str, folder: Path | None = None) -> Manifest:
    """The manifest ``<name>.yaml`` in ``folder`` (default :func:`manifest_dir`)."""
    path = (folder or manifest_dir()) / f"{name}.yaml"
    if not path.is_file():
        raise DatasetError(f"no manifest for dataset '{name}' at {path}")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = [k for k in ("name", "revision", "source", "license", "files") if k not in raw]
    if missing:
        raise DatasetError(f"manifest {path} lacks {', '.join(missing)}")
    files = {
        fname: FileSpec(
            name=fname,
            url=spec.get("url"),
            sha256=spec.get("sha256"),
            git_blob_sha1=spec.get("git_blob_sha1"),
            size=spec.get("size"),
        )
        for fname, spec in raw["files"].items()
    }
    for spec in files.values():
        if not (spec.sha256 or spec.git_blob_sha1):
            raise DatasetError(f"manifest {path}: file '{spec.name}' has no checksum")
    check_expected_labels(path, raw.get("expected_labels"))
    known = {"name", "local_dir", "revision", "source", "license", "citation", "files"}
    return Manifest(
        name=raw["name"],
        local_dir=raw.get("local_dir", raw["name"]),
        revision=str(raw["revision"]),
        source=raw["source"],
        license=raw["license"],
        citation=raw.get("citation", ""),
        files=files,
        extra={k: v for k, v in raw.items() if k not in known},
    )


def check_expected_labels(path: Path, labels: Any) -> None:
    """A manifest's published label counts are ``label: count`` with text labels and whole
    counts. YAML 1.1 reads ``yes``, ``no``, ``on``, ``off``, ``true`` and ``false`` as booleans
    (``{yes: 4, no: 3}`` would silently be ``{True: 4, False: 3}``): a key that is not text is
    a :class:`DatasetError` saying to quote it."""
    if labels is None:
        return
    if not isinstance(labels, dict):
        raise DatasetError(f"manifest {path}: expected_labels must be label: count pairs")
    for label, count in labels.items():
        if not isinstance(label, str):
            raise DatasetError(
                f"manifest {path}: expected_labels key {label!r} is a YAML "
                f"{type(label).__name__}, not a label: quote it ('yes': ..., 'no': ...: YAML "
                "reads yes, no, on, off, true and false unquoted as booleans)")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise DatasetError(f"manifest {path}: expected_labels {label!r}: {count!r} is not a "
                               "count (a whole number, 0 or more)")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_blob_sha1_of(path: Path) -> str:
    """git's blob id: SHA-1 of ``blob <size>\\0`` followed by the bytes."""
    size = path.stat().st_size
    h = hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, spec: FileSpec) -> None:
    """Raise :class:`DatasetError` unless ``path`` matches every checksum in ``spec``."""
    if spec.sha256:
        actual = sha256_of(path)
        if actual != spec.sha256:
            raise DatasetError(
                f"checksum mismatch for {path}: sha256 is {actual}, the manifest pins "
                f"{spec.sha256}. The file is corrupt or from another revision."
            )
    if spec.git_blob_sha1:
        actual = git_blob_sha1_of(path)
        if actual != spec.git_blob_sha1:
            raise DatasetError(
                f"checksum mismatch for {path}: git blob id is {actual}, the manifest pins "
                f"{spec.git_blob_sha1}. The file is corrupt or from another revision."
            )


def cache_dir() -> Path:
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("med_evals"))


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    """The local data directory: the parameter, else ``$MED_EVALS_DATA_DIR``, else None."""
    if data_dir:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else None


def _download(url: str, dest: Path, timeout: float = 60.0) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            shutil.copyfileobj(resp, out)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def where_to_put(manifest: Manifest, file: str, file_param: str | None = None) -> str:
    """What a user can do when a dataset file is not available: every way to provide it."""
    own = f", or read your own copy as is with -T {file_param}=<file>" if file_param else ""
    return (
        f"put '{file}' in <dir>/{manifest.local_dir}/ and set {DATA_DIR_ENV}=<dir> or pass "
        f"-T data_dir=<dir>{own}"
    )


def fetch(
    dataset: str,
    file: str,
    data_dir: str | Path | None = None,
    file_param: str | None = None,
    *,
    data_dir_env: bool = True,
    timeout: float = 60.0,
    manifest: Manifest | None = None,
) -> DatasetFile:
    """A verified local path for ``file`` of ``dataset``.

    Args:
        dataset: Manifest name (``med_evals/data/manifests/<dataset>.yaml``).
        file: File name as listed in the manifest.
        data_dir: Local data directory; defaults to ``$MED_EVALS_DATA_DIR``. When given, the file
            must be there: nothing is downloaded.
        file_param: The calling task's parameter for a user's own copy (``data_file``), named in
            the error when the file cannot be found.
        data_dir_env: False: ``$MED_EVALS_DATA_DIR`` is not consulted (a file that does not
            belong in a data directory, such as a paper's published table).
        timeout: Seconds to wait for the download's server.
        manifest: The manifest itself (default: ``load_manifest(dataset)``).
    """
    manifest = manifest or load_manifest(dataset)
    spec = manifest.file(file)
    if data_dir_env:
        local = resolve_data_dir(data_dir)
    else:
        local = Path(data_dir).expanduser() if data_dir else None
    if local is not None:
        candidates = [local / manifest.local_dir / file, local / file]
        for path in candidates:
            if path.is_file():
                verify(path, spec)
                return DatasetFile(path=path, manifest=manifest, spec=spec, origin="local")
        source = "-T data_dir" if data_dir else DATA_DIR_ENV
        looked = (
            f"looked for {', '.join(str(c) for c in candidates)}"
            if local.is_dir()
            else ("it is not a directory" if local.exists() else "it does not exist")
        )
        raise DatasetError(
            f"missing file: dataset '{dataset}' file '{file}' is not in the data directory "
            f"{local} (from {source}; {looked}); {where_to_put(manifest, file, file_param)}"
        )

    cached = cache_dir() / manifest.name / manifest.revision / file
    if not cached.is_file():
        if not spec.url:
            raise DatasetError(
                f"dataset '{dataset}' file '{file}' has no download URL; "
                f"{where_to_put(manifest, file, file_param)}"
            )
        try:
            _download(spec.url, cached, timeout)
        except (OSError, http.client.HTTPException) as ex:
            raise DatasetError(
                f"could not download {spec.url} for dataset '{dataset}' ({ex}). Without network "
                f"access {where_to_put(manifest, file, file_param)}"
            ) from ex
    try:
        verify(cached, spec)
    except DatasetError:
        cached.unlink(missing_ok=True)  # never keep a bad download around
        raise
    return DatasetFile(path=cached, manifest=manifest, spec=spec, origin="cache")


def resolve_file(
    dataset: str,
    file: str,
    data_dir: str | Path | None = None,
    data_file: str | Path | None = None,
    file_param: str = "data_file",
) -> tuple[Path, dict[str, Any]]:
    """(path, provenance) of a dataset file: a user's own file as is, else :func:`fetch`.

    A ``data_file`` (e.g. a builder's output or another export of the dataset) is read without
    checking it against the manifest; its sha256 and git blob id are recorded instead.
    ``file_param`` is the task's name for that parameter, used in error messages.
    """
    if data_file:
        path = Path(data_file).expanduser()
        if path.is_dir():
            raise DatasetError(f"{file_param} {path} is a directory, not a file")
        if not path.is_file():
            raise DatasetError(f"{file_param} {path} does not exist")
        return path, {
            "dataset": dataset,
            "file": path.name,
            "path": str(path),
            "origin": "user file (not pinned)",
            "sha256": sha256_of(path),
            "git_blob_sha1": git_blob_sha1_of(path),
        }
    got = fetch(dataset, file, data_dir, file_param)
    return got.path, got.provenance()


def row_error(path: Path, rows: Sequence[int], column: str, problem: str) -> DatasetError:
    """An error naming the first bad row (numbered from 1), its column and how many rows in all.

    ``problem`` describes the first row's value.
    """
    more = f" ({len(rows)} rows in all)" if len(rows) > 1 else ""
    return DatasetError(f"{path}: row {rows[0] + 1}, column '{column}': {problem}{more}")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _scan_record(text: str, pos: int) -> tuple[str, int, int]:
    """Walk the CSV record that starts at ``pos`` by the format's rules (a quote opens a field
    only at its start, ``""`` inside a quoted field is a quote, a closing quote is followed by a
    comma or a line end).

    Returns ``("unclosed", open, -1)`` for a quote never closed, ``("junk", open, close)`` for a
    quoted field followed by something else, else ``("end", open, end)`` with ``open`` the
    opening quote of the first quoted field that spans lines (-1: none).
    """
    n, field_start, spanning = len(text), True, -1
    i = pos
    while i < n:
        c = text[i]
        if field_start and c == '"':
            open_at, j = i, i + 1
            while True:
                k = text.find('"', j)
                if k < 0:
                    return "unclosed", open_at, -1
                if text.startswith('""', k):
                    j = k + 2
                    continue
                break
            if spanning < 0 and text.find("\n", open_at, k) >= 0:
                spanning = open_at
            if text[k + 1 : k + 2] not in ("", ",", "\n", "\r"):
                return "junk", open_at, k
            i, field_start = k + 1, False
        elif c == ",":
            i, field_start = i + 1, True
        elif c in "\r\n":
            return "end", spanning, i
        else:
            i, field_start = i + 1, False
    return "end", spanning, n


def _offset_of_line(text: str, line: int) -> int:
    pos = 0
    for _ in range(line - 1):
        pos = text.index("\n", pos) + 1
    return pos


def _quote_problem(text: str, line: int) -> str:
    """What is wrong with the quotes of the record starting on ``line``, in words."""
    kind, open_at, close_at = _scan_record(text, _offset_of_line(text, line))
    if kind == "unclosed":
        first, last = _line_of(text, open_at), _line_of(text, len(text.rstrip("\r\n")))
        return (
            f"line {first}: a quote opens a field there and is never closed, so the field "
            f"swallows the rest of the file (lines {first}-{last}); an unbalanced quote on "
            f"line {first}"
        )
    if kind == "junk":
        first, where = _line_of(text, open_at), _line_of(text, close_at)
        span = f" on line {where}" if where != first else ""
        after = text[close_at + 1 : close_at + 2]
        return (
            f"line {first}: the quoted field that opens there closes{span} and is followed by "
            f"{after!r}, not a comma or a line end; an unbalanced quote on line {first}, or a "
            "quote inside the field that is not doubled"
        )
    return f"line {line}: not valid CSV"


def check_csv_structure(path: Path, text: str) -> None:
    """Raise :class:`DatasetError` unless ``text`` is well-formed CSV (Python's ``csv`` module
    in strict mode) whose records all have the header's number of fields. Quoted fields that
    span lines are legitimate (HealthFC has them); a quote that swallows the rest of the file,
    or several records, is named with the line where it opens."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start, width = 1, 0
    try:
        for row in reader:
            if not row:  # a blank line: skipped, as pandas skips it
                start = reader.line_num + 1
                continue
            if not width:
                width = len(row)
            elif len(row) != width:
                kind, spanning, _ = _scan_record(text, _offset_of_line(text, start))
                hint = ""
                if spanning >= 0:
                    first, last = _line_of(text, spanning), reader.line_num
                    hint = (
                        f"; a quoted field opens on line {first} and runs to line {last}: an "
                        f"unbalanced quote on line {first}?"
                    )
                raise DatasetError(
                    f"{path}: malformed CSV: the record on line {start} has {len(row)} fields, "
                    f"the header has {width}{hint}"
                )
            start = reader.line_num + 1
    except csv.Error:
        raise DatasetError(f"{path}: malformed CSV: {_quote_problem(text, start)}") from None


def indexed_records(df: pd.DataFrame) -> Iterable[tuple[Any, dict[str, Any]]]:
    """Each row of ``df`` as (index label, plain dict): what ``df.iterrows()`` gives without
    building a Series per row (40% of building ``oncology_rct``)."""
    return zip(df.index, df.to_dict("records"), strict=True)


def read_csv_checked(
    path: Path,
    required: Iterable[str],
    *,
    labels: Mapping[str, Iterable[str]] | None = None,
    non_empty: Iterable[str] = (),
    aliases: Mapping[str, Iterable[str]] | None = None,
    header_only_ok: bool = False,
) -> pd.DataFrame:
    """Read a CSV as strings and check it, or raise :class:`DatasetError`.

    Args:
        path: The CSV file.
        required: Columns that must be present.
        labels: For label columns, the allowed values; any other value is an error.
        non_empty: Columns whose values must not be empty.
        aliases: Alternative names for a column (``{"verdict": ["verdicts"]}``): the first one
            found is renamed to the canonical name.
        header_only_ok: A header without data rows is an empty table, not an error.

    Rows are numbered from 1 for the first data row (the header is not a row).
    """
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as ex:
        raise DatasetError(f"{path}: not UTF-8 text (byte {ex.start}: {ex.reason})") from ex
    except OSError as ex:
        raise DatasetError(f"{path}: cannot read ({ex})") from ex
    if not text.strip():
        raise DatasetError(f"{path}: malformed CSV: the file is empty (no header, no rows)")
    check_csv_structure(path, text)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as ex:
        raise DatasetError(f"{path}: malformed CSV ({ex})") from ex

    for canonical, alts in (aliases or {}).items():
        if canonical not in df.columns:
            for alt in alts:
                if alt in df.columns:
                    df = df.rename(columns={alt: canonical})
                    break

    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DatasetError(
            f"{path}: missing column(s) {', '.join(repr(c) for c in missing)} "
            f"(found: {', '.join(map(repr, df.columns))})"
        )
    if df.empty and not header_only_ok:
        raise DatasetError(f"{path}: no data rows (the file holds a header only)")

    for col in non_empty:
        empty = df.index[df[col].str.strip() == ""]
        if len(empty):
            raise row_error(path, empty, col, "empty value")
    for col, allowed in (labels or {}).items():
        allowed = set(allowed)
        bad = df.index[~df[col].isin(allowed)]
        if len(bad):
            raise row_error(
                path,
                bad,
                col,
                f"unknown label {df[col][bad[0]]!r} (allowed: {', '.join(sorted(allowed))})",
            )
    return df


# --- the published counts ---------------------------------------------------------------


def check_counts(
    path: Path, labels: Sequence[str], dataset: str, warn: bool = True
) -> str | None:
    """Compare row and label counts with the published ones in the dataset's manifest
    (``expected_rows``, ``expected_labels``: the one place the counts are written); a count
    the manifest does not state is not checked.

    Returns None when they match, else a message naming every difference (with ``warn``, also
    issued as a warning, so it shows in the console and the log).
    """
    rows, by_label = expected_counts(dataset)
    counts = Counter(labels)
    problems = []
    if rows is not None and len(labels) != rows:
        problems.append(f"{len(labels)} rows, not {rows}")
    for label, n in by_label.items():
        if counts.get(label, 0) != n:
            problems.append(f"{counts.get(label, 0)} {label}, not {n}")
    if not problems:
        return None
    message = (
        f"{path}: counts differ from the published dataset: {'; '.join(problems)}. "
        "Results are not comparable with the paper's."
    )
    if warn:
        warnings.warn(message, stacklevel=2)
    return message


def expected_counts(dataset: str) -> tuple[int | None, dict[str, int]]:
    """The published row count and label counts of ``dataset``: its packaged manifest's (the
    published facts, whichever data a run reads: a local copy, a ``data_file``, or a manifest
    folder of ``$MED_EVALS_MANIFEST_DIR``); a dataset the package has no manifest of (a study of
    your own, a test's) has them in its manifest where the loader finds it. None and none where
    it states none."""
    packaged = packaged_manifest_dir()
    folder = packaged if (packaged / f"{dataset}.yaml").is_file() else None
    extra = load_manifest(dataset, folder).extra
    rows = extra.get("expected_rows")
    labels = {str(k): int(v) for k, v in (extra.get("expected_labels") or {}).items()}
    return (None if rows is None else int(rows)), labels


def count_summary(dataset: str) -> str:
    """The published counts in words, for the log when a file matches them."""
    rows, by_label = expected_counts(dataset)
    if rows is None and not by_label:
        return f"no published counts in the manifest of {dataset}: not checked"
    parts = [f"{rows:,} rows"] if rows is not None else []
    if by_label:
        parts.append("/".join(f"{n:,}" for n in by_label.values()))
    return f"matches the published dataset ({'; '.join(parts)})"
