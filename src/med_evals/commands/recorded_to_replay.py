"""Recorded oncology replies as replay files, so ``replay/<file>`` re-runs them through the task.

The study groups published their models' raw replies as tables (see
:mod:`med_evals.commands.score_recorded`: the wide ``<model>_<condition>_response_raw`` layout
or a long table). :func:`write_replays` writes one JSONL replay file per model, keyed by the
task's own sample ids (``<condition>-<trial:03d>``), so that::

    inspect eval med_evals/oncology_rct -T condition=<the recorded conditions> \\
        --model replay/<dir>/<model>.jsonl

scores them in Inspect (log, viewer, flip rates) with the numbers ``med-evals score-recorded``
prints. With the trials dataset, each table row is matched to its trial by DOI and its ground
truth is checked against the dataset's; without it, the table's row order is the trial index.
A blank recorded reply is written as one space (text without a label: INVALID, as
``score-recorded`` counts it, following the study), and a row the study parsed ERROR as a failed
call (``reply`` null, with an ``error``), which the task scores ERROR.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from med_evals.commands.score_recorded import read_recorded, scored_reply
from med_evals.data.datasets import DatasetError
from med_evals.outputs.exit_codes import USAGE, CommandError
from med_evals.outputs.files import check_folder, make_folder, write_text
from med_evals.scorers.oncology_rct import invert_outcome
from med_evals.tasks.oncology_conditions import COUNTERFACTUAL

TASK = "oncology_rct"


def align_to_trials(table: Path, replies: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Replace a wide table's row numbers by the dataset's trial index, matched by DOI."""
    head = pd.read_csv(table, nrows=0).columns  # read_recorded has checked the file
    if "doi" not in head or "trial" in head or "trial_idx" in head:
        return replies  # a long table already carries the dataset's trial index
    dois = pd.read_csv(table, usecols=["doi"], dtype=str, keep_default_na=False)["doi"]
    index = {d.strip().lower(): i for i, d in enumerate(trials["doi"])}
    row_to_trial = {}
    for row, doi in enumerate(dois):
        if doi.strip().lower() not in index:
            raise DatasetError(
                f"{table}: row {row + 1}, column 'doi': {doi!r} is not in the trials"
            )
        row_to_trial[row] = index[doi.strip().lower()]
    out = replies.copy()
    out["trial"] = out["trial"].map(row_to_trial)
    truth = trials["Annotation_accept"].reset_index(drop=True)
    for r in out.itertuples():
        want = invert_outcome(truth[r.trial]) if r.condition in COUNTERFACTUAL else truth[r.trial]
        if r.target != want:
            raise DatasetError(
                f"{table}: trial {r.trial} ({r.condition}): ground truth {r.target!r} differs "
                f"from the trials dataset's {want!r}"
            )
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name))


def replay_rows(replies: pd.DataFrame, task: str = TASK) -> dict[str, list[dict]]:
    """JSONL rows per model: the task's sample id, epoch 1, the raw reply; a blank reply as one
    space (INVALID), a recorded ERROR as a failed call (see the module docstring)."""
    rows: dict[str, list[dict]] = {}
    for r in replies.itertuples():
        reply, error = scored_reply(r.reply, getattr(r, "error", None))
        row = {
            "task": task,
            "id": f"{r.condition}-{int(r.trial):03d}",
            "epoch": 1,
            "reply": reply,
            "model": str(r.model),
        }
        if error is not None:
            row["error"] = error
        rows.setdefault(str(r.model), []).append(row)
    return rows


def write_replays(
    table: str | Path, out_dir: str | Path, trials: pd.DataFrame | None = None
) -> dict[str, Path]:
    """One replay JSONL per model of a recorded table; returns {model: path}."""
    table, out_dir = Path(table), Path(out_dir)
    check_out_dir(out_dir)
    replies = read_recorded(table, trials)
    if trials is not None:
        replies = align_to_trials(table, replies, trials)
    make_folder(out_dir)
    written = {}
    for model, rows in replay_rows(replies).items():
        path = out_dir / f"{_safe(model)}.jsonl"
        write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        written[model] = path
    return written


def check_out_dir(out_dir: Path) -> None:
    """Raise :class:`CommandError` (exit 2) unless ``out_dir`` is a folder that can be written
    in, or can be made in an existing one (:func:`med_evals.outputs.files.check_folder`): checked
    before any work."""
    if not out_dir.parent.is_dir() and not out_dir.is_dir():
        raise CommandError(f"--out {out_dir}: the folder {out_dir.parent} does not exist", USAGE)
    check_folder(out_dir, "--out")


def recorded_conditions(path: Path) -> list[str]:
    """The conditions of a replay file, in first-seen order."""
    seen: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            cond = json.loads(line)["id"].rsplit("-", 1)[0]
            if cond not in seen:
                seen.append(cond)
    return seen


def inspect_commands(written: dict[str, Path]) -> Sequence[str]:
    """The ``inspect eval`` command that replays each written file."""
    return [
        f"inspect eval med_evals/{TASK} -T condition={','.join(recorded_conditions(p))} "
        f"--model replay/{p}"
        for p in written.values()
    ]


def recorded_to_replay_command(table: str | Path, out: str | Path, data_dir: str | None = None,
                               by_row: bool = False) -> int:
    """``med-evals recorded-to-replay``: write the replies of ``table`` as one replay file per
    model in ``out`` and print the ``inspect eval`` command that replays each; ``by_row``:
    the table's rows are trials 0..n-1 (no DOI match against the trials dataset, which is
    then not read)."""
    check_out_dir(Path(out))
    trials = None
    if not by_row:
        from med_evals.tasks.oncology_rct import load_trials

        trials, _ = load_trials(data_dir)
    try:
        written = write_replays(table, out, trials)
    except OSError as ex:
        raise CommandError(f"cannot write the replay files in {out}: {ex}", USAGE) from None
    from med_evals.outputs.text import terminal

    for model, path in written.items():  # model names from the table: anyone's text
        print(terminal(f"{model}: {path}", one_line=True))
    print("\nreplay them through the task:")
    for cmd in inspect_commands(written):
        print(terminal(f"  {cmd}", one_line=True))
    return 0
