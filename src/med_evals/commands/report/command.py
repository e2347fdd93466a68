"""``med-evals report LOGS --out DIR``: the report written, and what the console says of it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from med_evals.commands.console import price_notes, print_lines
from med_evals.outputs.exit_codes import FAILED, USAGE, CommandError
from med_evals.outputs.text import terminal


def report_command(logs: Sequence[str | Path], out: str, allow_mixed: bool = False,
                   reference: str | None = None, prices: str | None = None) -> int:
    """Write the report of ``logs`` into ``out`` (:func:`build_report`), the tokens priced
    with the ``prices`` file; exit 1 when some study runs could not be shown (listed as
    ``skipped:``)."""
    from med_evals.commands.report.build import build_report, not_shown_line
    from med_evals.logs.files import LogPathError
    from med_evals.logs.labels import ReportError
    from med_evals.logs.usage import read_prices

    priced = read_prices(prices)  # before any log is read
    try:
        result = build_report(logs, out, allow_mixed=allow_mixed, reference=reference,
                              prices=priced)
    except (ReportError, LogPathError) as ex:  # LogPathError: an s3://... it cannot list
        raise CommandError(str(ex), USAGE) from None
    print_lines("skipped", result.skipped)
    price_notes(priced, result.models)  # a --prices entry that names no model: a typo
    print_lines("warning", result.warnings)
    print_lines("note", result.notes)
    print(terminal(f"wrote {result.markdown}, {result.html}, {len(result.figures)} figures and "
                   f"{len(result.tables)} tables as CSV and LaTeX"))
    if result.not_shown:
        print(f"med-evals report: error: {not_shown_line(result.shown, result.not_shown)}: "
              "listed above as skipped", file=sys.stderr)
        return FAILED
    return 0
