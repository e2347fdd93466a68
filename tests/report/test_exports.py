"""The exports' rules on tables made here (issue 44, items 5 and 10): the CSV a spreadsheet
reads (numbers as numbers, an interval as its bounds' columns, a missing value empty, every
text quoted, no formula, no split row) and how a LaTeX table is fitted to a plain article's
page (natural width, wrapping columns, parts by columns, floats by rows), each compiled."""

from __future__ import annotations

import math
import re

import pytest

from med_evals.commands.report.document import (
    MISSING,
    Link,
    Table,
    Toggle,
    fmt_ci,
    fmt_interval,
    printed_interval,
    shown_number,
)
from med_evals.commands.report.exports import (
    TEXT_HEIGHT,
    TEXT_WIDTH,
    csv_columns,
    csv_text,
    latex_table,
)
from med_evals.commands.report.standing import detectable_cell, fmt_diff

from .exported import compile_tex, failures, read_csv_typed

CR_REPLY = "POSITIVE\r=cmd|' /C calc'!A0"


def _table(rows, caption="T", keys=1, note=""):  # noqa: ANN001, ANN202
    cols = list(dict.fromkeys(c for r in rows for c in r))
    return Table([{c: r.get(c) for c in cols} for r in rows], caption, note, keys)


def _records(table: Table) -> list[dict[str, tuple[str, bool]]]:
    header, *rows = read_csv_typed(csv_text(table))
    names = [v for v, _ in header]
    assert all(quoted for _, quoted in header)
    return [dict(zip(names, r, strict=True)) for r in rows]


def test_numbers_are_numbers_and_an_interval_its_bounds():
    x, lo, hi = 0.4166666666666667, 0.2083333333333333, 0.6349206349206349
    rows = [
        {"run": "a", "n": 12, "Accuracy (95% CI)": fmt_ci(x, (lo, hi)),
         "95% CI": fmt_interval((lo, hi), 3),
         "A − B (95% CI)": fmt_diff({"difference": -0.05, "lo": -0.25, "hi": 0.125}),
         "detects": detectable_cell({"difference": 0.30125, "method": "discordance"}),
         "share (%)": shown_number("41.7", 100 * x), "ok": True, "p": 0.0123},
        {"run": "b", "n": 3, "Accuracy (95% CI)": MISSING, "95% CI": MISSING,
         "A − B (95% CI)": fmt_diff({"difference": 0.5, "lo": math.nan, "hi": math.nan}),
         "detects": detectable_cell({"difference": math.inf, "discordant": 0}),
         "share (%)": None, "ok": False, "p": math.nan},
    ]
    table = _table(rows)
    assert [name for name, _, _ in csv_columns(table)] == [
        "run", "n", "Accuracy (95% CI)", "Accuracy (95% CI) low", "Accuracy (95% CI) high",
        "95% CI low", "95% CI high", "A − B (95% CI)", "A − B (95% CI) low",
        "A − B (95% CI) high", "detects", "detects how", "share (%)", "ok", "p"]
    a, b = _records(table)
    # numbers bare and in full precision (repr reads back as the same float)
    assert a["Accuracy (95% CI)"] == (repr(x), False) and float(a["Accuracy (95% CI)"][0]) == x
    assert a["Accuracy (95% CI) low"] == (repr(lo), False)
    assert a["95% CI high"] == (repr(hi), False)
    assert [a[f"A − B (95% CI){s}"] for s in ("", " low", " high")] == [
        ("-0.05", False), ("-0.25", False), ("0.125", False)]  # no ' before a negative number
    assert a["detects"] == ("0.30125", False) and a["detects how"] == ("discordance", True)
    assert a["share (%)"] == (repr(100 * x), False) and a["n"] == ("12", False)
    assert a["ok"] == ("yes", True) and a["run"] == ("a", True)
    # a missing value (— in the report, NaN, None) is empty; a missing bound too
    assert all(b[k] == ("", False) for k in (
        "Accuracy (95% CI)", "Accuracy (95% CI) low", "95% CI low", "A − B (95% CI) low",
        "share (%)", "p", "detects"))
    assert b["A − B (95% CI)"] == ("0.5", False)
    assert b["detects how"] == ("none (never differ)", True)


def test_every_text_is_quoted_and_none_runs_as_a_formula():
    rows = [{"run": "=HYPERLINK(\"x\")", "reply": Toggle("POSITIVE =cmd|…", CR_REPLY),
             "priced by": "--prices", "pair": "-0.5", "view": Link("open", "http://v/#/x"),
             "model": "\x1b]0;t\x07 \u202eevil\u202c модель 模型"}]
    text = csv_text(_table(rows))
    assert "\r" not in text and "\x1b" not in text and "\u202e" not in text
    [header, row] = read_csv_typed(text)
    assert len(row) == len(header) == 6  # the CR split no row
    got = {h: v for (h, _), v in zip(header, row, strict=True)}
    assert got["run"] == ("'=HYPERLINK(\"x\")", True)
    assert got["reply"] == ("POSITIVE\\r=cmd|' /C calc'!A0", True)  # the whole reply, CR shown
    assert got["priced by"] == ("'--prices", True)
    assert got["pair"] == ("-0.5", True)  # text that is a number: no '
    assert got["view"] == ("http://v/#/x", True)  # a link: its address
    assert got["model"] == ("\\x1b]0;t\\x07 \\u202eevil\\u202c модель 模型", True)


