"""A small document model rendered twice: Markdown and one self-contained HTML file.

Every missing value prints as one mark, :data:`MISSING`. A table wider than
:data:`MAX_COLUMNS` is split into parts that repeat its key columns, and the HTML wraps long
cell text, so every table fits a 1,280-pixel page. A table has a short caption (what it is)
above it and, below it, a note (how its numbers are made) where it needs one.

A cell a formatting function writes from numbers (:func:`fmt_ci`, :func:`fmt_interval`) is a
:class:`Shown`: the text every rendering prints, holding the numbers it was written from, which
the CSV export writes as numbers, in full precision and one column each
(:mod:`med_evals.commands.report.exports`).

Every text of every block (headings, paragraphs, captions, column names, cells) is escaped when
it is rendered, whoever wrote it (a model name from a log or a sentence of ours):
:func:`med_evals.outputs.text.markdown_text` in report.md (it renders as the literal text, never
as HTML, a link, emphasis or a table row) and :func:`med_evals.outputs.text.html_text` in
report.html, both making control characters visible (``\\x1b``, ``\\u202e``). Our own formatting
is the block's kind: a heading, a note, a warning (a quote in Markdown), a table's caption (in
italics), never markup inside a text.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from med_evals.outputs.text import html_text, markdown_text

#: The one mark for a missing value: no valid prediction, not run, not applicable.
MISSING = "—"
#: Columns per table part (key columns included).
MAX_COLUMNS = 9

CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 2rem auto;
       max-width: 1180px; color: #1f2328; line-height: 1.45; padding: 0 1rem;
       box-sizing: border-box; }
h1 { border-bottom: 2px solid #d0d7de; padding-bottom: .3rem; }
h2 { margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .4rem 0 1.2rem; font-size: .85rem; max-width: 100%; }
caption { caption-side: top; text-align: left; font-style: italic; color: #57606a;
          padding-bottom: .3rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f6f8fa; }
tr:nth-child(even) td { background: #fbfbfc; }
figure { margin: 1rem 0 1.6rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #eaeef2; }
figcaption { font-size: .85rem; color: #57606a; }
.note { color: #57606a; font-size: .9rem; }
.warn { background: #fff8c5; border: 1px solid #d4a72c; padding: .5rem .8rem;
        overflow-wrap: anywhere; }
td details summary { cursor: pointer; overflow-wrap: anywhere; }
td .full { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 24rem; overflow-y: auto;
           margin-top: .3rem; padding: .3rem; background: #f6f8fa; }
"""


def cell_html(text: str) -> str:
    """Escaped cell text that may wrap after ``_``, ``/`` and ``=`` (long names, paths)."""
    out = html_text(text)
    for sep in ("_", "/", "="):
        out = out.replace(sep, sep + "<wbr>")
    return out


class Shown(str):
    """A cell's text as the report prints it (it *is* that ``str``), holding the numbers it was
    written from: ``parts``, each (a CSV column name, its value), the name a template in which
    ``{}`` stands for the cell's column (``"{} low"``: ``Accuracy (95% CI) low``); a part
    named ``"{}"`` is the column itself. The CSV export writes the parts, the other renderings
    the text."""

    parts: tuple[tuple[str, Any], ...]

    def __new__(cls, text: str, parts: Sequence[tuple[str, Any]]) -> Shown:
        self = super().__new__(cls, text)
        self.parts = tuple(parts)
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle: the text and its parts
        return Shown, (str(self), self.parts)


def shown_number(text: str, value: Any) -> Shown:
    """``text``, a number as printed (``33.3``), standing for ``value`` in full
    (``33.33333333333333``)."""
    return Shown(text, [("{}", value)])


def shown_interval(text: str, value: Any, interval: Sequence[float] | None) -> Shown:
    """``text`` standing for ``value`` (None: no point value, the interval alone) and its
    interval's bounds, in columns ``<column> low`` and ``<column> high``."""
    lo, hi = interval if interval is not None else (None, None)
    parts = [] if value is None else [("{}", value)]
    return Shown(text, [*parts, ("{} low", lo), ("{} high", hi)])


#: a published interval as the papers print it: ``0.67 (0.61-0.73)``
_NUM = r"\s*([-+]?(?:\d+\.?\d*|\.\d+))\s*"
_PRINTED_CI = re.compile(rf"{_NUM}\({_NUM}[-–]{_NUM}\)\s*")


def printed_interval(value: Any) -> Any:
    """A published cell ``0.67 (0.61-0.73)`` as a :class:`Shown` of its three numbers (the
    CSV's value, low and high columns); any other value as it is."""
    m = _PRINTED_CI.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        return value
    x, lo, hi = (float(g) for g in m.groups())
    return shown_interval(value, x, (lo, hi))


@dataclass(frozen=True)
class Toggle:
    """A cell showing ``short`` with ``full`` behind a toggle: HTML's ``<details>`` (no
    script); in Markdown, ``short`` alone. Both texts are escaped when rendered."""

    short: str
    full: str


@dataclass(frozen=True)
class Link:
    """A cell linking ``text`` to ``url``, a URL we built (its parts percent-encoded):
    ``<a href>`` in HTML, ``[text](url)`` in Markdown; the text is escaped."""

    text: str
    url: str


