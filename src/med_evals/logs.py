"""Read our tasks' score values back from Inspect logs (reduced across epochs)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from inspect_ai.log import list_eval_logs, read_eval_log

from med_evals.scorers.reducers import majority_label


def expand_log_paths(paths: Iterable[str | Path]) -> list[str]:
    """Log files, with directories expanded to the Inspect logs inside them."""
    out: list[str] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out += [info.name for info in list_eval_logs(str(p))]
        else:
            out.append(str(p))
    return out


def score_values(log_path: str, scorer: str) -> tuple[str, list[dict[str, Any]]]:
    """(model, one score value per sample) of ``scorer`` in a log; epochs majority-reduced."""
    log = read_eval_log(log_path)
    if log.status != "success":
        raise ValueError(f"{log_path}: run did not complete (status {log.status})")
    per_sample: dict[Any, list] = defaultdict(list)
    for sample in log.samples or []:
        if sample.scores and scorer in sample.scores:
            per_sample[sample.id].append(sample.scores[scorer])
    if not per_sample:
        raise ValueError(f"{log_path}: no '{scorer}' scores (a log of another task?)")
    reduce = majority_label()
    values = [reduce(scores).value for scores in per_sample.values()]
    return log.eval.model, values
