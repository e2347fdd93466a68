"""Which files a list of log paths names: folders expanded to the Inspect logs inside them.

A log path is anything Inspect's own log functions take (``list_eval_logs``,
``read_eval_log``): a local path, a ``file://`` URI, or a remote one such as
``s3://bucket/logs`` (through fsspec; for S3, s3fs and the usual AWS settings:
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...). Folders are expanded by
:func:`inspect_ai.log.list_eval_logs` (recursively, as Inspect lists a log folder), never by
:mod:`pathlib`, and a log's write time comes from that listing; a location that cannot be
listed (no connection, refused credentials) is a :class:`LogPathError` naming it.

**Reading within bounds** (:func:`read_header`, :func:`read_samples`): a log is read through
Inspect's own functions (``read_eval_log(header_only=True)``, ``read_eval_log_samples_by_id``),
one record at a time where its format allows. An ``.eval`` log is a zip of records (its header,
its reductions, one record per sample and epoch): each record is read only when the zip's
directory says it holds at most :func:`read_limit` bytes, and samples are read
:data:`SAMPLE_CHUNK` at a time and let go, so a reader holds what it keeps of each sample, never
the whole log. A ``.json`` log is one record (Inspect parses it whole): it is read only when the
file holds at most :func:`read_limit` bytes. A record over the limit is a :class:`LogTooLarge`
naming the log, the record and the limit (``MED_EVALS_READ_LIMIT_MB`` sets it), never a silent
drop.

Kept apart from :mod:`med_evals.logs.runs` (which reads runs of the studies) so that a task-side
tool (:mod:`med_evals.commands.export_counterfactuals`) can list logs without importing the studies.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlparse
from urllib.request import url2pathname

from inspect_ai.log import (
    EvalLog,
    EvalLogInfo,
    EvalSample,
    list_eval_logs,
    read_eval_log,
    read_eval_log_samples_by_id,
)


class LogPathError(ValueError):
    """A path given as logs that does not exist, a folder holding no Inspect log, or a location
    that cannot be listed (unreachable, credentials refused)."""


@dataclass(frozen=True)
class LogFile:
    """One log file: its path (local logs as local paths, others as their URI) and its write
    time as Inspect's listing gives it (seconds since the epoch; 0.0 when unknown)."""

    name: str
    mtime: float = 0.0


#: ``<scheme>://``: a URI (a local name with a colon, ``C:\\logs`` or ``run:2``, is a path)
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")


def scheme(path: str | Path) -> str:
    """The URI scheme of a log path (``s3``, ``file``), ``""`` for a local path."""
    found = _URI.match(str(path))
    return found.group(1).lower() if found else ""


def is_remote(path: str | Path) -> bool:
    """Whether ``path`` names a location other than this machine's filesystem (``s3://...``)."""
    return scheme(path) not in ("", "file")


def log_name(path: str | Path) -> str:
    """The file name of a log path or URI (``s3://b/logs/x.eval`` -> ``x.eval``)."""
    text = str(path)
    if scheme(text):
        return posixpath.basename(urlparse(text).path.rstrip("/"))
    return Path(text).name


def log_folder(path: str | Path) -> str:
    """The folder holding a log: a URI's parent URI (``s3://b/logs``), a local log's folder as
    an absolute path where it exists."""
    text = str(path)
    if is_remote(text):
        return text.rstrip("/").rsplit("/", 1)[0]
    parent = Path(_local(text)).parent
    return str(parent.resolve() if parent.exists() else parent)


def list_log_files(paths: Iterable[str | Path], strict: bool = False) -> list[LogFile]:
    """Log files, with folders expanded to the Inspect logs inside them (local logs as local
    paths: Inspect lists them as ``file://`` URIs; remote ones as their URIs; in name order),
    each with its write time from Inspect's listing. A file given by name keeps the name given.

    A location that cannot be listed (an unreachable endpoint, refused credentials) raises
    :class:`LogPathError` naming it. With ``strict``, so does a path that does not exist (for
    S3, also naming a missing bucket) or a folder without any Inspect log; without, such a path
    is passed on as it is (reading it then says why it is no log)."""
    out: list[LogFile] = []
    for p in paths:
        given = str(p)
        infos = _listed(given)
        one = _same_file(infos, given)
        if one is not None:  # a log file, named
            out.append(LogFile(given, _seconds(one)))
            continue
        if infos:  # a folder: its logs by name (Inspect names a log by its creation time first),
            # the same order wherever the folder is (a listing's write times are the store's: 1 s
            # on S3, the download's for a copy)
            out += sorted((LogFile(_local(i.name), _seconds(i)) for i in infos),
                          key=lambda f: f.name)
            continue
        kind = _kind(given)
        if kind == "directory":
            if strict:
                raise LogPathError(f"{given}: no Inspect log (.eval or .json) in this folder")
        elif kind is None and strict:
            raise LogPathError(f"{given}: {_nothing(given)}")
        else:  # a file that is not named as a log, or (not strict) nothing: read, and refused
            out.append(LogFile(given))
    return out


