"""Export the accepted rewrites of ``counterfactual_build`` runs from their logs.

The builder's scorer writes nothing; each accepted rewrite's ``trials.csv`` row is in its score
metadata. :func:`export_counterfactuals` reads any number of logs (finished or not: an
interrupted run's completed samples count), takes for each trial (DOI) the first accepted rewrite
(logs in order of creation, then epoch), keeps the rows already in the output file, and writes
one CSV that ``oncology_rct -T trials_file=...`` reads. Epochs and re-runs that accept a trial
again are counted as duplicates and left out, so the file never holds a DOI twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai.log import read_eval_log

from med_evals.data import DatasetError, read_csv_checked
from med_evals.log_files import exists, expand_log_paths, missing

BUILD_TASK = "counterfactual_build"
SCORER = "rewrite_check"


@dataclass
class Accepted:
    """Accepted rows by DOI (first wins) and what was read."""

    rows: dict[str, dict[str, str]] = field(default_factory=dict)
    logs: int = 0
    samples: int = 0
    accepted: int = 0
    duplicates: int = 0
    skipped: list[str] = field(default_factory=list)


def read_accepted(paths: Iterable[str | Path]) -> Accepted:
    """The accepted rewrites in builder logs, one per DOI: the earliest log's, lowest epoch."""
    out = Accepted()
    logs = []
    files: list[str] = []
    for p in paths:  # listed by Inspect: local folders, s3://... alike
        found = expand_log_paths([p])
        if not found:  # a missing path or a file is passed on; a folder may hold nothing
            out.skipped.append(f"{p}: a folder with no Inspect log in it")
        files += found
    for path in files:
        try:
            log = read_eval_log(path)
        except Exception as ex:  # noqa: BLE001 - an unreadable file is reported, not fatal
            out.skipped.append(f"{path}: unreadable log ({unreadable_reason(path, ex)})")
            continue
        if log.eval.task.split("/")[-1] != BUILD_TASK:
            out.skipped.append(f"{path}: not a {BUILD_TASK} log ({log.eval.task})")
            continue
        logs.append(log)
    for log in sorted(logs, key=lambda lg: lg.eval.created):
        out.logs += 1
        for sample in sorted(log.samples or [], key=lambda s: (s.epoch, str(s.id))):
            score = (sample.scores or {}).get(SCORER)
            if score is None:
                continue
            out.samples += 1
            value = score.value if isinstance(score.value, dict) else {}
            if value.get("status") != "accepted":
                continue
            out.accepted += 1
            row = (score.metadata or {}).get("row")
            if not isinstance(row, dict) or "doi" not in row:
                raise DatasetError(f"{log.location}: sample {sample.id}: accepted without a row")
            if row["doi"] in out.rows:
                out.duplicates += 1
            else:
                out.rows[row["doi"]] = {k: str(v) for k, v in row.items()}
    return out


def unreadable_reason(path: str | Path, ex: BaseException) -> str:
    """Why Inspect could not read a log, in words (its own messages can be terse)."""
    import zipfile

    text = str(ex) or type(ex).__name__
    if isinstance(ex, FileNotFoundError) or missing(path):  # s3://: a ClientError, or
        return "no such file"  # "no recorder" for a name without .eval
    if isinstance(ex, IsADirectoryError):
        return "a folder, not a log file"
    if isinstance(ex, zipfile.BadZipFile | EOFError) or "EOCD" in text:
        return f"not a complete .eval file: truncated, or not an Inspect log ({text})"
    if str(path).endswith(".json"):
        return f"not a complete JSON log ({type(ex).__name__}: {text})"
    return f"{type(ex).__name__}: {text}"


def accepted_dois(resume: str | Sequence[str] | None) -> set[str]:
    """DOIs already done: those of an exported CSV, or accepted in builder logs."""
    if not resume:
        return set()
    items = [resume] if isinstance(resume, str) else list(resume)
    dois: set[str] = set()
    logs = []
    for item in items:
        if not exists(item):  # local or anywhere Inspect reads logs (s3://...)
            raise FileNotFoundError(f"resume: {item} does not exist (logs or an exported CSV)")
        if str(item).endswith(".csv"):
            dois |= set(pd.read_csv(item, dtype=str, keep_default_na=False)["doi"])
        else:
            logs.append(item)
    return dois | set(read_accepted(logs).rows) if logs else dois


def export_counterfactuals(paths: Iterable[str | Path], out: str | Path) -> dict[str, Any]:
    """Write the accepted rewrites to ``out`` (rows already there are kept); a summary."""
    from med_evals.outputs import check_file

    out = check_file(out, "--out")
    # the rows already there are kept: read (and checked) before any log
    existing = (
        read_csv_checked(out, ["doi"], header_only_ok=True)
        if out.exists() and out.stat().st_size
        else None
    )
    found = read_accepted(paths)
    kept = [] if existing is None else existing.to_dict("records")
    have = {r["doi"] for r in kept}
    new = [row for doi, row in found.rows.items() if doi not in have]
    rows = kept + new
    if rows:
        from med_evals.outputs import write_csv
        from med_evals.tasks.oncology_rct import read_trials

        columns = list(existing.columns) if existing is not None else list(rows[0])
        # read back by the task, not opened in a spreadsheet: every cell as the model wrote it
        # (no formula neutralising, which would change the text the task shows); written whole,
        # and only once the oncology task reads it (schema, unique DOIs, inverted targets)
        def check(written: Path) -> None:
            try:
                read_trials(written)
            except DatasetError as ex:  # named as the file it would have been
                raise DatasetError(str(ex).replace(str(written), str(out))) from None

        write_csv(pd.DataFrame(rows, columns=columns), out, "--out", for_people=False,
                  check=check)
    return {
        "logs": found.logs,
        "samples": found.samples,
        "accepted": found.accepted,
        "duplicates": found.duplicates,
        "already_in_output": len(found.rows) - len(new),
        "kept_from_output": len(kept),
        "written": len(new),
        "rows": len(rows),
        "skipped": found.skipped,
    }
