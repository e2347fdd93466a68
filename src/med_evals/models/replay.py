"""``replay/<file>``, or ``replay/<name> -M file=<file>``: serve recorded model outputs instead
of calling a model.

The model's name is the run's in Inspect's log and viewer (``log.eval.model``):
``replay/<file>`` names it by the recording's path; ``replay/<name> -M file=<file>`` by a name
of your choosing, the recorded model's (``replay/gpt4o_temp100``), so runs replaying different
recordings read differently in ``inspect view``'s list (``med-evals compare`` does this). The
file is then in the log's model args (``-M file``); either way, every replayed call's request
in the log names the file and its sha256 (``replay``, ``sha256``; a folder of logs: the sha256
of its logs' names and sha256s, :func:`recording_sha256`).

A recording is either

- an Inspect log (``.eval`` or ``.json``) or a directory of them: each sample's model calls
  (its ``model`` events, in order; the sample's final output where events were not logged) are
  replayed for the same task, sample id and epoch; a call that failed is replayed as the same
  failure; or
- a JSONL file, one recorded call per line::

      {"task": "oncology_rct", "id": "title_abstract-000", "epoch": 1, "reply": "POSITIVE"}

  ``task`` may be omitted (the record then serves any task), ``epoch`` defaults to 1, ``reply``
  ``null`` with an ``error`` text records a failed call; ``usage``
  (``{"input_tokens": .., "output_tokens": ..}``, and any other field of Inspect's
  ``ModelUsage``: ``reasoning_tokens``, ``input_tokens_cache_read``, ...) and ``model`` (the
  recorded model's name) are optional. A call without ``usage`` has none in the log (Inspect
  then counts no tokens for it: not 0 tokens, none recorded). Several lines with one key are
  successive calls of that sample.

Every generate call is keyed by the running task, sample id and epoch (Inspect's active sample).
A call with no record stops the run with an error naming the file and the key: never a silent
default reply. Nothing is random, so re-scoring a recorded run gives the same numbers each time.

A recording that cannot be read (not UTF-8, not JSON lines, empty, a log without samples) is a
:class:`ReplayError`, raised when the model is created; a recording with no record for any
sample of the task (its records are for another task, or its ids are not the task's) is one
raised when the task is built (:func:`check_covers`, called by every task). Both come before
any sample runs: ``inspect eval`` prints the one-line message without a traceback and exits 1.
A record missing for some samples is found only during the run: the task ends with status
``error`` and Inspect shows the message in its error panel (``inspect eval`` then exits 0;
``inspect eval-set`` exits 1). How each task forms its sample ids: docs/models.md.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspect_ai.log import list_eval_logs, read_eval_log
from inspect_ai.model import (
    ChatMessage,
    GenerateConfig,
    ModelAPI,
    ModelCall,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from med_evals.data.datasets import sha256_of
from med_evals.inspect_internals.compat import (
    InputError,
    PrerequisiteError,
    active_model,
    sample_active,
)

ANY_TASK = "*"
"""Task key of a JSONL record without ``task``: it serves any task."""


class ReplayError(InputError):
    """A recording that cannot be read (the message names the file and line)."""


class RecordedFailure(RuntimeError):
    """A model call that failed when it was recorded, failing again on replay."""


@dataclass(frozen=True)
class Recorded:
    """One recorded model call: the output, or the error the call raised."""

    output: ModelOutput | None
    error: str | None = None


Key = tuple[str, str, int]  # (task, sample id, epoch)


def task_key(task: str | None) -> str:
    """``med_evals/oncology_rct`` and ``oncology_rct`` name the same task."""
    return ANY_TASK if not task else task.rsplit("/", 1)[-1]


def _output(reply: str, model: str, usage: Any, where: str) -> ModelOutput:
    out = ModelOutput.from_content(model=model, content=reply)
    if usage is None:
        return out  # no usage recorded: none in the log (not zero tokens)
    if not isinstance(usage, dict):
        raise ReplayError(f"{where}: 'usage' must be an object of token counts")
    try:
        counts = {k: int(v) for k, v in usage.items() if k in ModelUsage.model_fields
                  and k != "total_cost" and v is not None}
    except (TypeError, ValueError):
        raise ReplayError(f"{where}: 'usage' counts must be integers") from None
    counts.setdefault(
        "total_tokens", counts.get("input_tokens", 0) + counts.get("output_tokens", 0)
    )
    out.usage = ModelUsage(**counts)
    return out


def recording_sha256(path: Path) -> str:
    """The sha256 of a recording: the file's; for a folder of logs, of one line
    ``<relative path>\t<sha256>`` per log file in it (``.eval``, ``.json``), sorted."""
    if not path.is_dir():
        return sha256_of(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".eval", ".json"))
    for f in files:
        h.update(f"{f.relative_to(path).as_posix()}\t{sha256_of(f)}\n".encode())
    return h.hexdigest()


def read_jsonl(path: Path) -> dict[Key, list[Recorded]]:
    """Records of a JSONL replay file, keyed by (task, sample id, epoch), calls in file order.

    The file must be UTF-8 (a byte-order mark is allowed) and hold at least one record.
    """
    data = path.read_bytes()
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as ex:
        at = data.count(b"\n", 0, ex.start) + 1
        raise ReplayError(
            f"{path}: line {at}: not UTF-8 text (byte 0x{data[ex.start]:02x}); a replay "
            "file holds JSON lines in UTF-8"
        ) from None
    records: dict[Key, list[Recorded]] = defaultdict(list)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as ex:
            raise ReplayError(f"{path}: line {lineno}: not JSON ({ex.msg})") from None
        if not isinstance(row, dict):
            raise ReplayError(f"{path}: line {lineno}: expected a JSON object")
        sample_id = row.get("id", row.get("sample_id"))
        if sample_id is None:
            raise ReplayError(f"{path}: line {lineno}: no 'id' (sample id)")
        if "reply" not in row:
            raise ReplayError(f"{path}: line {lineno}: no 'reply' (null for a failed call)")
        reply, error = row["reply"], row.get("error")
        if reply is not None and not isinstance(reply, str):
            raise ReplayError(f"{path}: line {lineno}: 'reply' must be a string or null")
        try:
            epoch = int(row.get("epoch", 1))
        except (TypeError, ValueError):
            raise ReplayError(f"{path}: line {lineno}: 'epoch' must be an integer") from None
        key = (task_key(row.get("task")), str(sample_id), epoch)
        if reply is None:
            rec = Recorded(None, str(error or "recorded call failed (reply is null)"))
        else:
            rec = Recorded(_output(reply, row.get("model") or "replay", row.get("usage"),
                                   f"{path}: line {lineno}"))
        records[key].append(rec)
    if not records:
        raise ReplayError(
            f"{path}: no record (the file is empty or blank); a replay file holds one JSON "
            "line per recorded call"
        )
    return dict(records)


def read_log(path: str | Path) -> dict[Key, list[Recorded]]:
    """Records of one Inspect log: each sample's model calls in order."""
    log = read_eval_log(str(path))
    if not log.samples:
        raise ReplayError(f"{path}: the log holds no samples")
    task = task_key(log.eval.task)
    records: dict[Key, list[Recorded]] = {}
    for sample in log.samples:
        calls: list[Recorded] = []
        for event in sample.events:
            if event.event != "model" or event.role not in (None, "", "model"):
                continue
            if event.error:
                calls.append(Recorded(None, event.error))
            else:
                calls.append(Recorded(event.output))
        if not calls and sample.output and sample.output.choices:
            calls.append(Recorded(sample.output))
        if not calls:
            raise ReplayError(
                f"{path}: sample {sample.id!r} epoch {sample.epoch} has no model call to replay"
            )
        records[(task, str(sample.id), sample.epoch)] = calls
    return records