def expand_log_paths(paths: Iterable[str | Path], strict: bool = False) -> list[str]:
    """The names of :func:`list_log_files` (see there)."""
    return [f.name for f in list_log_files(paths, strict)]


def exists(path: str | Path) -> bool:
    """Whether a file or folder (local or remote) exists; :class:`LogPathError` if its
    location cannot be reached."""
    return _kind(str(path)) is not None


def missing(path: str | Path) -> str | None:
    """``"no such file or folder"`` (for S3, naming a bucket that does not exist) when nothing
    is at ``path``; ``None`` when something is, or its location cannot be reached (the error of
    reading it says more)."""
    try:
        there = _kind(str(path)) is not None
    except LogPathError:
        return None
    return None if there else _nothing(str(path))


def mtime(path: str | Path) -> float:
    """A log's write time from Inspect's listing (seconds since the epoch), 0.0 when it is not
    listed (gone, or not named as a log)."""
    try:
        info = _same_file(_listed(str(path)), str(path))
    except LogPathError:
        return 0.0
    return _seconds(info) if info is not None else 0.0


def _listed(path: str) -> list[EvalLogInfo]:
    """Inspect's listing of ``path`` (a folder: its logs, recursively; a log file: itself;
    nothing there: empty); a listing that fails otherwise is a :class:`LogPathError`."""
    try:
        return list_eval_logs(path, recursive=True)
    except Exception as ex:  # noqa: BLE001 - any failure to list is the location's, named
        raise LogPathError(f"{path}: cannot list it ({_one_line(ex)})") from None


def _same_file(infos: list[EvalLogInfo], path: str) -> EvalLogInfo | None:
    """The listing's entry when ``path`` names that one log file itself (not a folder)."""
    if len(infos) != 1:
        return None
    listed = infos[0].name
    if is_remote(path):
        return infos[0] if listed.rstrip("/") == path.rstrip("/") else None
    return infos[0] if os.path.abspath(_local(listed)) == os.path.abspath(_local(path)) else None


def _kind(path: str) -> str | None:
    """``"file"``, ``"directory"`` or ``None`` (nothing there), asked of fsspec (the layer under
    Inspect's file functions); a location that cannot be reached is a :class:`LogPathError`."""
    import fsspec  # type: ignore[import-untyped]

    try:
        fs, root = fsspec.core.url_to_fs(path)
        info = fs.info(root)
    except FileNotFoundError:
        return None
    except Exception as ex:  # noqa: BLE001 - unreachable, refused: named
        raise LogPathError(f"{path}: cannot read it ({_one_line(ex)})") from None
    return "directory" if info.get("type") == "directory" else "file"


def _nothing(path: str) -> str:
    """What is missing at ``path``: the file or folder, and for ``s3://x/...`` the bucket ``x``
    when it does not exist either."""
    bucket = urlparse(path).netloc if scheme(path) == "s3" else ""
    if bucket and path.rstrip("/") != f"s3://{bucket}":
        try:
            if _kind(f"s3://{bucket}") is None:
                return f"no such file or folder (no bucket '{bucket}')"
        except LogPathError:
            pass
    return "no such file or folder"


def _seconds(info: EvalLogInfo) -> float:
    # Inspect's listing gives milliseconds (None for a folder on S3)
    return (info.mtime or 0.0) / 1000


def _one_line(ex: BaseException) -> str:
    text = " ".join(str(ex).split())
    return text[:300] or type(ex).__name__


def local_path(name: str) -> str:
    """A local log path as a path: a ``file://`` URI's path, anything else as it is."""
    return _local(name)


def _local(name: str) -> str:
    parsed = urlparse(name)
    return url2pathname(parsed.path) if parsed.scheme == "file" else name


# --- reading a log within bounds ----------------------------------------------------------

