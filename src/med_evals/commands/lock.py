"""One ``med-evals run`` writes into a log folder at a time: a lock that a dead owner releases.

Two runs into one folder each start every shard: two identical runs into one S3 prefix paid
200 calls for 100 samples and left 4 partial runs, and a run started again at once after its
command was killed paid 168 calls for 100 (issue 44). So ``med-evals run`` takes the folder's
lock before it reads the folder's logs, and keeps it until its last shard process has ended.

**A local folder**: the lock is ``flock`` on the file ``<log folder>/.med-evals-run/lock``,
taken by the command and held, through the open file each one inherits, by every shard process
it starts. The kernel releases it when the last of them ends, however it ends (a SIGKILL
included): a dead owner leaves no lock behind, and the file left in the folder is no lock. The
file names its owner (JSON: host, pid, the shards' pids, the command and when it started), for
the message of a run that finds the folder locked:

- by a command still running: refused, one line naming its pid (exit 2, before any process
  starts);
- by the shard processes of a command that has ended (killed: its shards end with it, as
  Ctrl-C ends them, :mod:`med_evals.commands.shard_process`): one line saying so, and a wait for
  them, at most :data:`GRACE` seconds, then the run goes on with the lock (and resumes them).

``flock`` is the local filesystem's; on a network filesystem that emulates it by POSIX record
locks (NFS) the lock is the command's alone (record locks are not inherited), released when the
command ends.

**An s3:// folder**: the object ``<log folder>/.med-evals-run/lock``, written with S3's
conditional writes (created only where none exists, ``If-None-Match: *``; replaced or deleted
only as last read, ``If-Match``), holding the same owner record and an owner id. Its owner
writes it again every :data:`HEARTBEAT` seconds (the heartbeat is the object's write time, by
the store's clock). It is **stale**, and taken over with a ``note:`` line, when its last
heartbeat is older than :data:`EXPIRY` seconds, or at once where its owner ran on this machine
and none of its processes is alive. The command deletes it at the end. A command whose lock was
taken over while it ran (a pause longer than :data:`EXPIRY`: a suspended machine) stops its
shards (:attr:`S3Lock.lost`).

Any other remote store (``gs://``, ...): no lock, a ``note:`` line.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from med_evals.logs.files import is_remote, scheme
from med_evals.outputs.exit_codes import USAGE, CommandError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, no local lock (a note says so)
    fcntl = None  # type: ignore[assignment]

#: the lock's name in the run's folder (:data:`med_evals.commands.run.OUTPUTS`)
FOLDER, NAME = ".med-evals-run", "lock"
#: seconds between the heartbeats of an s3:// lock, and the age of the last one after which
#: the lock is stale (four missed heartbeats)
HEARTBEAT, EXPIRY = 30.0, 120.0
#: seconds a run waits for the shard processes of a command that has ended (they end as
#: Ctrl-C ends them, at most :data:`med_evals.commands.shard_process.GRACE` s after it)
GRACE = 90.0
#: seconds between two looks at a lock someone else holds
POLL = 0.2
#: a line for the console (the run's ``note:`` and ``waiting`` lines)
Say = Callable[[str], None]


def _now() -> str:
    return datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _created(pid: int) -> float | None:
    """When process ``pid`` of this machine started (None: no such process, or a zombie)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