def _cell_md(value: Any, column: str = "") -> str:
    if isinstance(value, Toggle):
        return markdown_text(value.short)
    if isinstance(value, Link):
        return f"[{markdown_text(value.text)}]({quote(value.url, safe=_URL_SAFE)})"
    return markdown_text(cell_text(value, column))


def _cell_html(value: Any, column: str = "") -> str:
    if isinstance(value, Toggle):
        return (f"<details><summary>{html_text(value.short)}</summary>"
                f'<div class="full">{html_text(value.full)}</div></details>')
    if isinstance(value, Link):
        href = html_text(quote(value.url, safe=_URL_SAFE))
        return f'<a href="{href}">{cell_html(value.text)}</a>'
    return cell_html(cell_text(value, column))


#: a column of p-values, by its name: ``McNemar exact p``, ``p (Holm)``, ``p_value_vs_chance``,
#: ``grader_2/p_value_vs_chance``
P_COLUMN = re.compile(r"(?i)(?:^|[\s_/(])p(?:[-_ ]?values?)?(?:$|[\s_/)])")


def is_p_column(column: str) -> bool:
    return bool(P_COLUMN.search(column))


def cell_text(value: Any, column: str = "") -> str:
    """A cell as every rendering of the report shows it (report.md, report.html, the LaTeX
    exports): :func:`fmt`, but a number in a p-value column (:data:`P_COLUMN`) by
    :func:`fmt_p`; a :class:`Toggle` shows its short text, a :class:`Link` its text."""
    if isinstance(value, Toggle):
        return value.short
    if isinstance(value, Link):
        return value.text
    if is_p_column(column) and isinstance(value, int | float) and not isinstance(value, bool):
        return fmt_p(value)
    return fmt(value)


#: what :class:`Link` leaves of a URL as it is (the rest percent-encoded: no space, parenthesis
#: or quote ends a Markdown link or an HTML attribute early)
_URL_SAFE = "/:#%?=&.-_~"


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: Any, digits: int = 3) -> str:
    """A cell: floats to ``digits`` decimals, booleans yes/no, missing as :data:`MISSING`."""
    if is_missing(value) or value == "":
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_p(p: float) -> str:
    """A p-value: ``<0.001`` below 0.001, else three significant digits (``0.0123``,
    ``1.00``); :data:`MISSING` when missing."""
    if is_missing(p):
        return MISSING
    if p < 0.001:
        return "<0.001"
    return f"{p:#.3g}"


def p_text(p: float) -> str:
    """A p-value in a sentence: ``p < 0.001``, ``p = 0.0123``."""
    shown = fmt_p(p)
    return f"p < {shown[1:]}" if shown.startswith("<") else f"p = {shown}"


def fmt_ci(value: float, interval: Sequence[float], digits: int = 2) -> str:
    """``0.62 (0.55-0.69)`` (the study's style); the value alone when the interval is missing."""
    if is_missing(value):
        return MISSING
    lo, hi = interval
    if is_missing(lo) or is_missing(hi):
        return shown_interval(fmt(value, digits), value, None)
    return shown_interval(f"{value:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})", value,
                          (lo, hi))


def fmt_interval(interval: Sequence[float], digits: int = 2) -> str:
    """``0.55-0.69`` (a :class:`Shown` of its bounds), or :data:`MISSING`."""
    lo, hi = interval
    if is_missing(lo) or is_missing(hi):
        return MISSING
    return shown_interval(f"{lo:.{digits}f}-{hi:.{digits}f}", None, (lo, hi))


def split_columns(cols: list[str], keys: int, max_columns: int = MAX_COLUMNS) -> list[list[str]]:
    """Column sets of at most ``max_columns``, each starting with the first ``keys`` columns."""
    if len(cols) <= max_columns:
        return [cols]
    head, rest = cols[:keys], cols[keys:]
    width = max(1, max_columns - keys)
    return [head + rest[i : i + width] for i in range(0, len(rest), width)]


@dataclass(frozen=True)
class Table:
    """A table as it was given, whole (its rows, every column): what its exports hold
    (:mod:`med_evals.commands.report.exports`); report.md and report.html show it in parts when
    wide. ``caption``: what the table is, a short title; ``note``: how its numbers are made,
    printed below it; ``keys``: how many first columns name a row (repeated in each part)."""

    rows: list[dict[str, Any]]
    caption: str
    note: str = ""
    keys: int = 1