#: the most megabytes (10**6 bytes) of one record read into memory at once, by default
READ_LIMIT_MB = 256
#: the environment variable that sets it (``MED_EVALS_READ_LIMIT_MB=2000``)
READ_LIMIT_ENV = "MED_EVALS_READ_LIMIT_MB"
#: sample records read together (one ``read_eval_log_samples_by_id`` call: the zip's directory
#: parsed once per chunk); what a reader holds at once of a log's samples
SAMPLE_CHUNK = 500
#: the records of an ``.eval`` log that no reader here reads (Inspect's sample summaries)
_SUMMARIES = ("summaries.json", "_journal/summaries/")
_SAMPLES = "samples/"
_HEADER, _REDUCTIONS = "header.json", "reductions.json"


class LogTooLarge(ValueError):
    """A log record (an ``.eval`` log's header, reductions or one sample; a whole ``.json``
    log) larger than :func:`read_limit`: not read."""


def read_limit() -> int:
    """The most bytes of one record read at once: ``MED_EVALS_READ_LIMIT_MB`` megabytes, else
    :data:`READ_LIMIT_MB`. A value that is not a positive number is a :class:`LogPathError`
    naming it (no log is read under a limit nobody meant)."""
    text = os.environ.get(READ_LIMIT_ENV, "").strip()
    if not text:
        return READ_LIMIT_MB * 10**6
    try:
        mb = float(text)
    except ValueError:
        mb = math.nan
    if not mb > 0 or math.isinf(mb):
        raise LogPathError(f"{READ_LIMIT_ENV}={text}: expected a number of megabytes above 0")
    return int(mb * 10**6)


def _is_eval(path: str | Path) -> bool:
    """Whether a log path names an ``.eval`` log (a zip of records), as Inspect tells the two
    formats apart: by the name's ending."""
    return log_name(path).endswith(".eval")


#: what :func:`_too_large` names a ``.json`` log as (the log is its one record)
_JSON_RECORD = "this .json log (Inspect reads one whole)"


def _too_large(record: str, size: int, limit: int) -> LogTooLarge:
    need = math.ceil(size / 10**6) + 1
    convert = ("; or convert it: inspect log convert --to eval --output-dir <folder> <log>"
               if record == _JSON_RECORD else "")
    return LogTooLarge(
        f"{record} holds {size / 10**6:,.1f} MB, more than the {limit / 10**6:,.0f} MB read at "
        f"once ({READ_LIMIT_ENV}={need} reads it{convert})")


def _members(path: str) -> dict[str, zipfile.ZipInfo]:
    """An ``.eval`` log's records by name, from the zip's central directory (read through
    fsspec, the layer under Inspect's file functions: a remote log's directory by ranged reads);
    a record logged twice (a requeued sample) by its last entry, as Inspect reads it."""
    import fsspec  # type: ignore[import-untyped]

    with fsspec.open(path, "rb") as f:
        return _zip_members(f)


def _zip_members(f: IO[bytes]) -> dict[str, zipfile.ZipInfo]:
    """:func:`_members` of an open ``.eval`` file."""
    with zipfile.ZipFile(f) as z:
        return {i.filename: i for i in z.infolist()}


def _check(members: Mapping[str, zipfile.ZipInfo], names: Iterable[str], limit: int) -> None:
    for name in names:
        info = members[name]
        if info.file_size > limit:
            raise _too_large(name, info.file_size, limit)


def _size(path: str) -> int:
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    return int(fs.size(root) or 0)


def read_header(path: str, limit: int | None = None) -> EvalLog:
    """A log's header (Inspect's ``read_eval_log(header_only=True)``: its settings, results and
    reductions), read only when each record it reads holds at most ``limit`` bytes (default
    :func:`read_limit`): :class:`LogTooLarge` otherwise."""
    limit = read_limit() if limit is None else limit
    if _is_eval(path) and is_remote(path):
        return _read_remote_header(path, limit)
    if _is_eval(path):
        members = _members(path)
        _check(members, _header_records(members), limit)
    elif (size := _size(path)) > limit:
        raise _too_large(_JSON_RECORD, size, limit)
    return read_eval_log(path, header_only=True)


def _read_remote_header(path: str, limit: int) -> EvalLog:
    """A remote ``.eval`` log's header, as :func:`read_header` reads it, through one fsspec
    file: its zip directory and then its header records, by ranged reads, handed to
    Inspect's ``read_eval_log`` as a stream. Given the log's URI, Inspect makes a new S3 client
    for each log it reads (a quarter of a second of CPU each: ``tests/test_s3.py`` made 51);
    fsspec keeps one filesystem, and its connections, for the whole command."""
    import fsspec

    with fsspec.open(path, "rb") as f:
        members = _zip_members(f)
        _check(members, _header_records(members), limit)
        f.seek(0)
        log = read_eval_log(f, header_only=True)
    log.location = path  # a stream's log has none
    return log


