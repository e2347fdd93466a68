"""Text from a log, escaped for where it goes: one function per destination.

A model name, a reply, a file name or a task argument read back from a log is anyone's text: a
recorded model may be named ``\\x1b]0;title\\x07``, a trials file ``<svg onload=alert(1)>.csv``.
Nothing from a log reaches a reader raw:

- :func:`terminal`: a console line. Control characters (C0 but tab and, unless ``one_line``,
  line feed; DEL; C1), the bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069,
  the "Trojan Source" characters) and marks (U+200E, U+200F, U+061C), every other invisible
  format character (the zero-width space U+200B, joiners, U+FEFF, ...: :data:`FORMAT_RANGES`),
  the Unicode line and paragraph separators and lone surrogates are shown as Python-style
  escapes (``\\x1b``, ``\\u202e``, ``\\u200b``), so no escape
  sequence reaches the terminal live, nothing reorders the line and two names that differ
  only by an invisible character never print alike; other text is unchanged.
  The Markdown, HTML, LaTeX and figure texts go through it too.
- :func:`html_text`: HTML text or attribute value: :func:`terminal`'s visible controls, then
  ``html.escape``.
- :func:`markdown_text`: Markdown text (a paragraph, a heading, a table cell): renders, in
  CommonMark and in GitHub-style tables, as the literal text (controls made visible as for
  :func:`terminal`), never as an HTML element, a link, emphasis, a list or a table row. HTML's
  ``<``, ``>``, ``&`` become entities; Markdown's syntax is backslash-escaped, but for an
  underscore inside a word (``title_abstract``, which opens no emphasis), so our own texts
  still read well in the raw file.
- :func:`csv_cell`, :func:`csv_frame` and :func:`csv_document`: a CSV table meant for people.
  A text cell's controls are made visible as for :func:`terminal` (a carriage return shows as
  ``\\r``: a bare CR, which a spreadsheet reads as the end of a row, never reaches it; a
  Windows line end ``\\r\\n`` is read as ``\\n``), then a text that a spreadsheet would run
  as a formula (starting with ``=``, ``+``, ``-``, ``@`` or tab, OWASP's advice on CSV
  injection) gets a leading ``'``; numbers, and text that is just a number (``-0.05``), are
  left as they are. :func:`csv_document` writes such cells as RFC 4180 text, every text cell
  quoted, numbers bare, a missing value empty.
- :func:`latex_text`: LaTeX text (a table cell, a caption, a note) that pdflatex prints in a
  plain ``article`` (the default OT1 font encoding, no package): controls made visible as for
  :func:`terminal` on one line, and every character pdflatex cannot print there (CJK, Cyrillic,
  Greek but ``α`` and ``κ``, emoji, ``« » Ð ð Þ þ``: anything outside ASCII, the Latin-1
  letters and signs the default fonts have, and the symbols of :data:`LATEX_ESCAPES`) shown as
  its Python-style escape (``\\u4e2d``), so no text stops the engine; then every character
  LaTeX reads as syntax (``\\ & % $ # _ { } ~ ^``, and ``< > |``, which the default font
  encoding prints as other glyphs) written as the command that prints it (a hyphen or quote
  before another kept apart: ``-{}-``, no dash), and the few symbols our tables use that
  pdflatex has no text glyph for (``−``, ``≥``, ``κ``, ``√``, ...) in ``\\ensuremath``: the
  text prints as it reads, and nothing in it runs as a command. ``breakable``: a line may also
  break after ``/ _ = , ; : | -`` and inside any longer run of characters
  (:func:`latex_segments`), so a path or an identifier wraps in a narrow column.

A backslash itself is not escaped by :func:`terminal` (paths stay readable), so the visible
``\\x1b`` and a literal backslash-x-1-b read the same; the text is for reading, not for parsing.
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: the bidirectional embedding, override and isolate characters (the "Trojan Source" set) and
#: the implicit marks (left-to-right, right-to-left, Arabic letter mark), which reorder the
#: neutral characters around them
BIDI_CONTROLS = frozenset(
    chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
)
#: Unicode's format characters (general category Cf), which print as nothing or reorder the
#: line: the soft hyphen, zero-width space, joiners and marks (U+200B-U+200F), the word joiner
#: and invisible operators (U+2060-U+2064), the bidi controls, the byte-order mark (U+FEFF), the
#: tag characters (U+E0001, U+E0020-U+E007F), ... Two model names that differ only by one print
#: alike: each is shown as its escape. (tests/test_safe_text.py checks these ranges against
#: :mod:`unicodedata`'s Cf.)
FORMAT_RANGES = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
#: what a terminal must never receive raw: C0 but tab and line feed, DEL, C1, the line and
#: paragraph separators, lone surrogates (unprintable in UTF-8), the bidi controls and every
#: other format character (:data:`FORMAT_RANGES`)
_CONTROLS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + "".join(sorted(BIDI_CONTROLS))
    + FORMAT_RANGES
)
_CONTROL = re.compile(f"[{_CONTROLS}]")
_CONTROL_ONE_LINE = re.compile(f"[\n{_CONTROLS}]")


_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character made visible (``\\x1b``, ``\\u202e``; see the
    module's docstring). Tab is kept; line feed too unless ``one_line`` (a message that must
    stay one line: it then shows as ``\\n``); carriage return always shows as ``\\r``."""
    pattern = _CONTROL_ONE_LINE if one_line else _CONTROL
    return pattern.sub(_escape, str(text))


