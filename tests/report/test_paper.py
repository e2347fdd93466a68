"""A report a researcher pastes into a paper (issue 38, items 6 and 7), on real logs: a replayed
oncology run, a replayed MedREQAL run judged by a jury of two graders served by local fake
OpenAI servers (word counts as tokens), a replayed HealthFC run, and a counterfactual_judges
run rated by the same two graders.

- the judge section (``report/judges.py``): each grader's numbers and the jury's, Cohen's kappa
  against scikit-learn, Krippendorff's alpha against a hand computation (nominal) and Inspect's
  own function (ordinal), ties and judge failures counted by hand from the graders' grades, and
  each grader's tokens and cost from the servers' own counts;
- the summary across studies first, its numbers the headline rows' (``report/summary.py``);
- every table as CSV and LaTeX beside report.md, linked (``report/exports.py``);
- report.html in headless Chromium: it fits 1,280 px, with no console error.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import EvalLog
from inspect_ai.model import ModelCost, get_model
from inspect_ai.scorer import SampleScore, Score, krippendorff_alpha
from sklearn.metrics import cohen_kappa_score

from med_evals.commands.report import build_report
from med_evals.commands.report.document import fmt
from med_evals.commands.report.summary import summary_rows
from med_evals.logs.labels import group_runs
from med_evals.logs.runs import load_runs
from med_evals.logs.usage import money
from med_evals.scorers.judges import AGREEMENT, JUDGE_FAILURE, TIE
from med_evals.tasks import STUDIES
from med_evals.tasks.counterfactual import counterfactual_judges
from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

from ..conftest import FIXTURES
from ..oncology_support import FIXTURE_CSV, follower
from ..support.browser import chromium_page, chromium_path
from ..support.evals import inspect_eval
from ..support.fake_openai import FakeOpenAIServer, _all_text, _last_user
from .exported import compile_tex, failures, pdflatex, tex_floats
from .support import replay_run
from .test_same_numbers import md_tables

A, P, C = AGREEMENT
GRADERS = ("grader", "grader_2")
#: $ per million tokens of each grader's model
PRICES = {
    "openai-api/fake/judge-a": ModelCost(input=2.0, output=8.0, input_cache_write=0.0,
                                         input_cache_read=0.0),
    "openai-api/fake/judge-b": ModelCost(input=0.5, output=1.5, input_cache_write=0.0,
                                         input_cache_read=0.0),
}
#: the question grader_2 never answers readably (a judge failure of its own)
FAILS = "vitamin C"
_QUESTION = re.compile(r"<question>\n(.*?)\n</question>", re.S)
_ABSTRACT = re.compile(r"<abstract>\n(.*?)\n</abstract>", re.S)


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def grade(role: str, question: str) -> str:
    """Each grader's verdict on a question (grader_2's judge failure on :data:`FAILS`)."""
    if role == "grader_2" and FAILS in question:
        return JUDGE_FAILURE
    h = _hash(question)
    return AGREEMENT[h % 3] if role == "grader" else AGREEMENT[(h // 3) % 3]


def rating(role: str, abstract: str) -> int:
    h = _hash(abstract)
    return 1 + (h % 5 if role == "grader" else (h // 5) % 5)


def grader_reply(role: str):
    """The fake server's reply: a verdict, a rating, or (for :data:`FAILS` and every follow-up
    asking again) no readable grade."""

    def reply(text: str) -> str:
        if (m := _ABSTRACT.search(text)) is not None:
            return json.dumps({"rating": rating(role, html.unescape(m.group(1))), "reason": "r"})
        if (m := _QUESTION.search(text)) is None:
            return "I cannot say."
        verdict = grade(role, html.unescape(m.group(1)))
        return "I cannot say." if verdict == JUDGE_FAILURE else json.dumps(
            {"verdict": verdict, "reason": "r"})

    return reply


def _hand_count(server: FakeOpenAIServer) -> list[int]:
    """[prompt words, reply words] over every request the server answered."""
    words = [0, 0]
    for path, body in server.requests:
        if path.endswith("/chat/completions"):
            words[0] += len(_all_text(body).split())
            words[1] += len(server.reply(_last_user(body)).split())
    return words


def _judged_run(task: Any, task_args: dict[str, Any], model: Any, out: Path,
                servers: dict[str, FakeOpenAIServer]) -> EvalLog:
    models = {"grader": "judge-a", "grader_2": "judge-b"}
    roles = {role: get_model(f"openai-api/fake/{models[role]}", base_url=s.base_url,
                             api_key="test", memoize=False) for role, s in servers.items()}
    [log] = inspect_eval(task, task_args=task_args, model=model, model_roles=roles,
                         display="none", log_dir=str(out))
    assert log.status == "success", log.error
    return log


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paper")
    replay_run(oncology_rct(trials_file=str(FIXTURE_CSV), condition="title_abstract"),
               lambda text, sid, epoch: follower(text), "openai/onc-model", tmp / "onc")
    with pytest.warns(UserWarning, match="counts differ"):
        hfc = healthfc(data_file=str(FIXTURES / "healthfc_fixture.csv"), bertscore=False)
    replay_run(hfc, lambda text, sid, epoch: "LABEL: SUPPORTED", "openai/hf-model", tmp / "hf")
    # MedREQAL, replayed (the first sample's reply failed: not judged), judged by two graders
    data = str(FIXTURES / "medreqal_fixture.csv")
    with pytest.warns(UserWarning, match="counts differ"):
        samples = list(medreqal(data_file=data, bertscore=False).dataset)
    recording = tmp / "mr" / "medreqal.jsonl"
    recording.parent.mkdir()
    recording.write_text("".join(json.dumps(
        {"id": s.id, "reply": "LABEL: SUPPORTED. It helps.", "model": "openai/mr-model"}
        if i else {"id": s.id, "reply": None, "error": "HTTP 500 (recorded)"}) + "\n"
        for i, s in enumerate(samples)))
    servers = {r: FakeOpenAIServer(reply=grader_reply(r), word_usage=True) for r in GRADERS}
    cf_servers = {r: FakeOpenAIServer(reply=grader_reply(r), word_usage=True) for r in GRADERS}
    try:
        for s in (*servers.values(), *cf_servers.values()):
            s.__enter__()
        with pytest.warns(UserWarning, match="counts differ"):
            mr = _judged_run(medreqal, {"data_file": data, "judge": True, "bertscore": False},
                             f"replay/{recording}", tmp / "mr" / "logs", servers)
        cf = _judged_run(counterfactual_judges,
                         {"trials_file": str(FIXTURE_CSV), "judge": "rate"},
                         "mockllm/model", tmp / "cf", cf_servers)
    finally:
        for s in (*servers.values(), *cf_servers.values()):
            s.__exit__(None, None, None)
    # the judged samples' questions (the judge keeps each in its sample's metadata)
    questions = {str(s.id): str(s.metadata["question"]) for s in mr.samples or []
                 if s.id != samples[0].id}
    result = build_report([tmp / "onc" / "logs", tmp / "hf" / "logs", tmp / "mr" / "logs",
                           tmp / "cf"], tmp / "report", n_boot=20, prices=PRICES)
    return {
        "result": result, "mr": mr, "cf": cf, "questions": questions,
        "words": {r: _hand_count(s) for r, s in servers.items()},
        "cf_words": {r: _hand_count(s) for r, s in cf_servers.items()},
    }


def _csv(result, slug: str) -> list[dict[str, str]]:
    """The rows of the exported CSV whose file name starts with ``<nn>-<slug>``."""
    [path] = [c for c, _ in result.tables if c.name[3:].startswith(slug)]
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _nominal_alpha(units: list[list[str]]) -> float:
    """Krippendorff's alpha, nominal, by hand (Krippendorff 2011, "Computing Krippendorff's
    alpha-reliability", the coincidence matrix): 1 - (n - 1) * sum_u D_u / sum_c,k n_c n_k."""
    values = [v for u in units for v in u]
    n = len(values)
    observed = sum(sum(a != b for i, a in enumerate(u) for j, b in enumerate(u) if i != j)
                   / (len(u) - 1) for u in units)
    counts = defaultdict(int)
    for v in values:
        counts[v] += 1
    expected = sum(counts[c] * counts[k] for c in counts for k in counts if c != k)
    return 1 - (n - 1) * observed / expected


