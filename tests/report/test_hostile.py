"""Hostile replies, a hostile recorded model name and hostile file names, through the real tasks
and the report (issues 27 and 44): each reply scored INVALID and logged verbatim, nothing live
in report.html or in report.md rendered with HTML on, every table whole; every CSV export
without a split row, a formula or a raw control, every LaTeX export compiling with the text
visible."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from markdown_it import MarkdownIt

from med_evals.commands.report import build_report
from med_evals.outputs.text import LATEX_PRINTS, csv_text, latex_text, terminal
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

from ..conftest import FIXTURES
from ..oncology_support import FIXTURE_CSV, install_fixture
from ..support.browser import chromium_page
from ..support.evals import inspect_eval
from ..test_safe_text import parse, squash
from . import hostile
from .exported import compile_tex, failures, pdflatex, read_csv_typed

CONDITIONS = "title_abstract,doi_only"  # 12 samples: every hostile reply at least once
RAW = ("\x00", "\x1b", "\x07", "\x9b", "\u202e", "\u202c")
#: the score holding each task's parsed label
PREDICTION = {"oncology_rct": "trial_outcome", "medreqal": "verdict"}


def _replay(task, name: str, out: Path, model: str = hostile.MODEL, reply: str | None = None):  # noqa: ANN001
    """Run ``task`` replaying the hostile replies (or ``reply`` to every sample) as ``model``:
    (log path, recording, sample id -> reply)."""
    ids = [str(s.id) for s in task.dataset]
    rec = out / "recordings" / f"{name}.jsonl"
    rec.parent.mkdir(parents=True, exist_ok=True)
    if reply is None:
        given = hostile.recording(rec, task.name.split("/")[-1], ids, model)
    else:
        rec.write_text("".join(json.dumps({"id": i, "reply": reply, "model": model}) + "\n"
                               for i in ids), encoding="utf-8")
        given = [reply] * len(ids)
    [log] = inspect_eval(task, model=f"replay/{rec}", log_dir=str(out / "logs"), display="none")
    assert log.status == "success", log.error
    return log.location, rec, dict(zip(ids, given, strict=True))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A hostile oncology run (model name, replay file name and ``trials_file`` name hostile
    too), a clean one beside it (so labels carry the trials file and figures are drawn), and a
    hostile MedREQAL run."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("hostile")
    install_fixture(tmp / "onc", mp)
    trials = tmp / "trials" / hostile.TRIALS_NAME
    trials.parent.mkdir()
    shutil.copy(FIXTURE_CSV, trials)
    out = {
        "oncology": _replay(oncology_rct(condition=CONDITIONS, trials_file=str(trials)),
                            hostile.RECORDING_NAME, tmp),
        "clean": _replay(oncology_rct(condition=CONDITIONS), "clean", tmp, "clean-model",
                         reply="POSITIVE"),
        "medreqal": _replay(
            medreqal(data_file=str(FIXTURES / "medreqal_fixture.csv"), bertscore=False),
            "medreqal-hostile", tmp),
    }
    mp.undo()
    return tmp, out


@pytest.fixture(scope="module")
def report(runs):
    tmp, _ = runs
    return build_report([tmp / "logs"], tmp / "report", n_boot=20)


@pytest.mark.slow
def test_each_hostile_reply_is_invalid_and_logged_verbatim(runs):
    _, out = runs
    for name in ("oncology", "medreqal"):
        path, _, given = out[name]
        log = read_eval_log(path)
        task = log.eval.task.split("/")[-1]
        assert set(given.values()) == set(hostile.REPLIES.values())  # each one replayed
        assert len(log.samples or []) == len(given)
        for sample in log.samples or []:
            # byte for byte, NUL, ESC, the bidi override and all 1 MB included
            assert sample.output.completion == given[str(sample.id)], sample.id
            assert sample.output.model == hostile.MODEL
            score = sample.scores[PREDICTION[task]].value
            assert score["prediction"] == "INVALID" and not score["valid"], sample.id


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line))


def _tables(md: str) -> list[list[str]]:
    """The tables of report.md, as their source lines."""
    tables, current = [], []
    for line in [*md.splitlines(), ""]:
        if line.startswith("| "):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["commonmark", "gfm-like"])
def test_report_md_renders_nothing_live_and_whole_tables(runs, report, preset):
    _, out = runs
    md = report.markdown.read_text(encoding="utf-8")
    assert not [c for c in RAW if c in md]
    renderer = (MarkdownIt("commonmark", {"html": True}).enable("table") if preset == "commonmark"
                else MarkdownIt("gfm-like"))
    html = renderer.render(md)
    got = parse(html)
    allowed = {"h1", "h2", "h3", "p", "em", "blockquote", "img", "table", "thead", "tbody", "tr",
               "th", "td"}
    assert {t for t, _ in got.tags} - {"a"} <= allowed
    # links: the viewer's (http) and our table exports beside report.md (tables/<hash>/...)
    assert all(re.match(r"https?://|tables/[0-9a-f]{12}/[0-9]{2}-[a-z0-9-]+\.(csv|tex)$",
                        a.get("href") or "") for t, a in got.tags if t == "a")
    assert all((a.get("src") or "").startswith("figures/") for t, a in got.tags if t == "img")
    assert not [a for _, attrs in got.tags for a in attrs if a.lower().startswith("on")]
    for element in ("<script", "<svg", "<iframe", "<img src=x", "<b>"):
        assert element not in html.lower()
    # every row of every table has its header's cells: no `|` of a log broke a row
    for table in _tables(md):
        assert len({_unescaped_pipes(line) for line in table}) == 1, table[0]
    # the log's strings stand in their cells, literally (controls made visible)
    label = f"{hostile.MODEL} (replayed), trials_file={hostile.TRIALS_NAME}"
    cells = [squash(c) for t in got.tables for row in t for c in row]
    assert squash(terminal(label, one_line=True)) in cells
    assert squash(terminal(f"replay/{out['oncology'][1]}", one_line=True)) in cells
    assert "clean-model (replayed), trials_file=—" in cells
    assert any(squash(terminal(f"trials_file={Path(hostile.TRIALS_NAME).name}")) in c
               for c in cells)


@pytest.mark.slow
def test_no_dialog_fires_in_chromium(runs, report, tmp_path):
    md_html = tmp_path / "report-md.html"
    md_html.write_text(MarkdownIt("commonmark", {"html": True}).enable("table").render(
        report.markdown.read_text(encoding="utf-8")), encoding="utf-8")
    dialogs: list[str] = []
    with chromium_page() as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        for path in (report.html, md_html):
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            page.wait_for_timeout(300)  # an onerror or onload handler would have run by now
            live = page.evaluate(
                "document.querySelectorAll('script, svg, iframe, [onerror], [onload]').length"
            )
            assert live == 0, path.name
    assert dialogs == []
    html = report.html.read_text(encoding="utf-8")
    assert not [c for c in RAW if c in html]
    cells = [c for t in parse(html).tables for row in t for c in row]
    label = f"{hostile.MODEL} (replayed), trials_file={hostile.TRIALS_NAME}"
    assert terminal(label) in cells


# --- the exports (issue 44, items 5 and 10) ------------------------------------------------

#: what a spreadsheet reads as the start of a formula
FORMULA = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


@pytest.mark.slow
def test_csv_exports_split_no_row_and_hold_no_formula_or_raw_control(runs, report):
    _, out = runs
    label = f"{hostile.MODEL} (replayed), trials_file={hostile.TRIALS_NAME}"
    cells: set[str] = set()
    for csv_path, _ in report.tables:
        raw = csv_path.read_text(encoding="utf-8")
        # no raw control or bidi character, and no CR at all: a bare CR ends a spreadsheet's row
        assert not [c for c in (*RAW, "\r", "\u200f") if c in raw], csv_path.name
        with csv_path.open(encoding="utf-8", newline="") as f:
            header, *rows = list(csv.reader(f))
        assert rows and all(len(r) == len(header) for r in rows), csv_path.name
        typed = read_csv_typed(raw)
        assert [[v for v, _ in r] for r in typed] == [header, *rows]  # as csv reads it
        for value, quoted in (f for r in typed for f in r):
            # a formula start only on a number (``-0.25``), else neutralised with a '
            assert not value.startswith(FORMULA) or _NUMBER.fullmatch(value), value
            # unquoted: a number or empty; any text is quoted
            assert quoted or value == "" or _NUMBER.fullmatch(value), (csv_path.name, value)
            cells.add(value)
    # the hostile texts stand in their cells whole, their controls made visible
    assert csv_text(label) in cells and csv_text(hostile.MODEL) in " ".join(cells)
    assert csv_text(hostile.REPLIES["cr"]) == "POSITIVE\\r=cmd|' /C calc'!A0"
    assert csv_text(hostile.REPLIES["cr"]) in cells
    # UTF-8 as it is, but the invisible format characters (a bidi mark, the emoji's zero-width
    # joiner: Unicode's Cf, shown as escapes everywhere since two model names differing by one
    # printed alike)
    assert hostile.REPLIES["scripts"].replace("\u200f", "\\u200f").replace(
        "\u200d", "\\u200d") in cells
    assert not [c for c in cells if c.startswith("=cmd")]


def _printed(tex: str) -> str:
    """A LaTeX cell or caption as its text reads (our break points and alignment left out)."""
    return re.sub(r"\\allowbreak\{\}|\\raggedright |\\raggedleft ", "", tex)


@pytest.mark.slow
def test_latex_exports_compile_and_show_the_hostile_text(runs, report, tmp_path):
    pdflatex()
    tex = [t for _, t in report.tables]
    assert failures(compile_tex(tex, tmp_path)) == {}
    label = f"{hostile.MODEL} (replayed), trials_file={hostile.TRIALS_NAME}"
    text = " ".join(_printed(line) for t in tex for line in t.read_text(encoding="utf-8")
                    .splitlines() if not line.startswith("%"))  # a comment is not read
    # only what pdflatex prints in a plain article; the rest as visible escapes
    assert set(text) <= LATEX_PRINTS | {"\n"}
    assert latex_text(label) in text
    assert "\\textbackslash{}u043c\\textbackslash{}u043e" in latex_text(label)  # Cyrillic
    assert latex_text(" ".join(hostile.REPLIES["scripts"].split())) in text
    # a reply as report.md shows it: on one line (a CR a blank), the whole in the CSV
    assert latex_text(" ".join(hostile.REPLIES["cr"].split())) in text
