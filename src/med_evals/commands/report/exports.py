"""Every table of the report also as CSV and LaTeX, in ``tables/`` beside report.md, each
linked under its table in report.md and report.html.

- **Which tables**: every table the report shows, whole (a wide table that report.md shows in
  parts is one file with all its columns), numbered in the report's order:
  ``tables/<hash>/<nn>-<slug>.csv`` and ``.tex``, the slug from the caption's first words; one
  folder per report, named by the first 12 hex digits of the sha256 of all its files (as the
  figures are named by their content: a new report's exports never take the place of an
  earlier report's, so a report.md always links the tables it was built with, and the folder
  moves into place in one rename: :func:`med_evals.commands.report.build.replace_report`).
- **CSV** (:func:`csv_text`): the table's values, for a spreadsheet. Numbers are numbers, in
  full precision (a count an integer): a cell the report prints from numbers
  (:class:`~med_evals.commands.report.document.Shown`: ``0.62 (0.55-0.69)``, ``+0.12 (-0.05 to
  +0.30)``, ``3 / 5``) is one column per number (``Accuracy (95% CI)``, ``Accuracy (95% CI)
  low``, ``Accuracy (95% CI) high``). A missing value (—) is empty; a reply is the whole text
  the report puts behind its toggle, a viewer link its address. Every text cell is quoted and
  written by :func:`med_evals.outputs.text.csv_document`: controls and bidi characters visible
  (a carriage return as ``\\r``: no bare CR ends a row), a text a spreadsheet would run as a
  formula neutralised with a leading ``'`` (never a number).
- **LaTeX** (:func:`latex_table`): ``table`` floats with a ``booktabs`` ``tabular`` that
  compile in a plain ``\\documentclass{article}\\usepackage{booktabs}`` (no other package) and
  fit its text block (:data:`TEXT_WIDTH` x :data:`TEXT_HEIGHT`); the caption short, the note
  below the table in ``\\footnotesize``; the cells exactly as report.md shows them
  (:func:`med_evals.commands.report.document.cell_text`: three decimals, counts as integers,
  p-values ``<0.001``, ``—`` for a missing value), every text escaped
  (:func:`med_evals.outputs.text.latex_text`: nothing stops pdflatex, controls and characters
  it cannot print shown as escapes). How a table is fitted (:func:`layout`), the first that
  fits: its natural width at ``\\small`` (``l`` text and ``r`` number columns), at ``\\small``
  with less space between columns, at ``\\footnotesize``; then wrapping columns (``p{}``, text
  ragged right, numbers ragged left, a long name or path broken after ``/ _ = , ; : | -`` or
  within a run of :data:`~med_evals.outputs.text.LATEX_RUN` characters) at ``\\small``, unless
  ``\\footnotesize`` or ``\\scriptsize`` makes it at least a fifth shorter (:func:`best`);
  else the table is split into parts by columns, each repeating the key columns (as report.md
  splits it). A table taller than the page is split by rows into floats that keep its number
  (``Table 3: ... (continued)``). Widths are estimated from Computer Modern's character widths
  (:data:`CMR_EM`); ``tests/report/test_exports_latex.py`` compiles every export of real
  reports with pdflatex and fails on an error, an overfull box or a float too large for the
  page.
"""

from __future__ import annotations

import functools
import hashlib
import math
import numbers
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from med_evals.commands.report.document import (
    MISSING,
    Document,
    Link,
    Shown,
    Table,
    Toggle,
    cell_text,
    is_missing,
)
from med_evals.outputs.text import csv_document, latex_printed, latex_segments, latex_text

#: the exports' folder, beside report.md
FOLDER = "tables"
#: a report's folder of exports, as this module names it (:func:`write_exports`)
EXPORT_NAME = re.compile(r"^[0-9a-f]{12}$")
_SLUG_WORDS = 6


def slug(caption: str) -> str:
    """The first few words of a caption, lowercase, joined by ``-`` (``table`` for none)."""
    words = re.findall(r"[a-z0-9]+", caption.lower())[:_SLUG_WORDS]
    return "-".join(words)[:60].strip("-") or "table"


# --- CSV ----------------------------------------------------------------------------------


def _csv_value(value: Any) -> Any:
    if isinstance(value, Toggle):
        return value.full
    if isinstance(value, Link):
        return value.url
    if is_missing(value) or (isinstance(value, str) and value in ("", MISSING)):
        return None
    return value