@pytest.mark.slow
def test_the_judge_section_against_hand_counts(paper):
    result, mr = paper["result"], paper["mr"]
    grades = {sid: [grade(r, q) for r in GRADERS] for sid, q in paper["questions"].items()}
    both = [g for g in grades.values() if JUDGE_FAILURE not in g]
    assert len(both) == 10 and sum(JUDGE_FAILURE in g for g in grades.values()) == 1
    kappa = cohen_kappa_score([g[0] for g in both], [g[1] for g in both])
    alpha = _nominal_alpha(both)
    ties = sum(a != b for a, b in both)
    assert 0 < ties < len(both) and -1 < kappa < 1  # the fixture has agreement and splits
    verdicts = [g[0] if g[0] == g[1] or g[1] == JUDGE_FAILURE else TIE for g in grades.values()]
    decided = [v for v in verdicts if v != TIE]
    expected = {"agrees": decided.count(A) / len(decided), "contradicts":
                decided.count(C) / len(decided), "ties": ties, "judge_failures": 0,
                "not_judged_no_reply": 1, "n": 12}
    # the log holds the same numbers (the report's function is the log's metric)
    logged = {k: m.value for s in mr.results.scores if s.name == "conclusion_agreement"
              for k, m in s.metrics.items()}
    assert logged["jury/kappa"] == pytest.approx(kappa, abs=1e-12)
    assert logged["jury/alpha"] == pytest.approx(alpha, abs=1e-12)
    # the report: the jury's row and each grader's (CSV: the numbers in full; report.md: shown)
    rows = {r["by"]: r for r in _csv(result, "conclusion-agreement-the-jury-s-numbers")}
    assert set(rows) == {"jury (2 graders)", "grader", "grader_2"}
    jury = rows["jury (2 graders)"]
    for key, value in expected.items():
        assert float(jury[key]) == pytest.approx(value, abs=1e-12), key
        assert float(jury[key]) == logged[key]
    assert jury["n"] == "12" and jury["ties"] == str(ties)  # counts as integers
    mine = [g[1] for g in grades.values()]
    assert rows["grader_2"]["judge_failures"] == "1" and rows["grader"]["judge_failures"] == "0"
    assert float(rows["grader_2"]["agrees"]) == mine.count(A) / (len(mine) - 1)
    assert rows["grader_2"]["model"] == "openai-api/fake/judge-b"
    [agreement] = _csv(result, "conclusion-agreement-agreement-between-the-graders")
    assert agreement["kappa"] == "Cohen's, 2 graders"
    assert float(agreement["jury/kappa"]) == logged["jury/kappa"]
    assert float(agreement["jury/alpha"]) == logged["jury/alpha"]
    assert agreement["jury/kappa_items"] == "10" and agreement["jury/incomplete"] == "1"
    assert agreement["ties"] == str(ties)
    # report.md shows the same, formatted
    md = result.markdown.read_text(encoding="utf-8")
    [shown] = [r for _, cap, rs in md_tables(md) if cap.startswith("conclusion_agreement: agree")
               for r in rs]
    assert shown["jury/kappa"] == fmt(kappa) and shown["jury/alpha"] == fmt(alpha)
    assert shown["jury/kappa_items"] == "10"