def html_text(text: str) -> str:
    """``text`` for HTML (element text or a quoted attribute): controls visible, then
    ``<``, ``>``, ``&`` and quotes escaped."""
    return html.escape(terminal(text))


# --- Markdown -----------------------------------------------------------------------------

#: replaced wherever they stand: HTML (as entities, which every Markdown reads) and the
#: inline syntax (backslash escapes, CommonMark's for ASCII punctuation)
_MD_ALWAYS = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "\\": "\\\\",
    "`": "\\`",
    "*": "\\*",
    "[": "\\[",
    "]": "\\]",
    "|": "\\|",
    "~": "\\~",
    "#": "\\#",
}
#: a line that would open a block: a list item (``-``, ``+``, ``1.``, ``1)``), a setext
#: heading underline (``=``, ``-``) or a thematic break; ``#``, ``>`` and ``*`` are always escaped
_MD_LINE_START = re.compile(r"^(\d*)([-+=.)])")


def _md_inline(text: str) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "_":
            # an underscore between two letters or digits never opens or closes emphasis in
            # CommonMark (``title_abstract`` stays readable); elsewhere it is escaped
            inner = 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
            out.append("_" if inner else "\\_")
        else:
            out.append(_MD_ALWAYS.get(ch, ch))
    return "".join(out)


def _md_line(line: str) -> str:
    """One line of a paragraph: its inline text, its start unable to open a block, its leading
    and trailing blanks (an indented code block, a hard line break) written as entities."""
    body = line.strip(" \t")
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    trail = line[len(lead) + len(body) :] if body else ""
    text = _MD_LINE_START.sub(r"\1\\\2", _md_inline(body), count=1)
    return "".join(f"&#{ord(c)};" for c in lead) + text + "".join(f"&#{ord(c)};" for c in trail)


def markdown_text(text: Any, *, one_line: bool = True) -> str:
    """``text`` as Markdown that renders as the literal text (controls made visible as by
    :func:`terminal`; a Windows line end ``\\r\\n`` read as ``\\n``) and nothing else: no HTML
    element, link, image, emphasis, code span, list, heading, quote or table row, in CommonMark
    and in GitHub-style tables. (A renderer that links bare URLs, as GitHub's does, still links
    an ``http://`` address in the text.)

    ``one_line`` (a table cell, a heading, a caption): line breaks show as ``\\n``, and the
    text can stand inside a table row. Otherwise (a paragraph), line breaks are kept and no
    line can open a block (a list, a heading, a quote, a code block)."""
    text = terminal(str(text).replace("\r\n", "\n"), one_line=one_line)
    if one_line:
        return _md_inline(text)
    return "\n".join(_md_line(line) for line in text.split("\n"))


# --- CSV for spreadsheets -----------------------------------------------------------------

#: the first characters a spreadsheet reads as the start of a formula (OWASP, CSV injection);
#: a carriage return never starts a cell's text (:func:`csv_cell` shows it as ``\\r``)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def csv_text(text: str) -> str:
    """A text for a CSV cell a person reads: controls made visible (:func:`terminal`, line feeds
    kept; a Windows line end read as one), then a leading ``'`` if a spreadsheet would run it
    as a formula, unless it is only a number (``-0.05``, ``+3``)."""
    text = terminal(str(text).replace("\r\n", "\n"))
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_cell(value: Any) -> Any:
    """A cell of a CSV table for people: a text as :func:`csv_text` writes it; anything else
    (numbers, missing values) is returned as it is."""
    return csv_text(value) if isinstance(value, str) else value


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with :func:`csv_cell` applied to its text: every object or string
    column's cells, and the column names (numeric columns are left as they are)."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_object_dtype(out[col]):  # cells kept as they are (an int an int)
            out[col] = pd.Series([csv_cell(v) for v in out[col]], index=out.index, dtype=object)
        elif pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(csv_cell)
    out.columns = pd.Index([csv_cell(c) for c in out.columns])
    return out


def _csv_field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):  # numpy's too
        value = "yes" if value else "no"
    elif isinstance(value, numbers.Integral):
        return str(int(value))
    elif isinstance(value, numbers.Real):
        x = float(value)
        return "" if math.isnan(x) else repr(x)
    return '"' + csv_text(str(value)).replace('"', '""') + '"'