def csv_columns(table: Table) -> list[tuple[str, str, str]]:
    """The CSV's columns: (its name, the table's column, the part of a
    :class:`~med_evals.commands.report.document.Shown` cell it holds: a name template, ``{}``
    the column itself). A column of plain values is one column; a column with cells printed
    from numbers is one column per number (and the column itself where some cell is plain)."""
    cols = list(table.rows[0]) if table.rows else []
    out = []
    for c in cols:
        templates: dict[str, None] = {}
        plain = False
        for r in table.rows:
            v = r.get(c)
            if isinstance(v, Shown):
                templates.update(dict.fromkeys(t for t, _ in v.parts))
            elif _csv_value(v) is not None:
                plain = True
        if not templates:
            out.append((c, c, "{}"))
            continue
        names = list(templates)
        if plain and "{}" not in names:
            names.insert(0, "{}")
        out += [(t.format(c), c, t) for t in names]
    return out


def csv_text(table: Table) -> str:
    """The table as CSV for people (see the module's docstring)."""
    columns = csv_columns(table)

    def value(row: dict[str, Any], col: str, template: str) -> Any:
        v = row.get(col)
        if isinstance(v, Shown):
            return _csv_value(dict(v.parts).get(template))
        return _csv_value(v) if template == "{}" else None

    return csv_document([name for name, _, _ in columns],
                        ([value(r, c, t) for _, c, t in columns] for r in table.rows))


# --- LaTeX: sizes -------------------------------------------------------------------------

#: the text block the LaTeX exports are sized for, in pt: a plain ``article``'s (10 pt, letter
#: or A4 paper); a column is a fraction of ``\linewidth``
TEXT_WIDTH = 345.0
TEXT_HEIGHT = 550.0
#: the share of :data:`TEXT_HEIGHT` a float may fill (its caption, rows and note)
HEIGHT_SHARE = 0.9
#: a ``\\clearpage`` before every this many floats of one table (LaTeX holds 18 unplaced)
FLUSH = 10


@dataclass(frozen=True)
class Size:
    """A font size of the tables: its command, size and line height (pt) in a 10 pt article,
    and how much wider its design is than Computer Modern 10 pt scaled down (the TFM files'
    widest ratio)."""

    command: str
    pt: float
    line: float
    wider: float


SMALL = Size(r"\small", 9.0, 11.0, 1.029)
FOOTNOTE = Size(r"\footnotesize", 8.0, 9.5, 1.063)
SCRIPT = Size(r"\scriptsize", 7.0, 8.0, 1.165)
#: a safety margin over the estimated widths (kerning, rounding)
MARGIN = 1.05
#: Computer Modern Roman 10 pt's width of each printable ASCII character, in thousandths of an
#: em (cmr10.tfm), as the escapes of :data:`~med_evals.outputs.text.LATEX_ESCAPES` print them
#: (``<`` ``>`` from the math fonts, ``\\ { } |`` from the symbol font)
CMR_EM = dict(zip(
    "".join(chr(c) for c in range(0x20, 0x7F)),
    (333, 278, 500, 833, 500, 833, 778, 278, 389, 389, 500, 778, 278, 333, 278, 500, 500, 500,
     500, 500, 500, 500, 500, 500, 500, 500, 278, 278, 778, 778, 778, 472, 778, 750, 708, 722,
     764, 681, 653, 785, 750, 361, 514, 778, 625, 917, 750, 778, 681, 778, 736, 556, 722, 750,
     750, 1028, 750, 750, 611, 278, 500, 278, 500, 500, 278, 500, 556, 444, 556, 444, 306, 500,
     556, 278, 306, 528, 278, 833, 556, 500, 556, 528, 392, 394, 389, 556, 528, 722, 528, 528,
     444, 500, 278, 500, 500),
    strict=True,
))
#: the symbols :func:`~med_evals.outputs.text.latex_text` prints as commands
_SYMBOL_EM = {"—": 1000, "–": 500, "−": 778, "≥": 778, "≤": 778, "±": 778, "×": 778,
              "·": 278, "→": 1000, "√": 833, "…": 1000, "α": 640, "κ": 580}


def _char_em(ch: str) -> int:
    if ch in CMR_EM:
        return CMR_EM[ch]
    if ch in _SYMBOL_EM:
        return _SYMBOL_EM[ch]
    base = unicodedata.normalize("NFKD", ch)[:1]
    return CMR_EM.get(base, 1000)  # an accented letter as its letter; anything else 1 em


@functools.lru_cache(maxsize=1 << 16)
def text_width(printed: str, size: Size) -> float:
    """The estimated width in pt of ``printed`` (text as pdflatex prints it:
    :func:`~med_evals.outputs.text.latex_printed`) set in ``size``."""
    return sum(_char_em(c) for c in printed) / 1000 * size.pt * size.wider * MARGIN