@pytest.mark.slow
def test_graders_tokens_and_cost_are_the_servers_counts(paper):
    result = paper["result"]
    rows = _csv(result, "conclusion-agreement-each-grader-s-model")
    models = {"grader": "openai-api/fake/judge-a", "grader_2": "openai-api/fake/judge-b"}
    assert [r["role"] for r in rows] == list(GRADERS)
    for row in rows:
        words, price = paper["words"][row["role"]], PRICES[models[row["role"]]]
        assert row["model"] == models[row["role"]]
        assert [int(row["input tokens"]), int(row["output tokens"])] == words
        assert row["cost"] == money(words[0] * price.input / 1e6 + words[1] * price.output / 1e6)
        assert row["priced by"] == "'--prices"  # a CSV for people: no cell starts a formula
    # the counterfactual_judges run: a task that only judges, read for this section
    rows = _csv(result, "plausibility-judge-each-grader-s-model")
    assert [[int(r["input tokens"]), int(r["output tokens"])] for r in rows] == [
        paper["cf_words"][r] for r in GRADERS]


@pytest.mark.slow
def test_a_rated_jury_alpha_is_inspects_ordinal_alpha(paper):
    result, cf = paper["result"], paper["cf"]
    items = [[rating(r, t) for r in GRADERS] for s in cf.samples
             for t in (s.metadata["counterfactual_abstract"], s.metadata["abstract"])]
    scores = [SampleScore(score=Score(value=u), sample_id=i) for i, u in enumerate(items)]
    alpha = krippendorff_alpha(level="ordinal")(scores)
    kappa = cohen_kappa_score([u[0] for u in items], [u[1] for u in items])
    [row] = _csv(result, "plausibility-judge-agreement-between-the-graders")
    assert float(row["jury/alpha"]) == pytest.approx(alpha, abs=1e-12)
    assert float(row["jury/kappa"]) == pytest.approx(kappa, abs=1e-12)
    assert row["jury/kappa_items"] == str(len(items))
    by = {r["by"]: r for r in _csv(result, "plausibility-judge-the-jury-s-numbers")}
    cf_ratings = [u[0] for u in items[::2]]
    assert float(by["grader"]["cf_rating_mean"]) == pytest.approx(
        sum(cf_ratings) / len(cf_ratings), abs=1e-12)
    assert by["grader"]["cf_rating_1"] == str(cf_ratings.count(1))
    # the log the report read it from is not listed as skipped, but counted
    assert not [s for s in result.skipped if "counterfactual" in s]
    assert "; 1 runs of a task that only judges (under 'Judges'); 0 logs skipped." in \
        result.markdown.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_summary_comes_first_with_the_headline_tables_numbers(paper):
    result = paper["result"]
    md = result.markdown.read_text(encoding="utf-8")
    assert re.findall(r"^## .*", md, re.M)[0] == "## Summary across studies"
    rows = _csv(result, "each-study-s-primary-headline-number")
    assert [(r["study"], r["run"]) for r in rows] == [
        (STUDIES[h.task].title, h.label) for h in result.headline]
    assert len(rows) == 3
    for row, h in zip(rows, result.headline, strict=True):
        primary = STUDIES[h.task].headline[0]
        assert float(row["value"]) == h.values[primary.name]  # the same function, in full
        assert row["n"] == str(h.n)
    [(_, _, shown)] = [t for t in md_tables(md) if t[0] == "Summary across studies"]
    assert [r["value"] for r in shown] == [
        fmt(h.values[STUDIES[h.task].headline[0].name]) for h in result.headline]
    # each primary number's interval: the headline table's own (standing.headline_intervals)
    from med_evals.commands.report.document import fmt_interval
    from med_evals.stats.standing import entries, headline_intervals

    for r, h in zip(shown, result.headline, strict=True):
        study = STUDIES[h.task]
        [entry] = [e for e in entries(group_runs(load_runs(
            [Path(p) for p in _log_paths(result, h)])[0], [])[h.task], h.condition)
            if e.label == h.label]
        lo_hi = headline_intervals(study, entry, 20)[study.headline[0].name].interval  # n_boot
        assert r["95% interval"] == fmt_interval(lo_hi, 3)
    # the interval of each row's primary number, from the function handed in
    runs, _ = load_runs([Path(p) for h in result.headline for p in _log_paths(result, h)])
    groups = group_runs(runs, [])
    asked: list[tuple[str, str]] = []

    def interval(row, name):
        asked.append((row.label, name))
        return (0.1, 0.25)

    rows = summary_rows(groups, interval)
    assert [r["95% interval"] for r in rows] == ["0.100-0.250"] * 3
    assert asked == [(h.label, STUDIES[h.task].headline[0].name) for h in result.headline]