def csv_document(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A CSV table for people (RFC 4180, ``\\n`` line ends): every text cell (the header's
    too) quoted and written as :func:`csv_text` writes it, so no line break or separator of a
    text ends its cell or its row; a number bare, in full precision (``repr``: a float reads back
    as the same float, an integer as an integer); a boolean ``yes``/``no``; a missing value
    (None, NaN) empty."""
    lines = [",".join(_csv_field(v) for v in row) for row in (header, *rows)]
    return "\n".join(lines) + "\n"


# --- LaTeX --------------------------------------------------------------------------------

#: each character LaTeX reads as syntax (or prints as another glyph in the OT1/T1 default), and
#: symbols pdflatex has no text glyph for, as the LaTeX that prints it
LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "—": "---",
    "–": "--",
    "−": r"\ensuremath{-}",
    "≥": r"\ensuremath{\geq}",
    "≤": r"\ensuremath{\leq}",
    "±": r"\ensuremath{\pm}",
    "×": r"\ensuremath{\times}",
    "·": r"\ensuremath{\cdot}",
    "→": r"\ensuremath{\rightarrow}",
    "√": r"\ensuremath{\surd}",
    "¹": r"\ensuremath{^{1}}",
    "²": r"\ensuremath{^{2}}",
    "³": r"\ensuremath{^{3}}",
    "…": r"\ldots{}",
    "`": r"\textasciigrave{}",
    "α": r"\ensuremath{\alpha}",
    "κ": r"\ensuremath{\kappa}",
}
#: a hyphen or quote that LaTeX would join with the next into a dash or a curly quote (``--``,
#: ``''``), kept apart by an empty group
LATEX_LIGATURE = {"-": "-{}", "'": "'{}"}
#: what pdflatex prints as it is in a plain ``article`` (OT1 fonts, UTF-8 input): printable
#: ASCII, and the Latin-1 letters and signs its fonts (or their TS1 companions) have: all of
#: U+00A0-U+00FF but the guillemets and Icelandic eth and thorn, which need the T1 encoding
LATEX_PRINTS = frozenset(
    [chr(c) for c in range(0x20, 0x7F)]
    + [chr(c) for c in range(0xA0, 0x100) if chr(c) not in "«»ÐÞðþ"]
    + list("‘’“”•€™†‡ŁłŒœŠšŽžŸ")
)
_LATEX_SPECIAL = re.compile("[" + re.escape("".join(LATEX_ESCAPES)) + "]|[-'](?=[-'])")
#: a character pdflatex cannot print in a plain article (shown as its escape instead)
_LATEX_UNPRINTABLE = re.compile(
    "[^" + re.escape("".join(sorted(LATEX_PRINTS | set(LATEX_ESCAPES)))) + "]"
)
#: where ``breakable`` text may also break: after these, and every :data:`LATEX_RUN`
#: characters of a run without a space or one of these
LATEX_BREAK_AFTER = "/_=,;:|-"
LATEX_RUN = 16
_BREAKS = re.escape(LATEX_BREAK_AFTER)
_LATEX_PIECE = re.compile(f"[^ {_BREAKS}]{{1,{LATEX_RUN}}}[{_BREAKS}]?|[{_BREAKS}]| +")


def _latex_char(m: re.Match[str]) -> str:
    char = m.group()
    return LATEX_ESCAPES.get(char) or LATEX_LIGATURE[char]


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else (
        f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def latex_printed(text: Any) -> str:
    """``text`` as :func:`latex_text` prints it, before any LaTeX escaping: on one line, its
    controls made visible (:func:`terminal`) and every character pdflatex cannot print in a
    plain article shown as its Python-style escape (``\\u4e2d``, ``\\U0001f469``)."""
    return _LATEX_UNPRINTABLE.sub(_visible, terminal(str(text), one_line=True))


def latex_segments(text: Any) -> list[str]:
    """:func:`latex_printed`'s text cut where ``latex_text(..., breakable=True)`` lets a line
    break: after each of :data:`LATEX_BREAK_AFTER`, and after every :data:`LATEX_RUN`
    characters of a longer run without a space or one of them; runs of spaces are segments of
    their own (a line may break at a space anyway). Joined, the segments are the printed text."""
    return _LATEX_PIECE.findall(latex_printed(text))


def latex_text(text: Any, *, breakable: bool = False) -> str:
    """``text`` as LaTeX that prints it as it reads, on one line (the module's docstring);
    ``breakable``: with ``\\allowbreak{}`` between :func:`latex_segments` (a wrapping column)."""
    printed = latex_printed(text)
    if not breakable:
        return _LATEX_SPECIAL.sub(_latex_char, printed)
    parts: list[str] = []
    for seg in _LATEX_PIECE.findall(printed):
        if parts and not seg.startswith(" ") and not parts[-1].endswith(" "):
            # a penalty between two segments: also no dash or quote ligature across it
            parts.append(r"\allowbreak{}")
        parts.append(_LATEX_SPECIAL.sub(_latex_char, seg))
    return "".join(parts)