@dataclass
class Owner:
    """Who holds a lock: the command (its pid and start) and its shard processes (pid -> when
    each started: a pid reused by another process is not the owner's)."""

    id: str
    host: str
    pid: int
    command: str
    started: str
    processes: dict[str, float] = field(default_factory=dict)

    @classmethod
    def this(cls, command: str) -> Owner:
        me = os.getpid()
        return cls(uuid.uuid4().hex, socket.gethostname(), me, command, _now(),
                   {str(me): _created(me) or 0.0})

    def add(self, pids: Sequence[int]) -> None:
        for pid in pids:
            self.processes[str(pid)] = _created(pid) or 0.0

    def text(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def read(cls, text: str | bytes) -> Owner | None:
        """The record of a lock, or None (empty: being written; not ours)."""
        try:
            data = json.loads(text)
            return cls(str(data["id"]), str(data["host"]), int(data["pid"]),
                       str(data["command"]), str(data["started"]),
                       {str(k): float(v) for k, v in (data.get("processes") or {}).items()})
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def here(self) -> bool:
        return self.host == socket.gethostname()

    def alive(self) -> list[int] | None:
        """Its processes running now, the command first; None where it ran on another machine
        (this one cannot tell)."""
        if not self.here():
            return None
        found = []
        for pid, created in self.processes.items():
            now = _created(int(pid))
            if now is not None and (not created or abs(now - created) < 1.0):
                found.append(int(pid))
        return found

    def who(self) -> str:
        where = "" if self.here() else f" on {self.host}"
        return f"pid {self.pid}{where}, started {self.started}"


def in_use(where: str, owner: Owner, extra: str = "") -> CommandError:
    """The line of a run refused because ``owner`` writes into the folder (exit 2)."""
    stop = f"stop it (kill {owner.pid})" if owner.here() else f"stop it on {owner.host}"
    return CommandError(
        f"{where}: another med-evals run is writing into this log folder ({owner.who()}{extra}); "
        f"one run per log folder at a time: wait for it to end, or {stop} and run the same "
        "command again to resume", USAGE)


class Waiting:
    """A run waiting for the shard processes of a command that has ended (one line, then at
    most :data:`GRACE` s)."""

    def __init__(self, where: str, say: Say) -> None:
        self.where, self.say = where, say
        self.since: float | None = None

    def wait(self, owner: Owner, alive: Sequence[int]) -> None:
        if self.since is None:
            self.since = time.monotonic()
            pids = ", ".join(map(str, alive)) or "none of those its lock names"
            self.say(f"waiting for the shard processes of an earlier med-evals run of this log "
                     f"folder to end (its command, pid {owner.pid}, has ended; pids {pids})")
        elif time.monotonic() - self.since > GRACE:
            pids = " ".join(map(str, alive))
            stop = f"stop them (kill {pids})" if alive else "find what holds it"
            raise CommandError(
                f"{self.where}: the lock of an earlier med-evals run is still held {GRACE:.0f} s "
                f"after its command (pid {owner.pid}) ended; {stop} and run the same command "
                "again", USAGE)
        time.sleep(POLL)


class LocalLock:
    """``flock`` on the folder's lock file (see the module's docstring)."""

    def __init__(self, log_dir: str, owner: Owner) -> None:
        self.where = log_dir
        self.path = Path(log_dir.removeprefix("file://")) / FOLDER / NAME
        self.owner = owner
        self.fd: int | None = None
        self.lost = False

    def acquire(self, say: Say) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as ex:
            raise CommandError(f"{self.where}: cannot make the run's lock file {self.path} "
                               f"({ex.strerror or ex})", USAGE) from None
        waiting, unknown = Waiting(self.where, say), 0
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                holder = Owner.read(os.pread(fd, 1 << 16, 0))
                if holder is None:  # being written by its owner, who has just taken it
                    unknown += 1
                    if unknown * POLL > 5.0:
                        raise CommandError(
                            f"{self.where}: another med-evals run is writing into this log "
                            f"folder (its lock file {self.path} names no owner); one run per "
                            "log folder at a time", USAGE)
                    time.sleep(POLL)
                    continue
                alive = holder.alive()
                if alive is None or holder.pid in alive:
                    raise in_use(self.where, holder)
                waiting.wait(holder, alive)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.write()

    def write(self) -> None:
        if self.fd is not None:
            data = self.owner.text().encode()
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, data, 0)

    def started(self, pids: Sequence[int]) -> None:
        """Name the shard processes started (each holds the lock too)."""
        self.owner.add(pids)
        self.write()

    def inherit(self) -> tuple[int, ...]:
        """The descriptor each shard process keeps open: the lock is held until the last of
        them ends."""
        return () if self.fd is None else (self.fd,)

    def release(self) -> None:
        """Close the command's descriptor: the kernel releases the lock once no shard process
        holds it either (never unlocked explicitly, which would free it under a shard still
        ending)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class S3Lock:
    """The folder's lock object on S3, with a heartbeat (see the module's docstring)."""

    def __init__(self, log_dir: str, owner: Owner) -> None:
        import fsspec  # type: ignore[import-untyped]

        self.where = log_dir
        self.url = f"{log_dir.rstrip('/')}/{FOLDER}/{NAME}"
        self.fs: Any = fsspec.core.url_to_fs(self.url)[0]
        self.bucket, _, self.key = self.url.split("://", 1)[1].partition("/")
        self.owner = owner
        self.etag: str | None = None
        self.lost = False
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._guard = threading.Lock()

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        return dict(self.fs.call_s3(method, Bucket=self.bucket, Key=self.key, **kwargs))

    def _put(self, **condition: str) -> str:
        body = self.owner.text().encode()
        return str(self._call("put_object", Body=body, ContentType="application/json",
                              **condition)["ETag"])

    def _failed(self, ex: Exception) -> CommandError:
        return CommandError(f"{self.where}: cannot take the run's lock {self.url} ({ex})", USAGE)

    def _holder(self) -> tuple[str, float, Owner | None] | None:
        """(ETag, seconds since its last write by the store's clock, its owner), or None when
        it is gone (released meanwhile)."""
        try:
            head = self._call("head_object")
            body = self.fs.cat_file(self.url)
        except FileNotFoundError:
            return None
        sent = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        now = parsedate_to_datetime(sent) if sent else datetime.now(UTC)
        age = (now - head["LastModified"]).total_seconds()
        return str(head["ETag"]), age, Owner.read(body)

    def acquire(self, say: Say) -> None:
        waiting = Waiting(self.where, say)
        while True:
            try:
                self.etag = self._put(IfNoneMatch="*")
                break
            except FileExistsError:
                pass
            except OSError as ex:
                if ex.errno != errno.EINVAL:  # EINVAL: s3fs's precondition failed, unnamed
                    raise self._failed(ex) from None
            try:
                found = self._holder()
            except OSError as ex:
                raise self._failed(ex) from None
            if found is None:
                continue
            etag, age, holder = found
            alive = holder.alive() if holder is not None else None
            stale = age > EXPIRY or (alive is not None and not alive)
            if stale:
                try:
                    self.etag = self._put(IfMatch=etag)
                except OSError as ex:
                    if ex.errno in (errno.EINVAL, errno.ENOENT) or isinstance(
                            ex, FileNotFoundError):
                        continue  # another run took it over first, or it was released
                    raise self._failed(ex) from None
                whose = holder.who() if holder is not None else "no owner named"
                why = (f"its last heartbeat {age:.0f} s ago (stale after {EXPIRY:.0f} s)"
                       if age > EXPIRY else "none of its processes is running")
                say(f"note: took over the lock {self.url} of an earlier med-evals run "
                    f"({whose}): {why}")
                break
            if holder is None:
                raise CommandError(f"{self.where}: another med-evals run is writing into this "
                                   f"log folder (its lock {self.url} names no owner); one run "
                                   "per log folder at a time", USAGE)
            if alive is None or holder.pid in alive:
                beat = (f", last heartbeat {age:.0f} s ago; a lock whose heartbeat stops is "
                        f"taken over after {EXPIRY:.0f} s" if not holder.here() else "")
                raise in_use(self.where, holder, beat)
            waiting.wait(holder, alive)
        self._beat = threading.Thread(target=self._heartbeat, name="med-evals-run-lock",
                                      daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            self.beat()

    def beat(self) -> None:
        """Write the lock again (its heartbeat), as last written: a lock another run took
        over is :attr:`lost`; a store that does not answer is tried again at the next beat."""
        with self._guard:
            if self.etag is None or self.lost:
                return
            try:
                self.etag = self._put(IfMatch=self.etag)
            except OSError as ex:
                if ex.errno in (errno.EINVAL, errno.ENOENT) or isinstance(ex, FileNotFoundError):
                    self.lost = True

    def started(self, pids: Sequence[int]) -> None:
        self.owner.add(pids)
        self.beat()

    def inherit(self) -> tuple[int, ...]:
        return ()

    def release(self) -> None:
        """Stop the heartbeat and delete the lock, as last written (one taken over is left)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=10)
        with self._guard:
            if self.etag is not None and not self.lost:
                try:
                    self._call("delete_object", IfMatch=self.etag)
                except OSError:
                    pass  # gone, or taken over: not ours to delete
            self.etag = None


class NoLock:
    """A remote store other than S3: no lock (said in a note)."""

    lost = False

    def acquire(self, say: Say) -> None:
        pass

    def started(self, pids: Sequence[int]) -> None:
        pass

    def inherit(self) -> tuple[int, ...]:
        return ()

    def release(self) -> None:
        pass


FolderLock = LocalLock | S3Lock | NoLock


def lock_for(log_dir: str, command: str, say: Say) -> FolderLock:
    """The lock of ``log_dir``, taken (see the module's docstring): a :class:`CommandError`
    (exit 2) where another run holds it."""
    owner = Owner.this(command)
    lock: FolderLock
    if not is_remote(log_dir) and fcntl is None:  # pragma: no cover - Windows
        say(f"note: {log_dir}: no lock on this system (no flock): start one med-evals run at "
            "a time into it")
        lock = NoLock()
    elif not is_remote(log_dir):
        lock = LocalLock(log_dir, owner)
    elif scheme(log_dir) == "s3":
        lock = S3Lock(log_dir, owner)
    else:
        say(f"note: {log_dir}: no lock for a {scheme(log_dir)}:// log folder (s3:// and local "
            "folders only): start one med-evals run at a time into it")
        lock = NoLock()
    lock.acquire(say)
    return lock
