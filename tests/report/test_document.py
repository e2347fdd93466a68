"""Every text of every block reaches report.md and report.html as the literal text (issue 27):
no HTML element, no Markdown structure, no raw control character, whatever the text holds."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from med_evals.commands.report.document import Document, fmt, fmt_p, p_text
from med_evals.outputs.text import terminal

from ..test_safe_text import parse, squash
from .hostile import NASTY, random_strings

STRINGS = NASTY + random_strings(60, seed=1)
RENDERERS = {
    "commonmark": MarkdownIt("commonmark", {"html": True}).enable("table"),
    "gfm-like": MarkdownIt("gfm-like"),
}
TABLE_TAGS = {"table", "thead", "tbody", "tr", "th", "td"}
#: what report.html may hold, whatever the logs say
HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "caption",
             "figure", "img", "figcaption", "wbr", *TABLE_TAGS}
RAW = ("\x00", "\x1b", "\x07", "\x9b", "\u202e", "\u2066")


def one_line(s: str) -> str:
    return squash(terminal(s.replace("\r\n", "\n"), one_line=True))


def _docs(s: str, base) -> dict[str, Document]:  # noqa: ANN001
    png = base / "figures" / "x.png"
    png.parent.mkdir(exist_ok=True)
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    docs = {kind: Document("med_evals report") for kind in ("h2", "p", "warn", "table", "img")}
    docs["h2"].h2(s)
    docs["p"].p(s)
    docs["warn"].p(s, "warn")
    docs["table"].table([{s: s, "n": 1}], caption=s)
    docs["img"].figure(png, s)
    return docs


def _shown(html: str) -> tuple[set[str], object]:
    got = parse(html)
    tags = {t for t, _ in got.tags} - {"h1", "a"}  # a linkified bare URL: see safe_text
    return tags, got


@pytest.mark.parametrize("renderer", list(RENDERERS))
def test_markdown_shows_each_block_text_literally(tmp_path, renderer):
    md = RENDERERS[renderer]
    for s in STRINGS:
        for kind, doc in _docs(s, tmp_path).items():
            text = doc.markdown(tmp_path)
            assert not any(c in text for c in RAW), (kind, repr(s))
            tags, got = _shown(md.render(text))
            body = squash("".join(got.text).removeprefix("med_evals report"))
            if kind == "h2":
                assert tags == {"h2"} and body == one_line(s), repr(s)
            elif kind == "p":
                assert tags <= {"p"} and body == squash(terminal(s.replace("\r\n", "\n")))
            elif kind == "warn":
                assert tags <= {"blockquote", "p"}, repr(s)
                assert body == squash(terminal(s.replace("\r\n", "\n"))), repr(s)
            elif kind == "table":
                [table] = got.tables
                assert [[squash(c) for c in row] for row in table] == [
                    [one_line(s), "n"], [one_line(fmt(s)), "1"]
                ], repr(s)
                assert tags - TABLE_TAGS <= {"p", "em"}, repr(s)
            else:
                [img] = [a for t, a in got.tags if t == "img"]
                assert img["src"] == "figures/x.png" and squash(img["alt"] or "") == one_line(s)
                assert tags == {"p", "img"}, repr(s)


def test_html_shows_each_block_text_literally(tmp_path):
    for s in STRINGS:
        for kind, doc in _docs(s, tmp_path).items():
            html = doc.html()
            assert not any(c in html for c in RAW), (kind, repr(s))
            got = parse(html)
            assert {t for t, _ in got.tags} <= HTML_TAGS, (kind, repr(s))
            assert not [a for _, attrs in got.tags for a in attrs if a.startswith("on")]
            if kind == "table":
                [table] = got.tables
                assert table == [[terminal(s), "n"], [terminal(fmt(s)), "1"]], repr(s)


def test_our_own_texts_read_as_before_in_markdown(tmp_path):
    doc = Document("med_evals report")
    doc.h2("Oncology RCT evidence use (Windisch et al. 2026)")
    doc.table([{"condition": "title_abstract", "run": "mockllm/a", "fall": -0.05,
                "pair": "title_abstract vs counterfactual"}],
              caption="Table 1 (ours): condition × run, the study's layout")
    doc.p("— marks a missing value.", "note")
    md = doc.markdown(tmp_path)
    assert "## Oncology RCT evidence use (Windisch et al. 2026)" in md
    assert "*Table 1 (ours): condition × run, the study's layout*" in md
    assert "| title_abstract | mockllm/a | -0.050 | title_abstract vs counterfactual |" in md
    assert "\n— marks a missing value.\n" in md


def test_p_values_and_counts_as_a_paper_prints_them(tmp_path):
    doc = Document("med_evals report")
    doc.table([{"run": "a", "n": 12, "McNemar exact p": 0.00049, "p_value_vs_chance": 0.0123,
                "grader_2/p_value_vs_chance": 1.0, "accuracy": 1.0, "prompt": 0.5},
               {"run": "b", "n": 3, "McNemar exact p": 0.001, "p_value_vs_chance": None,
                "grader_2/p_value_vs_chance": "no valid prediction", "accuracy": 0.25,
                "prompt": 0.0004}])
    md, page = doc.markdown(tmp_path), doc.html()
    assert "| a | 12 | <0.001 | 0.0123 | 1.00 | 1.000 | 0.500 |" in md.replace("&lt;", "<")
    assert "| b | 3 | 0.00100 | — | no valid prediction | 0.250 | 0.000 |" in md
    assert "<td>&lt;0.001</td>" in page and "<td>12</td>" in page
    assert [fmt_p(x) for x in (0.0009999, 0.05, 0.5, 1)] == ["<0.001", "0.0500", "0.500", "1.00"]
    assert p_text(0.0001) == "p < 0.001" and p_text(0.25) == "p = 0.250"


def test_a_tables_export_links_render_as_links_and_text(tmp_path):
    doc = Document("med_evals report")
    doc.table([{"a": "x"}], caption="T")
    [table] = [b for b in doc.blocks if b[0] == "table"]
    assert doc.table_of(table) == 0 and doc.tables[0].rows == [{"a": "x"}]
    doc.blocks.append(doc.links("This table as", [("CSV", "tables/0123456789ab/01-t.csv"),
                                                  ("LaTeX", "tables/0123456789ab/01-t.tex")]))
    md = doc.markdown(tmp_path)
    assert ("This table as [CSV](tables/0123456789ab/01-t.csv) · "
            "[LaTeX](tables/0123456789ab/01-t.tex)") in md
    assert '<a href="tables/0123456789ab/01-t.tex">LaTeX</a></p>' in doc.html()


def test_a_tables_note_is_below_it_and_its_caption_short(tmp_path):
    doc = Document("med_evals report")
    cols = {f"c{i}": i for i in range(12)}  # wide: two parts in report.md
    doc.table([cols], caption="What each pair can detect", keys=1,
              note="The smallest true difference: 2.80·√(q / (n + 2.80²)), <b>q</b>.")
    md = doc.markdown(tmp_path)
    first, second = md.index("(part 1 of 2)*"), md.index("(part 2 of 2)*")
    note = md.index("The smallest true difference")
    assert first < second < note and md.count("The smallest true difference") == 1
    assert "2.80·√(q / (n + 2.80²)), &lt;b&gt;q&lt;/b&gt;." in md  # escaped as any text
    html = doc.html()
    assert html.count('<p class="note">The smallest') == 1
    assert html.index("</table>", html.index("(part 2 of 2)")) < html.index('class="note">The')
    assert doc.tables[0].note.startswith("The smallest") and doc.tables[0].keys == 1
    assert doc.tables[0].caption == "What each pair can detect"


def test_a_cell_printed_from_numbers_reads_as_its_text_everywhere(tmp_path):
    """A Shown cell (fmt_ci, fmt_interval, fmt_diff) is its text to every rendering; only the
    CSV export reads its numbers."""
    from med_evals.commands.report.document import Shown, fmt_ci, fmt_interval

    ci, interval = fmt_ci(0.625, (0.5, 0.75)), fmt_interval((0.125, 0.25), 3)
    assert isinstance(ci, Shown) and ci == "0.62 (0.50-0.75)" and f"{ci}" == ci
    assert dict(ci.parts) == {"{}": 0.625, "{} low": 0.5, "{} high": 0.75}
    assert interval == "0.125-0.250" and dict(interval.parts) == {"{} low": 0.125,
                                                                   "{} high": 0.25}
    assert fmt_ci(float("nan"), (0.1, 0.2)) == "—" and fmt_interval((0.1, float("nan"))) == "—"
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(ci)).parts == ci.parts == copy.deepcopy(ci).parts
    doc = Document("med_evals report")
    doc.table([{"run": "a", "Accuracy (95% CI)": ci, "95% CI": interval}])
    assert "| a | 0.62 (0.50-0.75) | 0.125-0.250 |" in doc.markdown(tmp_path)
    assert "<td>0.62 (0.50-0.75)</td><td>0.125-0.250</td>" in doc.html()
