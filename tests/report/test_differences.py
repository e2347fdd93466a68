"""Where two runs differ (issue 29): the report's per-sample lists of two replayed oncology runs
(one with hostile replies), their counts against McNemar's test and the paired comparisons, the
per-trial flip table, the viewer links, and the page in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest
from inspect_ai.log import read_eval_log
from markdown_it import MarkdownIt

from med_evals.commands.report import build_report
from med_evals.commands.report.context import Context
from med_evals.commands.report.differences import flip_rows, section
from med_evals.commands.report.document import Document
from med_evals.commands.report.tables import paired_rows
from med_evals.logs.labels import group_runs
from med_evals.logs.pairs import (
    VIEWER,
    differences,
    input_start,
    pairs,
    sample_rows,
    viewer_folder,
)
from med_evals.logs.runs import load_runs
from med_evals.scorers.oncology_rct import flip_rate
from med_evals.tasks import HEALTHFC, MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT
from med_evals.tasks.oncology_rct import oncology_rct

from ..oncology_support import follower, oncology_module
from ..support.browser import chromium_page
from ..test_safe_text import parse
from . import hostile
from .support import prompt_text, replay_run

CONDITIONS = "title_abstract,counterfactual"
#: run B's hostile replies, one per sample of every other sample (the 1 MB reply first)
B_HOSTILE = ["big", "script", "img", "ansi", "rtl", "table"]
#: run A's sample replayed with three epochs that disagree: the majority is epoch 2's label
EPOCH_SAMPLE = "title_abstract-001"
RAW = ("\x00", "\x1b", "\x07", "\x9b", "\u202e", "\u202c")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    with oncology_module(tmp_path_factory, "differences") as (tmp, _):
        return _differing_runs(tmp)


def _differing_runs(tmp: Path) -> tuple[Path, dict[str, str], dict[str, str]]:
    task = oncology_rct(condition=CONDITIONS)
    ids = [str(s.id) for s in task.dataset]
    b_replies = {sid: hostile.REPLIES[B_HOSTILE[i // 2 % len(B_HOSTILE)]] if i % 2 == 0
                 else "POSITIVE" for i, sid in enumerate(ids)}
    # A: INVALID on two samples B gets right and on one B gets wrong (wrong in both)
    positive = [str(s.id) for i, s in enumerate(task.dataset) if i % 2 and s.target == "POSITIVE"]
    invalid = {*positive[:2], ids[0]}

    def reply_a(text: str, sid: str, epoch: int) -> str:
        """The text's outcome, but INVALID on ``invalid``, and the first epoch of one sample
        wrong (its majority, and the reply shown, is epoch 2's)."""
        if sid in invalid:
            return "Positive."
        if sid == EPOCH_SAMPLE and epoch == 1:
            return "POSITIVE" if follower(text) == "NEGATIVE" else "NEGATIVE"
        return follower(text)

    assert EPOCH_SAMPLE not in invalid and len(invalid) == 3
    replay_run(task, reply_a, "model-a", tmp, epochs=3)
    replay_run(oncology_rct(condition=CONDITIONS), lambda t, s, e: b_replies[s], "model-b", tmp)
    return tmp / "logs", {str(s.id): prompt_text(s) for s in task.dataset}, b_replies


@pytest.fixture(scope="module")
def report(logs, tmp_path_factory):
    return build_report([logs[0]], tmp_path_factory.mktemp("out") / "report", n_boot=20)


def _groups(log_dir: Path):
    runs, _ = load_runs([log_dir])
    return runs, group_runs(runs, [])[ONCOLOGY_RCT.task]


def _correct_in_logs(log_dir: Path) -> dict[str, dict[str, int]]:
    """model -> sample id -> 1 when the epoch-reduced label is the target, read from the logs'
    own reductions (not through med_evals)."""
    out = {}
    for path in sorted(log_dir.glob("*.eval")):
        log = read_eval_log(str(path))
        [red] = [r for r in log.reductions or [] if r.scorer == "trial_outcome"]
        name = "a" if "model-a" in log.eval.model else "b"
        out[name] = {str(s.sample_id): int(s.value["prediction"] == s.value["target"])
                     for s in red.samples}
    return out


@pytest.mark.slow
def test_counts_are_mcnemars_discordant_counts(logs):
    log_dir, _, _ = logs
    _, groups = _groups(log_dir)
    correct = _correct_in_logs(log_dir)
    found = pairs(ONCOLOGY_RCT, groups)
    assert [p.condition for p in found] == ["title_abstract", "counterfactual"]
    rows = paired_rows(ONCOLOGY_RCT, groups, n_boot=20)
    for pair, row in zip(found, rows, strict=True):
        d = differences(pair)
        a_name = "a" if "model-a" in pair.a.label else "b"
        ca, cb = correct[a_name], correct["b" if a_name == "a" else "a"]
        assert d.a_only == [k for k in pair.keys if ca[k] and not cb[k]]
        assert d.b_only == [k for k in pair.keys if cb[k] and not ca[k]]
        assert d.both_wrong == [k for k in pair.keys if not ca[k] and not cb[k]]
        # the counts printed beside the test are the test's
        assert d.test is not None
        assert (d.test["a_only"], d.test["b_only"]) == (len(d.a_only), len(d.b_only))
        assert row["condition"] == pair.condition and row["n paired"] == len(pair.keys)
        assert row["right only in A / in B"] == f"{len(d.a_only)} / {len(d.b_only)}"
        assert row["McNemar exact p"] == d.test["p_value"]
    # the fixture gives each list something: A right where B's reply was hostile, B right where
    # A's was INVALID, both wrong where both were
    lists = [differences(p) for p in found]
    assert all(sum(map(len, (d.a_only, d.b_only, d.both_wrong))) for d in lists)
    assert any(d.b_only for d in lists) and any(d.a_only for d in lists)


@pytest.mark.slow
def test_rows_carry_input_replies_epochs_and_viewer_links(logs):
    log_dir, inputs, b_replies = logs
    runs, groups = _groups(log_dir)
    root = viewer_folder(runs)
    assert root == str(log_dir.resolve())
    [pair] = [p for p in pairs(ONCOLOGY_RCT, groups) if p.condition == "title_abstract"]
    a_is_a = "model-a" in pair.a.label
    [row] = sample_rows(ONCOLOGY_RCT, pair, [EPOCH_SAMPLE], root)
    reply = row.reply_a if a_is_a else row.reply_b
    view = row.view_a if a_is_a else row.view_b
    # three epochs: the reply shown is the first whose label is the majority (epoch 2)
    assert reply is not None and (reply.epoch, reply.epochs) == (2, 3)
    assert reply.short().startswith("[epoch 2/3] ")
    log_a = next(r for r in runs if "model-a" in r.model)
    assert view == (f"{VIEWER}/#/logs/{quote(Path(log_a.path).name)}/samples/sample/"
                    f"{EPOCH_SAMPLE}/2/")
    # the start of the input: the trial's title (the text after "Title: ")
    title = inputs[EPOCH_SAMPLE].split("\n\n")[0].removeprefix("Title: ")
    assert row.input == title
    # the 1 MB reply: kept to 20,000 characters, the rest counted
    [big] = [k for k, v in b_replies.items() if v is hostile.BIG_REPLY]
    [cond] = {p.condition for p in pairs(ONCOLOGY_RCT, groups) if big in p.keys}
    [pair] = [p for p in pairs(ONCOLOGY_RCT, groups) if p.condition == cond]
    [row] = sample_rows(ONCOLOGY_RCT, pair, [big], root)
    got = row.reply_b if a_is_a else row.reply_a
    assert got is not None and got.chars == len(hostile.BIG_REPLY)
    assert got.full().startswith(hostile.BIG_REPLY[:20_000])
    assert got.full().endswith(f"({len(hostile.BIG_REPLY) - 20_000:,} more characters in the log)")
    assert len(got.short()) <= 120


def test_input_start_per_study():
    from med_evals.tasks.medevidence import user_prompt

    prompt = user_prompt("Does drug X lower mortality?", [{"article_id": 1, "title": "T",
                                                          "content": "c" * 5000}], "five")
    assert input_start(MEDEVIDENCE, prompt) == "Does drug X lower mortality?"
    assert input_start(ONCOLOGY_RCT, "DOI: 10.1/x\n\nTitle: A trial\n\nAbstract: ...") == "A trial"
    assert input_start(ONCOLOGY_RCT, "DOI: 10.1/x") == "DOI: 10.1/x"
    claim = "Is green tea\n good for  you? " + "x" * 300
    got = input_start(MEDREQAL, claim)
    assert got.startswith("Is green tea good for you? x") and got.endswith("…") and len(got) == 160


@pytest.mark.parametrize("variant", ["chat", "mistral", "alpaca"])
def test_input_start_is_the_question_in_every_verdict_prompt(variant):
    """MedREQAL's question and HealthFC's claim inside each prompt variant, before HealthFC's
    evidence; a prompt cut off (the log's first 2,000 characters) inside the question: the
    question to the cut."""
    from med_evals.solvers.medreqal import render

    question = "Does {x} lower blood pressure?"  # braces stay (rendered with str.replace)
    user = render(variant, question)[1]
    assert user != question and input_start(MEDREQAL, user) == question
    assert input_start(HEALTHFC, user) == question
    user = render(variant, question, "Trials found no effect.\n\nQUESTION: (x)")[1]
    assert input_start(HEALTHFC, user) == question
    long = "Is it " + "y" * 3000 + "?"
    cut = render(variant, long)[1][:2000]
    assert input_start(MEDREQAL, cut) == ("Is it " + "y" * 153 + "…")


@pytest.mark.slow
def test_lists_are_capped_and_say_how_many_more(logs, tmp_path):
    log_dir, _, _ = logs
    _, groups = _groups(log_dir)
    ctx = Context(Document("t"), tmp_path, None, 20)
    section(ctx, ONCOLOGY_RCT, groups, limit=1)
    tables = [b for b in ctx.doc.blocks if b[0] == "table"]
    assert tables and all(len(rows) == 1 for _, rows, _ in tables)
    counts = [int(m.group(1)) for _, _, cap in tables
              for m in [re.search(r": (\d+) samples?, ", cap)]]
    for (_, _, cap), n in zip(tables, counts, strict=True):
        assert cap.endswith("all shown" if n <= 1 else f"first 1 shown, {n - 1:,} more"), cap
    assert any(n > 1 for n in counts)
    notes = [b[1] for b in ctx.doc.blocks if b[0] == "p"]
    assert any("right only in A:" in n and "exact p =" in n for n in notes)


@pytest.mark.slow
def test_flip_table_counts_the_flip_rates_flips(logs, report):
    log_dir, _, _ = logs
    _, groups = _groups(log_dir)
    runs, rows = flip_rows(ONCOLOGY_RCT, groups)
    assert len(runs) == 2 and [r["trial"] for r in rows] == list(range(6))
    for g in runs:
        fr = flip_rate(g.values.values(), "title_abstract", "counterfactual")
        assert sum(r[f"{g.label}: flipped"] is True for r in rows) == fr["count"]
        assert sum(isinstance(r[f"{g.label}: flipped"], bool) for r in rows) == fr["n"]
    md = report.markdown.read_text(encoding="utf-8")
    assert "*Per trial: each run's prediction under title_abstract and counterfactual" in md


@pytest.mark.slow
def test_report_md_lists_them_escaped(report):
    md = report.markdown.read_text(encoding="utf-8")
    assert "### Oncology" in md and "where two runs differ" in md
    assert f"inspect view --log-dir {Path(report.markdown).parent}" not in md  # the logs' folder
    assert "inspect view --log-dir " in md and f"]({VIEWER}/#/logs/" in md
    assert not [c for c in RAW if c in md]
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    for element in ("<script", "<svg", "<iframe", "<img src=x", "<b>"):
        assert element not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    # every row of a differences table has its header's cells (no `|` of a reply broke it)
    for line in md.splitlines():
        if line.startswith("| ") and "open](" in line:
            assert len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) == 10, line


