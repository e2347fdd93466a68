"""Every file or folder a ``med-evals`` command writes: checked before any work, written whole.

- :func:`check_file` and :func:`check_folder` are the one check of every ``--out`` / ``-o``: the
  path must name a file (or a folder) that can be written, in a folder that exists (a report's
  folder is made if missing). Outputs are local: a URI (``s3://...``, even ``file://``) is
  refused in one line (:func:`check_local`), as logs may be read from S3 but nothing is written
  there. A folder that cannot be written in (read-only, not ours) is found
  by creating and removing a probe file there, so a read-only mount, an ACL or a full quota is
  caught as well as the mode bits: a :class:`~med_evals.outputs.exit_codes.CommandError` (one line,
  exit
  2) before any log is read.
- :func:`check_not_input` refuses an output that is one of the command's inputs (a log, a table
  it reads), before any work: ``med-evals`` runs it for every command
  (``med_evals.commands.cli``), so ``baseline logs/ -o logs/x.eval`` never overwrites a log.
- :func:`write_bytes`, :func:`write_text` and :func:`write_csv` write a temporary file in the
  destination's own folder (the same filesystem, so the rename works on a mount point or a
  network share) and rename it over the destination: a kill or a full disk leaves the old file
  whole, never a truncated one. The file gets the user's usual permissions (their umask, or the
  old file's mode), not the temporary file's private 0600. Temporary files our earlier killed
  runs left (``.<name>.<host>-<pid>-<random>.tmp``, their process gone) are removed on the next
  write of the same file.
- :func:`write_csv` with ``for_people`` (tables a person opens in a spreadsheet) neutralises
  cells that a spreadsheet would run as a formula (:func:`med_evals.outputs.text.csv_frame`).

A failure while writing (no space left, a permission lost midway) is a ``CommandError`` too: the
old output stays as it was.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from med_evals.outputs.exit_codes import USAGE, CommandError

#: our temporary names: ``.<name>.<host>-<pid>-<random>.tmp`` (files), and for folders the
#: same pattern under a prefix of the caller's
_HOST = re.sub(r"[^A-Za-z0-9]+", "_", socket.gethostname())[:40] or "host"
#: a temporary file or folder of another machine, or one whose process we cannot see, is left
#: alone this long before it counts as stale
STALE_AFTER_S = 24 * 3600


def umask() -> int:
    """The process's umask (the only way to read it is to set it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _why(ex: OSError) -> str:
    return ex.strerror or str(ex)