@functools.lru_cache(maxsize=1 << 16)
def _printed(text: str) -> str:
    return latex_printed(text)


@functools.lru_cache(maxsize=1 << 16)
def _pieces(text: str, numeric: bool) -> tuple[str, ...]:
    """The pieces of ``text`` no line break splits, as pdflatex prints them: a number's at its
    spaces only, a text's at its :func:`~med_evals.outputs.text.latex_segments` too."""
    if numeric:
        return tuple(p for p in _printed(text).split(" ") if p)
    return tuple(s for s in latex_segments(text) if s.strip())


# --- LaTeX: layout ------------------------------------------------------------------------


@dataclass(eq=False)
class Column:
    """A column to lay out: its header and its cells as report.md prints them, and whether it
    holds numbers (right-aligned, not broken but at spaces)."""

    name: str
    cells: tuple[str, ...]
    numeric: bool
    _widths: dict[tuple[str, Size], float] = field(default_factory=dict, repr=False)

    def pieces(self, text: str, header: bool) -> tuple[str, ...]:
        """The pieces of ``text`` no line break splits, as pdflatex prints them."""
        return _pieces(text, self.numeric and not header)

    def natural(self, size: Size) -> float:
        """The widest cell (or header) on one line."""
        if ("natural", size) not in self._widths:
            self._widths["natural", size] = max(
                text_width(_printed(t), size) for t in (self.name, *self.cells))
        return self._widths["natural", size]

    def least(self, size: Size) -> float:
        """The widest piece no line break splits (the header's or a cell's)."""
        if ("least", size) not in self._widths:
            pieces = [*self.pieces(self.name, True),
                      *(p for t in set(self.cells) for p in self.pieces(t, False))]
            self._widths["least", size] = max((text_width(p, size) for p in pieces),
                                              default=0.0)
        return self._widths["least", size]

    def lines(self, text: str, width: float, size: Size, header: bool = False) -> int:
        """The lines ``text`` takes in a column ``width`` pt wide (greedy, as TeX fills a
        ragged line)."""
        space = text_width(" ", size)
        lines, used = 1, 0.0
        for piece in self.pieces(text, header):
            w = text_width(piece, size)
            if used and used + space + w > width:
                lines, used = lines + 1, w
            else:
                used += (space if used else 0.0) + w
        return lines


@dataclass(frozen=True)
class Layout:
    """How one part of a table is set: its columns, font size, space between columns (pt) and
    each column's width (None: its natural width, an ``l`` or ``r`` column)."""

    columns: tuple[Column, ...]
    size: Size
    sep: float
    widths: tuple[float, ...] | None

    @property
    def wraps(self) -> bool:
        return self.widths is not None

    def spec(self) -> str:
        if self.widths is None:
            return "@{}" + "".join("r" if c.numeric else "l" for c in self.columns) + "@{}"
        # each width a share of the line, rounded down: the columns never sum to more
        return "@{}" + "".join(f"p{{{math.floor(1000 * w / TEXT_WIDTH) / 1000:.3f}\\linewidth}}"
                               for w in self.widths) + "@{}"

    def height(self) -> float:
        """The estimated height of the header and every row (pt)."""
        rows = zip(*(c.cells for c in self.columns), strict=True)
        return (self.row_height([c.name for c in self.columns], header=True)
                + sum(self.row_height(r) for r in rows))

    def row_height(self, texts: Sequence[str], header: bool = False) -> float:
        if self.widths is None:
            return self.size.line
        return self.size.line * max(c.lines(t, w, self.size, header)
                                    for c, t, w in zip(self.columns, texts, self.widths,
                                                       strict=True))


#: the sizes tried, in order: (font size, space between columns in pt, wrapping columns)
ATTEMPTS = (
    (SMALL, 6.0, False), (SMALL, 4.0, False), (FOOTNOTE, 4.0, False),
    (SMALL, 4.0, True), (FOOTNOTE, 4.0, True), (SCRIPT, 3.0, True),
)


def _fit(columns: Sequence[Column], size: Size, sep: float, wrap: bool) -> Layout | None:
    room = TEXT_WIDTH - 2 * sep * (len(columns) - 1)
    natural = [c.natural(size) for c in columns]
    if not wrap:
        return Layout(tuple(columns), size, sep, None) if sum(natural) <= room else None
    least = [min(c.least(size), n) for c, n in zip(columns, natural, strict=True)]
    if sum(least) > room:
        return None
    return Layout(tuple(columns), size, sep, _widths(natural, least, room))