@dataclass
class Document:
    title: str
    blocks: list[tuple[Any, ...]] = field(default_factory=list)
    #: every table given, whole, in order
    tables: list[Table] = field(default_factory=list)
    #: each table part's block (and its note's, after the last part) and the index of its table
    #: in :attr:`tables`
    parts: list[tuple[tuple[Any, ...], int]] = field(default_factory=list)

    def h2(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def h3(self, text: str) -> None:
        self.blocks.append(("h3", text))

    def p(self, text: str, kind: str = "p") -> None:
        self.blocks.append((kind, text))

    def table(
        self, rows: list[dict[str, Any]], caption: str = "", keys: int = 1, empty: str = "",
        note: str = "",
    ) -> None:
        """A table (split into parts repeating the first ``keys`` columns when wide) under its
        ``caption``, its ``note`` below it (below its last part); with no rows, the ``empty``
        note instead (nothing when it is empty)."""
        if not rows:
            if empty:
                self.p(f"{caption}: {empty}" if caption else empty, "note")
            return
        cols = list(dict.fromkeys(c for r in rows for c in r))
        whole = [{c: r.get(c) for c in cols} for r in rows]
        self.tables.append(Table(whole, caption, note.strip(), keys))
        parts = split_columns(cols, keys)
        for i, part in enumerate(parts):
            cap = caption if len(parts) == 1 else f"{caption} (part {i + 1} of {len(parts)})"
            block = ("table", [{c: r.get(c) for c in part} for r in rows], cap)
            self.blocks.append(block)
            self.parts.append((block, len(self.tables) - 1))
        if note.strip():  # below the last part, one of the table's blocks
            below = ("note", note.strip())
            self.blocks.append(below)
            self.parts.append((below, len(self.tables) - 1))

    def table_of(self, block: tuple[Any, ...]) -> int | None:
        """The index in :attr:`tables` of the table a block is a part (or the note) of (None:
        not one)."""
        return next((i for b, i in self.parts if b is block), None)

    def links(self, text: str, links: Sequence[tuple[str, str]]) -> tuple[Any, ...]:
        """A line of ``text`` followed by links (each (text, a relative URL we built: its
        parts percent-encoded)), e.g. a table's exports; returned as a block, for the caller to
        place."""
        return ("links", text, tuple(links))

    def figure(self, path: Path | None, caption: str, empty: str = "") -> None:
        """A figure, or the ``empty`` note when there was nothing to draw (``path`` None)."""
        if path is None:
            self.p(f"{caption}: {empty or 'no data to draw'}.", "note")
        else:
            self.blocks.append(("img", path, caption))

    # --- rendering ------------------------------------------------------------------------

    def markdown(self, base: Path) -> str:
        """The document as Markdown: every text escaped (:func:`markdown_text`)."""
        out = [f"# {markdown_text(self.title)}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "h2":
                out += ["## " + markdown_text(block[1]), ""]
            elif kind == "h3":
                out += ["### " + markdown_text(block[1]), ""]
            elif kind in ("p", "note"):
                out += [markdown_text(block[1], one_line=False), ""]
            elif kind == "warn":
                lines = markdown_text(block[1], one_line=False).split("\n")
                out += [("> " + line).rstrip() for line in lines] + [""]
            elif kind == "table":
                rows, caption = block[1], block[2]
                cols = list(rows[0])
                if caption.strip():
                    out += [f"*{markdown_text(caption.strip())}*", ""]
                out.append("| " + " | ".join(markdown_text(c) for c in cols) + " |")
                out.append("|" + "---|" * len(cols))
                for r in rows:
                    out.append("| " + " | ".join(_cell_md(r.get(c), c) for c in cols) + " |")
                out.append("")
            elif kind == "links":
                links = " · ".join(f"[{markdown_text(t)}]({quote(u, safe=_URL_SAFE)})"
                                   for t, u in block[2])
                out += [f"{markdown_text(block[1])} {links}", ""]
            elif kind == "img":
                # parentheses too, so no text of the caption reads as the figure's link
                alt = markdown_text(block[2]).replace("(", "\\(").replace(")", "\\)")
                out += [f"![{alt}]({quote(block[1].relative_to(base).as_posix())})", ""]
        return "\n".join(out)

    def html(self) -> str:
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html_text(self.title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{html_text(self.title)}</h1>",
        ]
        for block in self.blocks:
            kind = block[0]
            if kind == "h2":
                parts.append(f"<h2>{html_text(block[1])}</h2>")
            elif kind == "h3":
                parts.append(f"<h3>{html_text(block[1])}</h3>")
            elif kind in ("p", "note", "warn"):
                parts.append(f'<p class="{kind}">{html_text(block[1])}</p>')
            elif kind == "table":
                rows, caption = block[1], block[2]
                cols = list(rows[0])
                cap = f"<caption>{html_text(caption)}</caption>" if caption else ""
                head = "".join(f"<th>{cell_html(c)}</th>" for c in cols)
                body = "".join(
                    "<tr>"
                    + "".join(f"<td>{_cell_html(r.get(c), c)}</td>" for c in cols)
                    + "</tr>"
                    for r in rows
                )
                parts.append(
                    f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                )

            elif kind == "links":
                links = " · ".join(
                    f'<a href="{html_text(quote(u, safe=_URL_SAFE))}">{html_text(t)}</a>'
                    for t, u in block[2]
                )
                parts.append(f'<p class="note">{html_text(block[1])} {links}</p>')
            elif kind == "img":
                data = base64.b64encode(block[1].read_bytes()).decode("ascii")
                alt = html_text(block[2])
                parts.append(
                    f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{alt}</figcaption></figure>"
                )
        parts.append("</body></html>")
        return "\n".join(parts)