def read_recording(path: str | Path) -> dict[Key, list[Recorded]]:
    """A JSONL file, an Inspect log, or a directory of Inspect logs."""
    p = Path(path)
    if not p.exists():
        raise ReplayError(f"replay recording not found: {p}")
    if p.is_dir():
        logs = list_eval_logs(str(p))
        if not logs:
            raise ReplayError(f"{p}: no Inspect logs in this directory")
        records: dict[Key, list[Recorded]] = {}
        for info in logs:
            for key, calls in read_log(info.name).items():
                if key in records:
                    raise ReplayError(f"{p}: {key} is recorded in more than one log")
                records[key] = calls
        return records
    if p.suffix == ".jsonl":
        return read_jsonl(p)
    if p.suffix in (".eval", ".json"):
        return read_log(p)
    raise ReplayError(f"{p}: a replay recording is a .jsonl file, an Inspect log or a directory")


def check_covers(task: str, sample_ids: Iterable[str]) -> None:
    """Called by every task once its samples are built: when the model under evaluation replays
    a recording, at least one of the samples must have a record in it (else
    :class:`ReplayError`, before any sample runs). Any other model, or none (a Task built in
    Python), passes."""
    model = active_model()
    api = getattr(model, "api", None)
    if isinstance(api, ReplayAPI):
        api.check_covers(task, sample_ids)


