"""``med-evals export-counterfactuals``: the accepted rewrites of ``counterfactual_build`` runs,
written from their logs as a ``trials.csv`` the oncology task reads.

The builder's scorer writes nothing; each accepted rewrite's ``trials.csv`` row is in its score
metadata. :func:`export_counterfactuals` reads any number of logs (finished or not: an
interrupted run's completed samples count) with
:func:`~med_evals.tasks.counterfactual.read_accepted` (the builder's ``resume`` reads them the
same way), takes for each trial (DOI) the first accepted rewrite (logs in order of creation,
then epoch), keeps the rows already in the output file, and writes one CSV that ``oncology_rct
-T trials_file=...`` reads. Epochs and re-runs that accept a trial again are counted as
duplicates and left out, so the file never holds a DOI twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals.data.datasets import DatasetError, read_csv_checked
from med_evals.tasks.counterfactual import read_accepted


def export_counterfactuals(paths: Iterable[str | Path], out: str | Path) -> dict[str, Any]:
    """Write the accepted rewrites to ``out`` (rows already there are kept); a summary."""
    from med_evals.outputs.files import check_file

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
        from med_evals.outputs.files import write_csv
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


def export_counterfactuals_command(logs: Iterable[str | Path], out: str | Path) -> int:
    """``med-evals export-counterfactuals``: write the accepted rewrites of ``logs`` to
    ``out`` and print the summary; nothing accepted (each skipped log listed), or a location
    that cannot be listed: :class:`CommandError` (exit 2)."""
    from med_evals.commands.console import print_lines
    from med_evals.logs.files import LogPathError
    from med_evals.outputs.exit_codes import USAGE, CommandError
    from med_evals.outputs.files import check_file

    check_file(out, "--out")  # before any log is read
    try:
        summary = export_counterfactuals(logs, out)
    except LogPathError as ex:  # a location that cannot be listed (s3://...: unreachable)
        raise CommandError(str(ex), USAGE) from None
    skipped = summary.pop("skipped")
    print_lines("skipped", skipped)
    print(", ".join(f"{k} {v}" for k, v in summary.items()))
    if not summary["rows"]:
        why = f" ({len(skipped)} skipped, listed above)" if skipped else ""
        raise CommandError(f"no accepted rewrite in the logs{why}; nothing written", USAGE)
    print(f"wrote {out}")
    return 0
