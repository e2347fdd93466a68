"""The escapes of text from a log (issue 27): each over many hostile and random strings."""

from __future__ import annotations

import csv
import io
import re
import sys
import unicodedata
from html.parser import HTMLParser

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from med_evals.outputs.text import (
    BIDI_CONTROLS,
    FORMAT_RANGES,
    LATEX_PRINTS,
    LATEX_RUN,
    csv_cell,
    csv_document,
    csv_frame,
    html_text,
    latex_printed,
    latex_segments,
    latex_text,
    markdown_text,
    terminal,
)

from .report.exported import untex_text
from .report.hostile import NASTY, random_strings

STRINGS = NASTY + random_strings()
COMMONMARK = MarkdownIt("commonmark", {"html": True}).enable("table")
GFM = MarkdownIt("gfm-like")  # tables, strikethrough, linkified URLs, HTML on


def _raw_controls(text: str, one_line: bool) -> list[str]:
    """Characters a terminal must not receive raw."""
    return [
        c for c in text
        if (ord(c) < 0x20 and c not in ("\t", "\n"))
        or (c == "\n" and one_line)
        or 0x7F <= ord(c) <= 0x9F
        or c in BIDI_CONTROLS
        or c in "\u2028\u2029"
        or 0xD800 <= ord(c) <= 0xDFFF
        or unicodedata.category(c) == "Cf"  # invisible: zero-width space, joiners, BOM, tags
    ]


_ESCAPE = re.compile(r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})|\\U([0-9a-f]{8})|\\n|\\r")


def _unescape(text: str) -> str:
    def back(m: re.Match[str]) -> str:
        if m.group() in ("\\n", "\\r"):
            return {"\\n": "\n", "\\r": "\r"}[m.group()]
        return chr(int(m.group(1) or m.group(2) or m.group(3), 16))

    return _ESCAPE.sub(back, text)


# --- terminal ------------------------------------------------------------------------------


@pytest.mark.parametrize("one_line", [False, True])
def test_terminal_shows_every_control_and_hides_nothing_else(one_line):
    for s in STRINGS:
        out = terminal(s, one_line=one_line)
        assert _raw_controls(out, one_line) == [], repr(s)
        out.encode("utf-8")  # printable: no lone surrogate left
        if "\\" not in s:  # nothing lost: the escapes read back to the text
            assert _unescape(out) == s, repr(s)
        if not _raw_controls(s, one_line):
            assert out == s  # plain text (tabs, newlines, any script) is unchanged


def test_terminal_escapes_read_as_python_writes_them():
    assert terminal("\x1b[31mred\x1b]0;title\x07") == "\\x1b[31mred\\x1b]0;title\\x07"
    assert terminal("a\u202eb\u2066c") == "a\\u202eb\\u2066c"
    assert terminal("x\x00y\x7f\x85\x9b") == "x\\x00y\\x7f\\x85\\x9b"
    assert terminal("one\ntwo\tthree") == "one\ntwo\tthree"
    assert terminal("one\ntwo\r\n", one_line=True) == "one\\ntwo\\r\\n"
    assert terminal("over\rwrite") == "over\\rwrite"  # a carriage return always shows
    assert terminal("C:\\logs\\évaluation 日本") == "C:\\logs\\évaluation 日本"


def test_every_invisible_format_character_is_shown_as_its_escape():
    """Before: ``openai/gpt\u200b-4o`` printed as ``openai/gpt-4o``, two runs alike (issue 44).
    The ranges hold every format character (Cf) of this Python's Unicode, and only format
    characters or code points it does not assign yet (a later Unicode's Cf)."""
    ours = re.compile(f"[{FORMAT_RANGES}]")
    every = [chr(c) for c in range(sys.maxunicode + 1)]
    cf = {c for c in every if unicodedata.category(c) == "Cf"}
    matched = {c for c in every if ours.match(c)}
    assert cf <= matched
    assert {unicodedata.category(c) for c in matched - cf} <= {"Cn"}
    assert terminal("openai/gpt\u200b-4o") == "openai/gpt\\u200b-4o"
    assert terminal("\ufeffa\u2060b\u00adc\U000e0041") == "\\ufeffa\\u2060b\\xadc\\U000e0041"
    assert terminal("openai/gpt-4o") == "openai/gpt-4o"
    for escape in (html_text, markdown_text, latex_text):
        assert escape("gpt\u200b-4o") != escape("gpt-4o"), escape


def test_no_escape_sequence_reaches_a_terminal_from_a_model_name():
    # ESC, BEL and CSI (C1 0x9b) are what starts or ends an ANSI/OSC sequence
    for s in STRINGS:
        out = terminal(s, one_line=True)
        assert not set(out) & {"\x1b", "\x07", "\x9b", "\x9d", "\n", "\r"}


