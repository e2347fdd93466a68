"""Every table of the report also as CSV and LaTeX, in ``tables/`` beside report.md, each
linked under its table in report.md and report.html.

- **Which tables**: every table the report shows, whole (a wide table that report.md shows in
  parts is one file with all its columns), numbered in the report's order:
  ``tables/<hash>/<nn>-<slug>.csv`` and ``.tex``, the slug from the caption's first words; one
  folder per report, named by the first 12 hex digits of the sha256 of all its files (as the
  figures are named by their content: a new report's exports never take the place of an
  earlier report's, so a report.md always links the tables it was built with, and the folder
  moves into place in one rename: :func:`med_evals.commands.report.build.replace_report`).
- **CSV**: the table's values, numbers in full precision (a count an integer), a missing value
  empty, a reply the whole text the report puts behind its toggle; for people, as
  :func:`med_evals.outputs.files.write_csv` writes them (:func:`med_evals.outputs.text.csv_frame`: a
  text cell a spreadsheet would run as a formula is neutralised). It is written into the
  report's build folder, which is put in place whole.
- **LaTeX**: a ``booktabs`` ``table`` with the cells exactly as report.md shows them
  (:func:`med_evals.commands.report.document.cell_text`: three decimals, counts as integers,
  p-values
  ``<0.001``, ``—`` for a missing value), every text escaped
  (:func:`med_evals.outputs.text.latex_text`), numeric columns right-aligned, long text in
  wrapping columns.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals.commands.report.document import Document, Link, Table, Toggle, cell_text, is_missing
from med_evals.outputs.text import csv_frame, latex_text

#: the exports' folder, beside report.md
FOLDER = "tables"
#: a report's folder of exports, as this module names it (:func:`write_exports`)
EXPORT_NAME = re.compile(r"^[0-9a-f]{12}$")
#: text columns whose longest cell is longer than this wrap in LaTeX (``p{...}`` columns)
WRAP_AFTER = 40
_SLUG_WORDS = 6


def slug(caption: str) -> str:
    """The first few words of a caption, lowercase, joined by ``-`` (``table`` for none)."""
    words = re.findall(r"[a-z0-9]+", caption.lower())[:_SLUG_WORDS]
    return "-".join(words)[:60].strip("-") or "table"


def _csv_value(value: Any) -> Any:
    if isinstance(value, Toggle):
        return value.full
    if isinstance(value, Link):
        return value.text
    if is_missing(value):
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


def csv_text(table: Table) -> str:
    """The table as CSV for people (see the module's docstring)."""
    cols = list(table.rows[0]) if table.rows else []
    frame = pd.DataFrame([[_csv_value(r.get(c)) for c in cols] for r in table.rows],
                         columns=cols, dtype=object)
    return str(csv_frame(frame).to_csv(index=False))


def _numeric(table: Table, column: str) -> bool:
    present = [r.get(column) for r in table.rows if not is_missing(r.get(column))]
    return bool(present) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in present
    )


def _column_spec(table: Table, column: str) -> str:
    if _numeric(table, column):
        return "r"
    longest = max((len(cell_text(r.get(column), column)) for r in table.rows), default=0)
    return r"p{0.3\linewidth}" if longest > WRAP_AFTER else "l"


def latex_table(table: Table, number: int) -> str:
    """The table as a LaTeX ``table`` float (``booktabs``), its cells as report.md shows them."""
    cols = list(table.rows[0]) if table.rows else []
    spec = "".join(_column_spec(table, c) for c in cols)
    lines = [
        f"% Table {number} of the med_evals report. Needs \\usepackage{{booktabs}}.",
        r"\begin{table}[htbp]",
        r"\centering",
    ]
    if table.caption.strip():
        lines.append(f"\\caption{{{latex_text(table.caption.strip())}}}")
    lines += [
        f"\\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_text(c) for c in cols) + r" \\",
        r"\midrule",
        *(" & ".join(latex_text(cell_text(r.get(c), c)) for c in cols) + r" \\"
          for r in table.rows),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)


def write_exports(doc: Document, folder: Path) -> list[str]:
    """Write every table of ``doc`` as CSV and LaTeX into ``folder/tables/<hash>/`` (the module's
    docstring) and link each under its table (after its last part) in ``doc``; the paths
    written, relative to ``folder``, in order."""
    files: dict[int, tuple[str, str, str, str]] = {}  # table -> (csv name, csv, tex name, tex)
    for i, table in enumerate(doc.tables):
        if table.rows:
            stem = f"{i + 1:02d}-{slug(table.caption)}"
            files[i] = (f"{stem}.csv", csv_text(table), f"{stem}.tex", latex_table(table, i + 1))
    if not files:
        return []
    digest = hashlib.sha256()
    for name, csv, tex_name, tex in files.values():
        for part in (name, csv, tex_name, tex):
            digest.update(part.encode() + b"\0")
    where = f"{FOLDER}/{digest.hexdigest()[:12]}"
    (folder / where).mkdir(parents=True)
    written = []
    for name, csv, tex_name, tex in files.values():
        (folder / where / name).write_text(csv, encoding="utf-8", newline="")
        (folder / where / tex_name).write_text(tex, encoding="utf-8")
        written += [f"{where}/{name}", f"{where}/{tex_name}"]
    _link(doc, {i: (f"{where}/{f[0]}", f"{where}/{f[2]}") for i, f in files.items()})
    return written


def _link(doc: Document, names: dict[int, tuple[str, str]]) -> None:
    """A line under each table's last part: ``This table as CSV · LaTeX``."""
    last = {t: i for i, block in enumerate(doc.blocks)
            if (t := doc.table_of(block)) is not None}
    after = {i: t for t, i in last.items() if t in names}
    blocks: list[tuple[Any, ...]] = []
    for i, block in enumerate(doc.blocks):
        blocks.append(block)
        if i in after:
            t = after[i]
            csv, tex = names[t]
            blocks.append(doc.links("This table as", [("CSV", csv), ("LaTeX", tex)]))
    doc.blocks = blocks


def linked(markdown: str) -> set[str]:
    """The folders of exports (``tables/<hash>``) a report.md links."""
    return {m for m in re.findall(rf"\]\({FOLDER}/([^/)\s]+)/", markdown)}