@pytest.mark.slow
def test_page_fits_toggles_open_and_hostile_replies_stay_inert(report, tmp_path):
    dialogs: list[str] = []
    with chromium_page() as page:
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(report.html.as_uri())
        page.wait_for_load_state("load")
        toggles = page.locator("td details > summary")
        n = toggles.count()
        assert n >= 6
        for i in range(n):
            toggles.nth(i).click()
        page.wait_for_timeout(300)  # an onerror or onload handler would have run by now
        state = page.evaluate(
            """() => ({
              open: Array.from(document.querySelectorAll('td details')).every(d => d.open),
              fulls: Array.from(document.querySelectorAll('td details .full'))
                       .map(e => e.textContent),
              shown: Array.from(document.querySelectorAll('td details .full'))
                       .every(e => e.getBoundingClientRect().height > 0),
              width: [document.documentElement.scrollWidth, window.innerWidth],
              tooWide: Array.from(document.querySelectorAll('table, img, details')).filter(
                e => e.getBoundingClientRect().right
                     > document.body.getBoundingClientRect().right + 1).length,
              live: document.querySelectorAll(
                'script, svg, iframe, [onerror], [onload], td img, td b').length,
            })"""
        )
        page.screenshot(path=str(tmp_path / "differences.png"), full_page=True)
    assert problems == [] and dialogs == []
    assert state["open"] and state["shown"]
    assert state["width"][0] <= state["width"][1] == 1280
    assert state["tooWide"] == 0 and state["live"] == 0
    fulls = state["fulls"]
    # the whole reply opens as text: the element a reply holds, and the 1 MB one's count
    assert any(f.startswith("<script>alert(7)</script>lorem ipsum") and
               f.endswith("more characters in the log)") for f in fulls)
    assert any("<b>c</b>" in f for f in fulls)
    html = report.html.read_text(encoding="utf-8")
    assert not [c for c in RAW if c in html]
    cells = [c for t in parse(html).tables for row in t for c in row]
    assert any(c.startswith("<img src=x onerror=alert(2)>") for c in cells)
