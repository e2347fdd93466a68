"""Replayed runs for the report's tests: a reply function becomes a JSONL recording that the
``replay/`` provider serves (with the recorded model's name), run through the real task."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai.log import EvalLog

from ..support.evals import inspect_eval

Reply = Callable[[str, str, int], str | None]  # (input text, sample id, epoch) -> reply


def prompt_text(sample: Any) -> str:
    return sample.input if isinstance(sample.input, str) else sample.input[-1].text


def replay_run(
    task: Task,
    reply: Reply,
    model: str,
    out: Path,
    epochs: int = 1,
    name: str | None = None,
) -> EvalLog:
    """Record ``reply`` for every sample and epoch of ``task`` as ``model``, replay it."""
    out.mkdir(parents=True, exist_ok=True)
    rec = out / "recordings" / f"{name or re.sub(r'[^A-Za-z0-9]+', '-', model)}.jsonl"
    rec.parent.mkdir(exist_ok=True)
    with rec.open("w", encoding="utf-8") as f:
        for sample in task.dataset:
            for epoch in range(1, epochs + 1):
                text = reply(prompt_text(sample), str(sample.id), epoch)
                row = {"id": sample.id, "epoch": epoch, "reply": text, "model": model}
                if text is None:
                    row["error"] = "HTTP 500 (recorded)"
                f.write(json.dumps(row) + "\n")
    [log] = inspect_eval(
        task, model=f"replay/{rec}", epochs=epochs, log_dir=str(out / "logs"), display="none"
    )
    assert log.status == "success", log.error
    return log


def logged(log: EvalLog, key: str) -> float:
    """A metric of the log's results by its key (NaN when absent)."""
    for score in log.results.scores if log.results else []:
        if key in score.metrics:
            return float(score.metrics[key].value)
    return math.nan


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b