def test_a_published_interval_is_its_three_numbers():
    cell = printed_interval("0.97 (0.95-0.99)")
    assert cell == "0.97 (0.95-0.99)"
    assert dict(cell.parts) == {"{}": 0.97, "{} low": 0.95, "{} high": 0.99}
    assert printed_interval("100.0") == "100.0" and printed_interval(85.6) == 85.6


# --- LaTeX --------------------------------------------------------------------------------


def _specs(tex: str) -> list[str]:
    return re.findall(r"\\begin\{tabular\}\{(.*)\}", tex)


def _share(spec: str) -> float:
    """The columns' widths as a share of \\linewidth (a p{} column's)."""
    return sum(float(x) for x in re.findall(r"p\{([0-9.]+)\\linewidth\}", spec))


def _wide(n_cols: int, n_rows: int, text: str = "") -> Table:
    rows = [{"run": f"openai/model-{r} (replayed)",
             **{f"number {c}{text}": (r * c) / 7 for c in range(n_cols)}} for r in range(n_rows)]
    return _table(rows, caption="Wide", keys=1, note="How the numbers are made.")


LAYOUTS = {
    # a few columns at their natural width: l and r columns, \small
    "natural": _table([{"run": "a", "n": 3, "value": 0.5}], caption="Small", note="A note."),
    # long text: wrapping p{} columns that sum to at most the line
    "wrapped": _table([{"sample": f"title_abstract-{i:03d}", "input (start)": "Adjuvant Drug A "
                        "Versus Placebo in Resected Stage III Melanoma: A Randomized Trial " * 2,
                        "path": "replay//tmp/pytest-of-root/pytest-16/exports0/runs/recordings/"
                        "openai-onc-follower-with-a-long-name.jsonl", "n": i}
                       for i in range(5)], caption="Wrapped"),
    # 30 columns: parts by columns, each repeating the key column
    "parts": _wide(30, 4, " of the metric set"),
    # 300 rows: floats by rows, each after the first keeping the table's number
    "long": _wide(3, 300),
    # 200 columns: more parts than LaTeX holds unplaced floats (18)
    "many parts": _wide(200, 5),
}


def test_layout_rules_in_the_tex():
    tex = {k: latex_table(t, 7) for k, t in LAYOUTS.items()}
    assert _specs(tex["natural"]) == ["@{}lrr@{}"] and "\\small" in tex["natural"]
    assert "run & n & value \\\\" in tex["natural"]
    [spec] = _specs(tex["wrapped"])
    assert spec.count("p{") == 4 and _share(spec) <= 1.0
    assert "\\raggedright title\\_\\allowbreak{}abstract-\\allowbreak{}000" in tex["wrapped"]
    specs = _specs(tex["parts"])
    assert len(specs) >= 2 and all(_share(s) <= 1.0 for s in specs)
    assert tex["parts"].count("\\raggedright run") == len(specs)  # the key column each time
    assert "(part 2 of" in tex["parts"]
    floats = tex["long"].count("\\begin{table}")
    assert floats >= 4 and tex["long"].count("\\addtocounter{table}{-1}") == floats - 1
    assert tex["long"].count("(continued)") == floats - 1
    # each page of rows after the first starts a page: the one before is full
    assert tex["long"].count("\\clearpage") == floats - 1
    many = tex["many parts"].count("\\begin{table}")
    assert many > 18 and tex["many parts"].count("\\clearpage") == (many - 1) // 10
    assert tex["long"].count("\\label{tab:med-evals-07}") == 1
    # the note once, below the last float; the caption above each
    for t in tex.values():
        assert t.count("\\footnotesize\\raggedright") <= 1
    assert tex["long"].rindex("How the numbers are made.") > tex["long"].rindex("\\end{tabular}")
    # every row of the long table, once
    assert sum(len(re.findall(r"^openai/model-", t, re.M)) for t in [tex["long"]]) == 300


@pytest.mark.slow
def test_each_layout_compiles_and_fits_a_plain_article(tmp_path):
    files = []
    for name, table in LAYOUTS.items():
        path = tmp_path / f"{name}.tex"
        path.write_text(latex_table(table, 1), encoding="utf-8")
        files.append(path)
    assert failures(compile_tex(files, tmp_path / "build")) == {}


def test_keys_that_leave_no_room_are_repeated_fewer_times(tmp_path):
    """Six key columns of long unbroken names and six more: the parts repeat fewer keys, and
    every part still fits."""
    rows = [{f"k{c}": "x" * 40 for c in range(12)}]
    path = tmp_path / "keys.tex"
    path.write_text(latex_table(_table(rows, keys=6), 1), encoding="utf-8")
    specs = _specs(path.read_text())
    assert len(specs) >= 3 and all(_share(s) <= 1.0 for s in specs)
    assert failures(compile_tex([path], tmp_path / "build")) == {}


def test_the_page_is_a_plain_articles(tmp_path):
    """The text block the layout assumes is the one pdflatex gives a plain article."""
    path = tmp_path / "size.tex"
    path.write_text("\\typeout{TEXTWIDTH=\\the\\textwidth}\\typeout{TEXTHEIGHT=\\the\\textheight}")
    compile_tex([path], tmp_path / "build")
    log = (tmp_path / "build" / "all.log").read_text(encoding="latin-1")
    assert f"TEXTWIDTH={TEXT_WIDTH:.1f}pt" in log and f"TEXTHEIGHT={TEXT_HEIGHT:.1f}pt" in log