def _log_paths(result, row) -> list[str]:
    folder = result.markdown.parent.parent
    return [str(p) for name in row.logs for p in folder.rglob(name)]


@pytest.mark.slow
def test_every_table_exported_whole_and_linked(paper):
    result = paper["result"]
    md = result.markdown.read_text(encoding="utf-8")
    html_text = result.html.read_text(encoding="utf-8")
    links = re.findall(r"\]\((tables/[^)]+)\)", md)
    assert len(links) == 2 * len(result.tables) and len(result.tables) >= 20
    for csv_path, tex_path in result.tables:
        for path in (csv_path, tex_path):
            name = path.relative_to(result.markdown.parent).as_posix()
            assert name in links and f'href="{name}"' in html_text
        # the LaTeX: floats (parts by columns, each repeating the keys; pages of rows)
        floats = tex_floats(tex_path.read_text(encoding="utf-8"))
        with csv_path.open(encoding="utf-8", newline="") as f:
            header, *records = list(csv.reader(f))
        part = [rows for _, head, rows in floats if head == floats[0][1]]
        assert sum(len(rows) for rows in part) == len(records)  # every row, once per part
        # the CSV: one column per column shown, or per number of a cell printed from numbers
        shown = list(dict.fromkeys(c for _, head, _ in floats for c in head))
        assert len(header) >= len(shown)
    # LaTeX cells are report.md's cells; the summary whole
    [(_, _, shown_rows)] = [t for t in md_tables(md) if t[0] == "Summary across studies"]
    [(_, tex_path)] = [t for t in result.tables if "each-study" in t[0].name]
    cells = [r for _, _, rows in tex_floats(tex_path.read_text(encoding="utf-8")) for r in rows]
    assert cells == [list(r.values()) for r in shown_rows]