def _probe(folder: Path, path: Path, flag: str) -> None:
    """Create and remove a file in ``folder``: a CommandError naming ``flag path`` if it cannot
    be done."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".med-evals-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as ex:
        raise CommandError(
            f"{flag} {path}: cannot write in {folder} ({_why(ex)})", USAGE
        ) from None


def check_local(path: str | Path, flag: str = "--out") -> None:
    """A :class:`CommandError` (exit 2) when ``path`` is a URI rather than a local path: every
    output of med_evals is written here (whole, by a rename), never to S3 or another store."""
    from med_evals.logs.files import scheme

    kind = scheme(path)
    if kind == "file":
        raise CommandError(f"{flag} {path}: give a local path, not a file:// URI", USAGE)
    if kind:
        where = "S3" if kind in ("s3", "s3a") else f"{kind}://"
        raise CommandError(
            f"{flag} {path}: med-evals writes reports and baselines to a local folder; copy "
            f"them to {where} after", USAGE,
        )


def check_file(path: str | Path, flag: str = "--out", make_parent: bool = False) -> Path:
    """The file ``path`` as a :class:`Path`, if it can be written; else a
    :class:`CommandError` (exit 2): a URI (:func:`check_local`), a folder, a folder that does
    not exist (unless ``make_parent``: then one that cannot be made), or a folder that cannot
    be written in."""
    check_local(path, flag)
    out = Path(path)
    if out.is_dir():
        raise CommandError(f"{flag} {out}: is a folder; name the file to write", USAGE)
    parent = out.parent
    if make_parent and not parent.exists():
        check_folder(parent, flag)
        return out
    if not parent.exists():
        raise CommandError(f"{flag} {out}: the folder {parent} does not exist", USAGE)
    if not parent.is_dir():
        raise CommandError(f"{flag} {out}: {parent} is a file, not a folder", USAGE)
    _probe(parent, out, flag)
    return out


def check_not_input(path: str | Path, inputs: Mapping[str, Sequence[str | Path]],
                    flag: str = "--out") -> None:
    """A :class:`CommandError` (exit 2) when the output ``path`` is one of the command's
    inputs, which writing it would overwrite: ``inputs`` maps what they are (``log``,
    ``table``) to the paths given. A local output is an input when it is the same file (by
    :func:`os.path.samefile`: a link, a ``file://`` URI or another spelling of it counts) as an
    input file, or as a log that an input folder holds (Inspect's listing of it, recursively:
    every log in a log folder given is an input); a URI output (refused anyway by
    :func:`check_local`) when it is the URI of an input. Only an output that exists can be an
    input, so a new file costs no listing."""
    from med_evals.logs.files import LogPathError, is_remote, list_log_files, local_path

    out = str(path)
    if is_remote(out):
        for what, given in inputs.items():
            if any(str(g).rstrip("/") == out.rstrip("/") for g in given):
                raise CommandError(f"{flag} {out}: is an input {what}; name another file", USAGE)
        return
    target = Path(local_path(out))
    if not target.is_file():
        return
    for what, given in inputs.items():
        for g in given:
            name = str(g)
            if is_remote(name):
                continue
            local = Path(local_path(name))
            if local.is_dir():
                try:
                    logs = [Path(f.name) for f in list_log_files([local])]
                except LogPathError:  # cannot be listed: the command itself says so
                    continue
                if any(_same(target, log) for log in logs):
                    raise CommandError(f"{flag} {out}: is an input {what} (in the folder "
                                       f"{name} given); name another file", USAGE)
            elif _same(target, local):
                raise CommandError(f"{flag} {out}: is an input {what}; name another file", USAGE)


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_folder(path: str | Path, flag: str = "--out", make: bool = True) -> Path:
    """The folder ``path``, if files can be written in it: it exists, or (``make``) it can be
    made in the nearest folder above it that exists; else a :class:`CommandError` (exit 2), a
    URI among them (:func:`check_local`)."""
    check_local(path, flag)
    out = Path(path)
    problem = not_a_folder(out)
    if problem:
        raise CommandError(f"{flag} {out}: {problem}", USAGE)
    if out.is_dir():
        _probe(out, out, flag)
        return out
    if not make:
        raise CommandError(f"{flag} {out}: no such folder", USAGE)
    _probe(_nearest(out), out, flag)
    return out


def _nearest(path: Path) -> Path:
    """``path`` or the nearest path above it that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def not_a_folder(path: Path) -> str | None:
    """Why the local folder ``path`` can be neither used nor made: ``is a file, not a folder``,
    or ``<above> is a file, not a folder`` for a file in its way (``README.md/logs``); None
    when it is a folder, or could be made."""
    if path.exists() and not path.is_dir():
        return "is a file, not a folder"
    above = _nearest(path)
    if not above.is_dir():
        return f"{above} is a file, not a folder"
    return None


def make_folder(path: Path, flag: str = "--out") -> None:
    """``mkdir -p``, a failure as a :class:`CommandError`."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as ex:
        raise CommandError(f"{flag} {path}: cannot make the folder ({_why(ex)})", USAGE) from None


def temp_name(prefix: str) -> str:
    """``<prefix><host>-<pid>-`` : the start of a temporary name of ours (mkstemp/mkdtemp add a
    random part)."""
    return f"{prefix}{_HOST}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def is_stale(path: Path, prefix: str) -> bool:
    """Whether ``path`` (named by :func:`temp_name` with ``prefix``) was left by a process that
    is gone: one of this machine whose pid no longer runs, or any older than a day."""
    rest = path.name[len(prefix):]
    host, _, tail = rest.rpartition("-")  # tail: the random part (and suffix)
    host, _, pid = host.rpartition("-")
    try:
        old = time.time() - path.lstat().st_mtime > STALE_AFTER_S
    except OSError:
        return False
    if host == _HOST and pid.isdigit():
        return int(pid) != os.getpid() and not _pid_alive(int(pid)) or old
    return old


def stale_entries(folder: Path, prefix: str) -> Iterator[Path]:
    """Temporary files or folders of ours in ``folder`` (named with ``prefix``) that are stale."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(prefix) and is_stale(entry, prefix):
            yield entry


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o666 & ~umask()


@contextmanager
def replacing(path: str | Path, flag: str = "--out", binary: bool = False,
              newline: str | None = None,
              check: Callable[[Path], object] | None = None) -> Iterator[IO]:
    """A file object whose contents replace ``path`` in one rename when the block ends without
    an error (nothing changes at ``path`` otherwise). ``check(temporary path)``, if given, runs
    on the complete file before the rename: an exception there leaves ``path`` as it was.
    Write errors are a :class:`CommandError` naming ``flag path``."""
    out = Path(path)
    prefix = f".{out.name}."
    for stale in stale_entries(out.parent, prefix):
        if stale.name.endswith(".tmp"):
            stale.unlink(missing_ok=True)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=out.parent, prefix=temp_name(prefix), suffix=".tmp")
    except OSError as ex:
        raise CommandError(f"{flag} {out}: cannot write it ({_why(ex)})", USAGE) from None
    tmp = Path(tmp_name)
    try:
        f: IO
        if binary:
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding="utf-8", newline=newline)
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check(tmp)
        os.chmod(tmp, _mode_for(out))
        os.replace(tmp, out)
    except OSError as ex:
        tmp.unlink(missing_ok=True)
        raise CommandError(f"{flag} {out}: cannot write it ({_why(ex)})", USAGE) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: str | Path, data: bytes, flag: str = "--out") -> Path:
    """Replace ``path`` with ``data`` in one rename (see the module docstring)."""
    with replacing(path, flag, binary=True) as f:
        f.write(data)
    return Path(path)


def write_text(path: str | Path, text: str, flag: str = "--out") -> Path:
    """Replace ``path`` with ``text`` (UTF-8) in one rename."""
    with replacing(path, flag) as f:
        f.write(text)
    return Path(path)


def write_with(path: str | Path, write: Callable[[IO], object], flag: str = "--out",
               newline: str | None = None,
               check: Callable[[Path], object] | None = None) -> Path:
    """Replace ``path`` with what ``write(file)`` writes, in one rename (``check``: see
    :func:`replacing`)."""
    with replacing(path, flag, newline=newline, check=check) as f:
        write(f)
    return Path(path)


def write_csv(df, path: str | Path, flag: str = "--out", for_people: bool = True,  # noqa: ANN001
              check: Callable[[Path], object] | None = None) -> Path:
    """A pandas DataFrame as CSV (no index), in one rename. ``for_people``: a table a person
    opens in a spreadsheet, whose text cells starting with ``=``, ``+``, ``-``, ``@`` (a
    formula there) are neutralised (:func:`med_evals.outputs.text.csv_frame`); a table read back by
    med_evals (an exported ``trials.csv``) is written as it is."""
    if for_people:
        from med_evals.outputs.text import csv_frame

        df = csv_frame(df)
    return write_with(path, lambda f: df.to_csv(f, index=False), flag, newline="", check=check)
