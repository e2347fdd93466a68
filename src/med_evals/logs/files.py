"""Which files a list of log paths names: folders expanded to the Inspect logs inside them.

A log path is anything Inspect's own log functions take (``list_eval_logs``,
``read_eval_log``): a local path, a ``file://`` URI, or a remote one such as
``s3://bucket/logs`` (through fsspec; for S3, s3fs and the usual AWS settings:
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...). Folders are expanded by
:func:`inspect_ai.log.list_eval_logs` (recursively, as Inspect lists a log folder), never by
:mod:`pathlib`, and a log's write time comes from that listing; a location that cannot be
listed (no connection, refused credentials) is a :class:`LogPathError` naming it.

Kept apart from :mod:`med_evals.logs.runs` (which reads runs of the studies) so that a task-side
tool (:mod:`med_evals.commands.export_counterfactuals`) can list logs without importing the studies.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from inspect_ai.log import EvalLogInfo, list_eval_logs


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


def _local(name: str) -> str:
    parsed = urlparse(name)
    return url2pathname(parsed.path) if parsed.scheme == "file" else name