def _widths(natural: Sequence[float], least: Sequence[float], room: float) -> tuple[float, ...]:
    """Column widths that fill ``room``: each column ``natural / k`` wide (its longest cell on
    about ``k`` lines), never under its ``least``, for the smallest ``k`` that fits (found by
    bisection), so that no column wraps much more than another; what is left over goes to
    the columns still under their natural width."""

    def at(k: float) -> list[float]:
        return [max(m, n / k) for n, m in zip(natural, least, strict=True)]

    lo, hi = 1.0, max([n / m for n, m in zip(natural, least, strict=True) if m > 0] + [1.0])
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if sum(at(mid)) <= room else (mid, hi)
    widths = at(hi)
    left = room - sum(widths)
    want = [n - w for n, w in zip(natural, widths, strict=True)]
    if left > 0 and sum(want) > 0:
        widths = [w + left * x / sum(want) for w, x in zip(widths, want, strict=True)]
    return tuple(widths)


#: a smaller font is taken for a wrapped table only when it makes the table this much shorter
SHORTER = 0.8


def best(columns: Sequence[Column]) -> Layout | None:
    """How ``columns`` are set: the first of :data:`ATTEMPTS` at its natural width that fits
    :data:`TEXT_WIDTH`; else, of the wrapped attempts that fit, the first unless a later (a
    smaller font) is at most :data:`SHORTER` of its height; None when none fits."""
    wrapped: list[Layout] = []
    for size, sep, wrap in ATTEMPTS:
        found = _fit(columns, size, sep, wrap)
        if found is not None and not wrap:
            return found
        if found is not None:
            wrapped.append(found)
    chosen = None
    for lay in wrapped:
        if chosen is None or lay.height() <= SHORTER * chosen.height():
            chosen = lay
    return chosen