# --- HTML ----------------------------------------------------------------------------------


class _Collect(HTMLParser):
    """The elements and the text of an HTML fragment; tables as lists of rows of cell texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):  # noqa: ANN001
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):  # noqa: ANN001
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> _Collect:
    c = _Collect()
    c.feed(html)
    c.close()
    return c


def squash(text: str) -> str:
    """Whitespace as HTML shows it."""
    return " ".join(text.split())


def test_html_text_is_text():
    for s in STRINGS:
        got = parse(f"<p>{html_text(s)}</p><a title=\"{html_text(s)}\">x</a>")
        assert [t for t, _ in got.tags] == ["p", "a"], repr(s)
        assert got.tags[1][1]["title"] == terminal(s)
        assert got.text[0] if s else True
        assert "".join(got.text) == terminal(s) + "x"


# --- Markdown ------------------------------------------------------------------------------


def _links_only_to_urls(tags: list[tuple[str, dict[str, str | None]]]) -> bool:
    """A linkifying renderer may link a bare http(s) or mailto address; nothing else."""
    return all(
        t != "a" or re.match(r"(https?|mailto):", a.get("href") or "") for t, a in tags
    )


@pytest.mark.parametrize("renderer", [COMMONMARK, GFM], ids=["commonmark", "gfm-like"])
def test_markdown_paragraph_renders_as_the_literal_text(renderer):
    for s in STRINGS:
        got = parse(renderer.render(markdown_text(s, one_line=False)))
        tags = {t for t, _ in got.tags}
        allowed = {"p", "a"} if renderer is GFM else {"p"}
        assert tags <= allowed, (repr(s), tags)
        assert _links_only_to_urls(got.tags)
        assert squash("".join(got.text)) == squash(terminal(s.replace("\r\n", "\n"))), repr(s)


@pytest.mark.parametrize("renderer", [COMMONMARK, GFM], ids=["commonmark", "gfm-like"])
def test_markdown_cell_heading_and_caption_render_as_the_literal_text(renderer):
    for s in STRINGS:
        want = squash(terminal(s.replace("\r\n", "\n"), one_line=True))
        cell = markdown_text(s)
        assert "\n" not in cell and "\r" not in cell
        table = parse(renderer.render(f"| key | {cell} |\n|---|---|\n| {cell} | 2 |\n"))
        assert [squash(c) for c in table.tables[0][0]] == ["key", want], repr(s)
        assert [squash(c) for c in table.tables[0][1]] == [want, "2"], repr(s)
        assert len(table.tables) == 1 and len(table.tables[0]) == 2
        assert {t for t, _ in table.tags} - {"a"} == {"table", "thead", "tbody", "tr", "th", "td"}
        heading = parse(renderer.render(f"## {cell}"))
        assert heading.tags[0][0] == "h2" and {t for t, _ in heading.tags} - {"a"} == {"h2"}
        assert squash("".join(heading.text)) == want, repr(s)
        if s.strip():  # a caption, in italics (as the report writes it: stripped)
            caption = parse(renderer.render(f"*{markdown_text(s.strip())}*"))
            assert [t for t, _ in caption.tags if t != "a"] == ["p", "em"], repr(s)
            assert squash("".join(caption.text)) == squash(
                terminal(s.strip().replace("\r\n", "\n"), one_line=True)), repr(s)
        assert _links_only_to_urls(table.tags + heading.tags)


def test_markdown_keeps_our_own_texts_readable():
    for ours in ("title_abstract vs counterfactual", "Accuracy (95% CI)", "0.62 (0.55-0.69)",
                 "+0.120 (-0.050 to +0.300)", "mockllm/a", "—", "med-evals regress: 5 / 2"):
        assert markdown_text(ours) == ours
    assert markdown_text("a|b") == "a\\|b"
    assert markdown_text("<b>") == "&lt;b&gt;"
    assert markdown_text("_x_") == "\\_x\\_"


# --- CSV -----------------------------------------------------------------------------------

FORMULAS = ["=1+1", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "=cmd|' /C calc'!A0", "-", "+",
            "--prices"]


def test_csv_cell_neutralises_formulas_and_leaves_numbers():
    for f in FORMULAS:
        assert csv_cell(f) == "'" + f
    for kept in (-1, -0.5, 3, 2.5e-3, float("nan"), None, True, "-0.5", "+3", "-1e5", "1.5",
                 "plain", "a=b", " =1", "", "—", "0.55-0.69"):
        got = csv_cell(kept)
        assert got is kept or got == kept
    for s in STRINGS:
        out = csv_cell(s)
        shown = terminal(s.replace("\r\n", "\n"))
        assert not (isinstance(out, str) and out.startswith(("=", "+", "-", "@", "\t", "\r"))
                    and not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", out)), s
        assert out in (shown, "'" + shown)


def test_csv_cell_shows_controls_so_no_cr_ends_a_row():
    # issue 44, item 10: a bare CR is a row's end to a spreadsheet, the formula after it a cell
    assert csv_cell("POSITIVE\r=cmd|' /C calc'!A0") == "POSITIVE\\r=cmd|' /C calc'!A0"
    assert csv_cell("\r=1") == "\\r=1"  # visible, so no longer a formula's start
    assert csv_cell("\x1b]0;title\x07 \u202eevil \u200fx") == (
        "\\x1b]0;title\\x07 \\u202eevil \\u200fx")
    assert csv_cell("two\r\nlines\nkept") == "two\nlines\nkept"  # a line feed stays in its cell
    assert csv_cell("日本語 Ελληνικά") == "日本語 Ελληνικά"  # UTF-8: any script as it is
    for s in STRINGS:
        out = csv_cell(s)
        assert "\r" not in out and not _raw_controls(out, one_line=False), repr(s)


def test_csv_document_quotes_every_text_and_writes_numbers_bare():
    rows = [[1, 0.1 + 0.2, -0.25, None, float("nan"), True, "=x", 'say "hi"', "a,b\nc",
             "POSITIVE\r=cmd", "-0.5", 10**20]]
    text = csv_document(["n", "=sum", "delta", "none", "nan", "ok", "f", "q", "multi", "cr",
                         "numeric text", "big"], rows)
    assert text.splitlines()[0] == ('"n","\'=sum","delta","none","nan","ok","f","q","multi",'
                                    '"cr","numeric text","big"')
    assert text.endswith('\n') and "\r" not in text
    [header, row] = list(csv.reader(io.StringIO(text, newline="")))
    assert len(header) == len(row) == 12
    assert row == ["1", "0.30000000000000004", "-0.25", "", "", "yes", "'=x", 'say "hi"',
                   "a,b\nc", "POSITIVE\\r=cmd", "-0.5", str(10**20)]
    assert float(row[1]) == 0.1 + 0.2  # in full precision
    # numbers bare, every text quoted: a spreadsheet reads the numbers as numbers
    assert text.splitlines()[1].startswith('1,0.30000000000000004,-0.25,,,"yes","\'=x",')
    # numpy's numbers as Python's (a count from pandas an integer, not text)
    import numpy as np

    assert csv_document(["a"], [[np.int64(5), np.float64(0.25), np.bool_(False),
                                 np.float64("nan")]]) == '"a"\n5,0.25,"no",\n'


def test_csv_frame_escapes_text_cells_and_names_only():
    df = pd.DataFrame({
        "=HYPERLINK(\"http://x\")": ["=1+1", "ok", None],
        "delta": [-0.25, 0.5, -1.0],
        "n": [-3, 4, 5],
        "mixed": ["-0.5", -2, "@x"],
    })
    before = df.copy()
    out = csv_frame(df)
    pd.testing.assert_frame_equal(df, before)  # the caller's frame is left alone
    assert list(out.columns) == ["'=HYPERLINK(\"http://x\")", "delta", "n", "mixed"]
    assert out.iloc[:, 0].tolist()[:2] == ["'=1+1", "ok"] and pd.isna(out.iloc[2, 0])
    assert out["delta"].dtype == df["delta"].dtype and out["delta"].tolist() == [-0.25, 0.5, -1.0]
    assert out["n"].dtype == df["n"].dtype and out["n"].tolist() == [-3, 4, 5]
    assert out["mixed"].tolist() == ["-0.5", -2, "'@x"]
    text = out.to_csv(index=False)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1][1] == "-0.25" and rows[1][2] == "-3"  # a negative number stays a number
    assert all(not cell.startswith(("=", "@", "+")) for row in rows for cell in row)


def test_csv_frame_keeps_a_count_beside_a_missing_value_an_integer():
    df = pd.DataFrame([[8, "=x"], [None, "ok"]], columns=["ties", "by"], dtype=object)
    rows = list(csv.reader(io.StringIO(csv_frame(df).to_csv(index=False))))
    assert rows == [["ties", "by"], ["8", "'=x"], ["", "ok"]]  # before: 8.0


# --- LaTeX ---------------------------------------------------------------------------------

#: what a LaTeX text may hold unescaped: none of TeX's special characters
_TEX_SPECIAL = re.compile(r"(?<!\\)[&%$#_{}~^]|(?<!\\)\\(?![&%$#_{}]|text|ensuremath|ldots)")


_OURS = (r"\\(textbackslash|textasciitilde|textasciicircum|textless|textgreater|textbar|"
         r"textasciigrave|ldots|allowbreak)\{\}|\\ensuremath\{(\\?[a-z-]+|\^\{[0-9]\})\}|"
         r"\\[&%$#_{}]|[-']\{\}")


def test_latex_text_prints_every_text_as_it_reads_and_runs_no_command():
    assert latex_text(r"a_b & 50% $x$ #1 {y} ~^ \input{x} <b>|") == (
        r"a\_b \& 50\% \$x\$ \#1 \{y\} \textasciitilde{}\textasciicircum{} "
        r"\textbackslash{}input\{x\} \textless{}b\textgreater{}\textbar{}")
    assert latex_text("κ − α ≥ 0 — ok √2 q²") == (
        r"\ensuremath{\kappa} \ensuremath{-} \ensuremath{\alpha} \ensuremath{\geq} 0 --- ok "
        r"\ensuremath{\surd}2 q\ensuremath{^{2}}")
    assert latex_text("|---| ''x'' `y`") == (
        r"\textbar{}-{}-{}-\textbar{} '{}'x'{}' \textasciigrave{}y\textasciigrave{}")
    for s in STRINGS:
        for breakable in (False, True):
            out = latex_text(s, breakable=breakable)
            assert "\n" not in out and not _raw_controls(out, one_line=True), repr(s)
            # outside our commands no special character, and every command is ours
            bare = re.sub(_OURS, " ", out)
            assert not re.search(r"[\\&%$#_{}~^`]", bare), (repr(s), out)
            # read back (dashes and quotes included: ``--`` only where the text had ``–``)
            # (each segment apart: a break point keeps ``-`` and ``-`` from becoming ``--``)
            back = "".join(untex_text(part) for part in out.split(r"\allowbreak{}"))
            assert back == latex_printed(s), repr(s)
            # nothing the engine cannot print in a plain article
            assert set(out) <= LATEX_PRINTS, repr(s)


def test_latex_shows_what_pdflatex_cannot_print_as_escapes():
    # issue 44, item 10: any non-Latin-1 text stopped pdflatex
    assert latex_printed("модель 模型") == (
        "\\u043c\\u043e\\u0434\\u0435\\u043b\\u044c \\u6a21\\u578b")
    assert latex_printed("👩\u200d⚕️") == "\\U0001f469\\u200d\\u2695\\ufe0f"
    assert latex_printed("«ja» Ðþ") == "\\xabja\\xbb \\xd0\\xfe"  # Latin-1 the fonts lack
    assert latex_printed("Müller, Ørsted, Ćosić") == "Müller, Ørsted, \\u0106osi\\u0107"
    assert latex_printed("a\tb\x1b\u202e") == "a\\x09b\\x1b\\u202e"
    assert latex_text("模型") == r"\textbackslash{}u6a21\textbackslash{}u578b"
    # the Latin-1 letters and the symbols our tables use stay as they are
    assert latex_printed("é ß ü ° £ µ — ≥ κ √") == "é ß ü ° £ µ — ≥ κ √"


def test_latex_breakable_text_breaks_only_between_its_segments():
    path = "replay//tmp/run/recordings/openai-onc-follower.jsonl"
    assert latex_segments(path) == ["replay/", "/", "tmp/", "run/", "recordings/", "openai-",
                                    "onc-", "follower.jsonl"]
    assert latex_text("title_abstract vs x", breakable=True) == (
        r"title\_\allowbreak{}abstract vs x")
    long = "ACK2dAkJszK35tRSndKmPqrstuvwxyzABCDEF"
    assert [len(x) for x in latex_segments(long)] == [16, 16, 5]
    for s in STRINGS:
        segments = latex_segments(s)
        assert "".join(segments) == latex_printed(s), repr(s)
        assert all(len(x) <= LATEX_RUN + 1 or not x.strip() for x in segments), repr(s)


@pytest.mark.slow
def test_every_text_compiles_with_pdflatex_in_a_plain_article(tmp_path):
    """Each hostile and random string, as a caption, a wrapped cell and a plain cell."""
    from .report.exported import compile_tex, failures

    body = []
    for i, s in enumerate(STRINGS):
        caption, wrapped, plain = (latex_text(s, breakable=True),
                                   latex_text(s[:60], breakable=True), latex_text(s[:20]))
        body.append(
            f"\\begin{{table}}[htbp]\\caption{{{caption}}}"
            "\\begin{tabular}{@{}p{0.5\\linewidth}l@{}}\\toprule "
            f"\\raggedright {wrapped} & {plain} \\tabularnewline\\bottomrule\\end{{tabular}}"
            f"\\end{{table}}% {i}\n")
        if i % 15 == 14:
            body.append("\\clearpage\n")
    tex = tmp_path / "strings.tex"
    tex.write_text("".join(body), encoding="utf-8")
    problems = compile_tex([tex], tmp_path / "build")
    # an overfull box is a long string in a 20-character plain cell: only errors count here
    assert {k: [p for p in v if not p.startswith("Overfull")]
            for k, v in failures(problems).items()} in ({}, {"strings.tex": []})