def _header_records(members: Mapping[str, zipfile.ZipInfo]) -> list[str]:
    """The records Inspect reads for an ``.eval`` log's header: ``header.json`` and
    ``reductions.json`` of a finished log; of one without a header (a run still going, or
    killed), its journal (``_journal/start.json``, config updates) but the sample summaries."""
    if _HEADER in members:
        return [n for n in (_HEADER, _REDUCTIONS) if n in members]
    return [n for n in members if not n.startswith((_SAMPLES, *_SUMMARIES))]


def _is_sample(name: str) -> bool:
    return name.startswith(_SAMPLES) and name.endswith(".json")


def sample_keys(members: Iterable[str], header: EvalLog) -> list[tuple[str | int, int]]:
    """(sample id, epoch) of each sample record among an ``.eval`` log's record names, in the
    order Inspect's ``read_eval_log`` gives its samples (epoch, then id: numbers by value); an id
    as the header's dataset lists it (a number stays a number; a header without the list, from
    an older Inspect: an id of digits is taken for a number)."""
    ids = {str(i): i for i in (header.eval.dataset.sample_ids or [])}
    keys: list[tuple[str | int, int]] = []
    for name in filter(_is_sample, members):
        sid, _, epoch = name[len(_SAMPLES):-len(".json")].rpartition("_epoch_")
        if sid and epoch.isdigit():
            typed = ids.get(sid, int(sid) if not ids and sid.isdigit() else sid)
            keys.append((typed, int(epoch)))
    keys.sort(key=lambda k: (k[1], k[0] if isinstance(k[0], str) else str(k[0]).zfill(20)))
    return keys


@contextmanager
def _local_copy(path: str) -> Iterator[str]:
    """A local path to read ``path`` from: itself, or for a remote log a temporary copy
    (Inspect reads a remote log whole the same way, from a download, rather than by many
    ranged reads), removed afterwards."""
    if not is_remote(path):
        yield path
        return
    import fsspec

    fd, temp = tempfile.mkstemp(suffix=".eval", prefix="med-evals-log-")
    try:
        with os.fdopen(fd, "wb") as out, fsspec.open(path, "rb") as f:
            shutil.copyfileobj(f, out, 8 * 2**20)
        yield temp
    finally:
        os.unlink(temp)


def read_samples(path: str, header: EvalLog, limit: int | None = None,
                 chunk: int = SAMPLE_CHUNK) -> Iterator[EvalSample]:
    """Every sample record of a log (each epoch's), in Inspect's order, as Inspect's
    ``read_eval_log`` gives them (attachments not resolved: :func:`attachment_text`): an
    ``.eval`` log's records ``chunk`` at a time through Inspect's
    ``read_eval_log_samples_by_id``, each only when it holds at most ``limit`` bytes (default
    :func:`read_limit`); a ``.json`` log read whole (Inspect has no other way), only when the
    file holds at most ``limit`` bytes. :class:`LogTooLarge` before any sample is read when one
    record is over the limit."""
    limit = read_limit() if limit is None else limit
    if not _is_eval(path):
        if (size := _size(path)) > limit:
            raise _too_large(_JSON_RECORD, size, limit)
        yield from read_eval_log(path).samples or []
        return
    members = _members(path)
    _check(members, filter(_is_sample, members), limit)
    keys = sample_keys(members, header)
    with _local_copy(path) as local:
        for start in range(0, len(keys), chunk):
            yield from read_eval_log_samples_by_id(local, keys[start:start + chunk])


#: how a log refers to a text it stores once among a sample's ``attachments``
ATTACHMENT = "attachment://"


def attachment_text(text: str, attachments: Mapping[str, str]) -> str:
    """A text of a sample record as it was sent: the attachment it refers to where Inspect stored
    it once (``attachment://<hash>``: a long message, repeated across a sample's events), else
    itself. Resolving only the texts a reader needs: Inspect's ``resolve_attachments`` walks the
    whole sample, 100 of the 230 s of reading 10,000 samples (profiled, bench_readback's log)."""
    if text.startswith(ATTACHMENT):
        return attachments.get(text[len(ATTACHMENT):], text)
    return text