class ReplayAPI(ModelAPI):
    """Replays a recording: ``-M file=...``, else ``model_name`` is its path."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        file: str | None = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        if model_args:
            raise ReplayError(f"replay: unknown model args {sorted(model_args)}")
        self.path = Path(file or model_name)
        self.records = read_recording(self.path)
        self.sha256 = recording_sha256(self.path)
        self._served: dict[tuple[str, Key], int] = defaultdict(int)
        self._lock = threading.Lock()

    def max_connections(self) -> int:
        return 32

    def check_covers(self, task: str, sample_ids: Iterable[str]) -> None:
        """Refuse a recording with no record for any of ``sample_ids`` of ``task``."""
        name = task_key(task)
        ids = [str(i) for i in sample_ids]
        wanted = set(ids)
        ours = [(sid, t) for t, sid, _ in self.records if t in (name, ANY_TASK)]
        if any(sid in wanted for sid, _ in ours) or not ids:
            return
        if not ours:
            others = sorted({t for t, _, _ in self.records})
            raise ReplayError(
                f"replay: {self.path} has no record for task {name!r}: its records are for "
                f"{', '.join(others)}"
            )
        raise ReplayError(
            f"replay: {self.path} has no record for any sample of this {name} run: it "
            f"records ids such as {ours[0][0]!r}, the run's are such as {ids[0]!r} "
            "(sample ids: docs/models.md)"
        )

    def _key(self) -> tuple[str, Key]:
        active = sample_active()
        if active is None:
            raise PrerequisiteError("replay: a model call outside a running sample has no record")
        sample_id, epoch = str(active.sample.id), int(active.epoch)
        task = task_key(active.task)
        key = (task, sample_id, epoch)
        if key not in self.records and (ANY_TASK, sample_id, epoch) in self.records:
            key = (ANY_TASK, sample_id, epoch)
        return active.id, key

    async def generate(
        self,
        input: list[ChatMessage],  # noqa: A002 - Inspect's signature
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> tuple[ModelOutput, ModelCall]:
        attempt, key = self._key()
        calls = self.records.get(key)
        with self._lock:
            n = self._served[(attempt, key)]
            self._served[(attempt, key)] = n + 1
        task, sample_id, epoch = key
        if not calls or n >= len(calls):
            # PrerequisiteError: never scored as a provider failure, it stops the run
            recorded = f"{len(calls)} call(s) recorded" if calls else "no record"
            raise ReplayError(
                f"replay: {self.path} has no record for call {n + 1} of task {task!r}, "
                f"sample {sample_id!r}, epoch {epoch} ({recorded}); record it, or run only "
                "recorded samples and epochs (--sample-id, --limit, --epochs)"
            )
        rec = calls[n]
        request = {"replay": str(self.path), "sha256": self.sha256, "task": task,
                   "id": sample_id, "epoch": epoch}
        if rec.output is None:
            # raised, not returned: Inspect wraps a returned error in its own ModelGenerateError
            raise RecordedFailure(f"{rec.error} (replayed from {self.path})")
        output = rec.output.model_copy(deep=True)
        return output, ModelCall.create(request, {"completion": output.completion})
