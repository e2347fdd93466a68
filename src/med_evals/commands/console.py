"""What several commands print the same way: a table (on the terminal, and as CSV with
``--out``), and the ``warning:`` lines for ``--prices`` entries that name no model of the runs
read."""

from __future__ import annotations

import sys

import pandas as pd

from med_evals.outputs.text import terminal


def emit_table(df: pd.DataFrame, out: str | None) -> None:
    """Print a table (log-derived text made safe for a terminal) and write it as CSV for a
    spreadsheet (written whole; formulas neutralised: :func:`med_evals.outputs.files.write_csv`)."""
    from med_evals.outputs.files import write_csv

    if out:
        write_csv(df, out, "--out")
        print(f"wrote {terminal(out)}")
    shown = df.copy()
    for col in shown.columns:  # text columns (object, or pandas' own string dtype)
        if not pd.api.types.is_numeric_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: terminal(v) if isinstance(v, str) else v)
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(shown.to_string(index=False))


def print_lines(prefix: str, lines: list[str]) -> None:
    """``<prefix>: <line>`` on stderr for each line (``skipped``, ``warning``, ``note``), each
    made one safe terminal line."""
    for line in lines:
        print(f"{prefix}: {terminal(line, one_line=True)}", file=sys.stderr)


def price_notes(prices: dict, models: list[str]) -> None:
    """One ``warning:`` line per ``--prices`` entry that names no model of the runs read (a
    typo: the closest model named), once each, before the command's output."""
    from med_evals.logs.usage import unmatched_prices

    print_lines("warning", list(dict.fromkeys(unmatched_prices(prices, models))))