@pytest.mark.slow
def test_every_export_compiles_with_pdflatex_in_a_plain_article(paper, tmp_path):
    """The judge tables too (tests/report/test_exports_latex.py: the studies' tables)."""
    result = paper["result"]
    assert any("agreement-between-the-graders" in t.name for _, t in result.tables)
    pdflatex()
    assert failures(compile_tex([t for _, t in result.tables], tmp_path)) == {}


@pytest.mark.slow
def test_the_report_fits_1280_px_in_chromium_with_no_console_error(paper, tmp_path):
    chromium_path()
    result = paper["result"]
    with chromium_page(width=1280) as page:
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("requestfailed", lambda req: problems.append(f"request failed: {req.url}"))
        page.goto(result.html.as_uri())
        page.wait_for_load_state("load")
        page_width, view_width = page.evaluate(
            "[document.documentElement.scrollWidth, window.innerWidth]")
        too_wide = page.evaluate(
            """Array.from(document.querySelectorAll('table, img, p, h2, h3')).filter(
                 e => e.getBoundingClientRect().right
                      > document.body.getBoundingClientRect().right + 1).length""")
        hrefs = page.evaluate(
            "Array.from(document.querySelectorAll('a[href^=\"tables/\"]')).map(a => a.href)")
        headings = page.evaluate(
            "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)")
    assert problems == []
    assert page_width <= view_width == 1280 and too_wide == 0
    assert hrefs and all(Path(h.removeprefix("file://")).is_file() for h in hrefs)
    assert headings[0] == "Summary across studies" and "Judges" in headings
    assert len(result.figures) >= 3