def layout(columns: Sequence[Column], keys: int = 1) -> list[Layout]:
    """The table set as :func:`best` sets it when it fits :data:`TEXT_WIDTH` whole; else in
    parts by columns, each part its first ``keys`` columns (fewer, where the keys and one more
    column do not fit) and as many more as fit wrapped at ``\\scriptsize``, as even as they
    fit, each part then set by :func:`best`."""
    if (whole := best(columns)) is not None:
        return [whole]
    size, sep, _ = ATTEMPTS[-1]
    for k in range(min(keys, len(columns) - 1), -1, -1):
        head, rest = list(columns[:k]), list(columns[k:])
        if any(not _part_fits(head, [c], size, sep) for c in rest):
            continue  # the keys leave no room for some column: fewer keys
        parts: list[list[Column]] = []
        for c in rest:
            if parts and _part_fits(head, [*parts[-1], c], size, sep):
                parts[-1].append(c)
            else:
                parts.append([c])
        # as many parts as filling them in turn takes, but as even as they fit
        n = len(parts)
        even = [rest[len(rest) * i // n:len(rest) * (i + 1) // n] for i in range(n)]
        if all(_part_fits(head, part, size, sep) for part in even):
            parts = even
        return [best([*head, *part]) or _least(head + part, size, sep) for part in parts]
    return [_least([c], size, sep) for c in columns]


#: the share of the line a part of a split table keeps for each key column (at most its
#: natural width): the columns that name a row are not squeezed to fit one more number
KEY_SHARE = 0.25


def _part_fits(head: Sequence[Column], part: Sequence[Column], size: Size, sep: float) -> bool:
    room = TEXT_WIDTH - 2 * sep * (len(head) + len(part) - 1)
    keys = sum(max(c.least(size), min(c.natural(size), KEY_SHARE * TEXT_WIDTH)) for c in head)
    return keys + sum(min(c.least(size), c.natural(size)) for c in part) <= room


def _least(columns: Sequence[Column], size: Size, sep: float) -> Layout:
    """Columns at their least widths (only where even one column alone is wider than the
    page: a piece of text :data:`~med_evals.outputs.text.LATEX_RUN` characters never is)."""
    return Layout(tuple(columns), size, sep, tuple(max(c.least(size), 1.0) for c in columns))


def _columns(table: Table) -> list[Column]:
    names = list(table.rows[0]) if table.rows else []
    out = []
    for name in names:
        values = [r.get(name) for r in table.rows]
        present = [v for v in values if not is_missing(v) and v not in ("", MISSING)]
        numeric = bool(present) and all(
            isinstance(v, Shown | numbers.Real) and not isinstance(v, bool) for v in present)
        out.append(Column(name, tuple(cell_text(v, name) for v in values), numeric))
    return out


# --- LaTeX: writing -----------------------------------------------------------------------


def _cell(text: str, column: Column, lay: Layout, header: bool = False) -> str:
    if not lay.wraps:
        return latex_text(text)
    align = r"\raggedleft " if column.numeric else r"\raggedright "
    return align + latex_text(text, breakable=not column.numeric or header)


def _row(texts: Sequence[str], lay: Layout, header: bool = False) -> str:
    end = r" \tabularnewline" if lay.wraps else r" \\"
    return " & ".join(_cell(t, c, lay, header)
                      for t, c in zip(texts, lay.columns, strict=True)) + end


def _lines_of(text: str, size: Size) -> int:
    """The lines a paragraph of ``text`` takes across the text block (one more for the
    slack of a ragged line)."""
    return math.ceil(text_width(latex_printed(text), size) / TEXT_WIDTH) + 1 if text else 0


#: the height of a float's three rules and the space around them, and of the space between
#: its caption and its table and its note (pt; booktabs' and article's defaults, rounded up)
RULES = 14.0
SKIPS = 16.0
#: a caption's font: the document's (10 pt, 12 pt lines)
NORMAL = Size(r"\normalsize", 10.0, 12.0, 1.0)


def _float(number: int, caption: str, lay: Layout, rows: Sequence[Sequence[str]],
           first: bool, note: str) -> list[str]:
    lines = [r"\begin{table}[htbp]", r"\centering"]
    if not first:
        lines.append(r"\addtocounter{table}{-1}")  # a float of the same table: its number
    if caption:
        lines.append(f"\\caption{{{latex_text(caption, breakable=True)}}}")
    if first:
        lines.append(f"\\label{{tab:med-evals-{number:02d}}}")
    lines += [
        lay.size.command,
        f"\\setlength{{\\tabcolsep}}{{{lay.sep:g}pt}}",
        f"\\begin{{tabular}}{{{lay.spec()}}}",
        r"\toprule",
        _row([c.name for c in lay.columns], lay, header=True),
        r"\midrule",
        *(_row(r, lay) for r in rows),
        r"\bottomrule",
        r"\end{tabular}",
    ]
    if note:
        lines += [r"\par\smallskip", r"{\footnotesize\raggedright "
                  + latex_text(note, breakable=True) + r"\par}"]
    lines.append(r"\end{table}")
    return lines


def latex_table(table: Table, number: int) -> str:
    """The table as LaTeX ``table`` floats (``booktabs``), its cells as report.md shows them,
    set to fit a plain article's page (the module's docstring): one float, or one per part and
    per page of rows, every one after the first numbered as the first."""
    columns = _columns(table)
    parts = layout(columns, table.keys)
    caption = table.caption.strip()
    longest = f"{caption} (part {len(parts)} of {len(parts)}) (continued)"
    room = (TEXT_HEIGHT * HEIGHT_SHARE - NORMAL.line * _lines_of(longest, NORMAL)
            - FOOTNOTE.line * _lines_of(table.note, FOOTNOTE) - RULES - SKIPS)
    floats: list[tuple[Layout, list[list[str]], str]] = []
    for i, lay in enumerate(parts):
        index = [columns.index(c) for c in lay.columns]
        rows = [[columns[j].cells[k] for j in index] for k in range(len(table.rows))]
        part = f" (part {i + 1} of {len(parts)})" if len(parts) > 1 else ""
        left = room - lay.row_height([c.name for c in lay.columns], header=True)
        chunk: list[list[str]] = []
        used = 0.0
        for r in rows:
            h = lay.row_height(r)
            if chunk and used + h > left:
                floats.append((lay, chunk, part))
                chunk, used = [], 0.0
            chunk.append(r)
            used += h
        floats.append((lay, chunk, part))
    out = [
        f"% Table {number} of the med_evals report: {latex_printed(caption) or '(no caption)'}",
        "% Needs \\usepackage{booktabs}; sized for a 345 pt text block (article, 10 pt).",
    ]
    for k, (lay, rows, part) in enumerate(floats):
        again = k > 0 and floats[k - 1][0] is lay  # the part's rows go on
        if again or (k and k % FLUSH == 0):
            # the page before is full (or many floats wait): place them before going on
            out.append(r"\clearpage")
        cap = f"{caption}{part}" + (" (continued)" if again else "")
        note = table.note if k + 1 == len(floats) else ""
        out += _float(number, cap.strip(), lay, rows, k == 0, note)
    out.append("")
    return "\n".join(out)


# --- writing ------------------------------------------------------------------------------


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
