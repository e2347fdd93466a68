"""Tokens and cost per role, from the logs (med_evals.logs.usage): runs against the local fake
OpenAI
server counting words as tokens, so every figure is checked against a count of what the server
received and answered; the report, compare's table, the baseline and the gate print the same."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from inspect_ai.model import ModelCost, get_model

from med_evals.commands.cli import main
from med_evals.commands.compare import Comparison, _row, format_table
from med_evals.commands.regress import make_baseline, regress
from med_evals.commands.report import build_report
from med_evals.logs.runs import load_run
from med_evals.logs.usage import (
    REPLAYED,
    money,
    read_prices,
    run_usage,
)
from med_evals.outputs.exit_codes import CommandError
from med_evals.tasks import MEDREQAL, ONCOLOGY_RCT
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import FIXTURES
from .oncology_support import follower, oncology_module
from .support.evals import inspect_eval
from .support.fake_openai import FakeOpenAIServer, _all_text, _last_user

MEDREQAL_FIXTURE = FIXTURES / "medreqal_fixture.csv"
GRADER_PROMPT = "You compare a model's answer"
#: $ per million tokens (Inspect's ModelCost fields); the replayed model's price must be unused
PRICES = {
    "openai-api/fake/model-a": {"input": 2.5, "output": 10.0, "input_cache_write": 3.0,
                                "input_cache_read": 1.25},
    "openai-api/fake/model-b": {"input": 1.0, "output": 4.0, "input_cache_write": 0.0,
                                "input_cache_read": 0.0},
    "openai-api/fake/judge-b": {"input": 0.5, "output": 1.5, "input_cache_write": 0.0,
                                "input_cache_read": 0.0},
    "replay/gpt-rec": {"input": 100.0, "output": 100.0, "input_cache_write": 0.0,
                       "input_cache_read": 0.0},
}
#: the replayed run's recorded usage per call
RECORDED = {"input_tokens": 100, "output_tokens": 2, "reasoning_tokens": 5}


def _sentence(text: str) -> str:
    """model-b: a sentence, not a label, for some trials (not a valid reply)."""
    return "It is NEGATIVE" if "did not meet" in text else "POSITIVE"


def _judged(text: str) -> str:
    """The MedREQAL run's server: the graders' verdict, else the model's answer."""
    if text.startswith(GRADER_PROMPT):
        return '{"verdict": "agrees", "reason": "same"}'
    return "LABEL: SUPPORTED. It helps."


def _hand_count(server: FakeOpenAIServer) -> dict[tuple[str, str], list[int]]:
    """(model as the server saw it, 'grader' or 'model') -> [prompt words, reply words]: the
    server's own word counts, from the requests it received."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for path, body in server.requests:
        if not path.endswith("/chat/completions"):
            continue
        last = _last_user(body)
        key = (body["model"], "grader" if last.startswith(GRADER_PROMPT) else "model")
        out[key][0] += len(_all_text(body).split())
        out[key][1] += len(server.reply(last).split())
    return dict(out)


def _cost(model: str, tokens: list[int]) -> float:
    p = PRICES[model]
    return tokens[0] * p["input"] / 1e6 + tokens[1] * p["output"] / 1e6


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two oncology runs (model-a, model-b), a replayed oncology run whose recording carries
    usage, and a MedREQAL run judged by two graders: grader on model-a, the model under test's
    model too (another instance, as ``--model-role grader=<the same model>`` makes), grader_2 on
    judge-b."""
    with oncology_module(tmp_path_factory, "usage") as (tmp, _):
        yield _usage_runs(tmp)


def _usage_runs(tmp: Path) -> dict[str, Any]:
    logs = tmp / "logs"
    ids = [s.id for s in oncology_rct().dataset]
    recording = tmp / "gpt-rec.jsonl"
    recording.write_text("".join(
        json.dumps({"id": i, "reply": "POSITIVE", "model": "gpt-rec", "usage": RECORDED}) + "\n"
        for i in ids))
    with (FakeOpenAIServer(reply=follower, word_usage=True) as sa,
          FakeOpenAIServer(reply=_sentence, word_usage=True) as sb):
        a = get_model("openai-api/fake/model-a", base_url=sa.base_url, api_key="test")
        b = get_model("openai-api/fake/model-b", base_url=sb.base_url, api_key="test")
        replay = get_model("replay/gpt-rec", file=str(recording))
        oncology = inspect_eval(oncology_rct(), model=[a, b, replay], display="none",
                                log_dir=str(logs), max_tasks=3)
    with FakeOpenAIServer(reply=_judged, word_usage=True) as sj:
        def fake(name: str):
            return get_model(f"openai-api/fake/{name}", base_url=sj.base_url, api_key="test",
                             memoize=False)

        [judged] = inspect_eval(
            medreqal, task_args={"data_file": str(MEDREQAL_FIXTURE), "judge": True,
                                 "generation_scoring": False},
            model=fake("model-a"), model_roles={"grader": fake("model-a"),
                                                "grader_2": fake("judge-b")},
            display="none", log_dir=str(logs), limit=3,
        )
    assert all(lg.status == "success" for lg in [*oncology, judged])
    prices_file = tmp / "prices.yaml"
    prices_file.write_text(yaml.safe_dump(PRICES))
    by_model = {lg.eval.model: lg for lg in oncology}
    return {
        "tmp": tmp, "logs": logs, "prices_file": prices_file,
        "count_a": _hand_count(sa)[("model-a", "model")],
        "count_b": _hand_count(sb)[("model-b", "model")],
        "count_judged": _hand_count(sj),
        # model-b's valid replies: the requests it answered with a label
        "valid_b": sum(_sentence(_last_user(body)) == "POSITIVE"
                       for path, body in sb.requests if path.endswith("/chat/completions")),
        "a": by_model["openai-api/fake/model-a"], "b": by_model["openai-api/fake/model-b"],
        "replay": by_model["replay/gpt-rec"], "judged": judged, "n": len(ids),
    }


def _usage(log, study, prices=None):
    run = load_run(str(log.location))
    return run_usage(str(log.location), study, list(run.values.values()), prices)


def _tokens(role):
    return [role.usage.input_tokens, role.usage.output_tokens]


@pytest.mark.slow
def test_tokens_per_role_equal_the_servers_count(runs):
    a = _usage(runs["a"], ONCOLOGY_RCT)
    assert [(r.role, r.model) for r in a.roles] == [("model", "openai-api/fake/model-a")]
    assert _tokens(a.roles[0]) == runs["count_a"]
    assert a.roles[0].usage.reasoning_tokens is None  # the server reports none
    assert _tokens(_usage(runs["b"], ONCOLOGY_RCT).roles[0]) == runs["count_b"]
    # the judged run: the model under test and grader share model-a; the log counts them apart
    j = _usage(runs["judged"], MEDREQAL)
    assert [(r.role, r.model) for r in j.roles] == [
        ("model", "openai-api/fake/model-a"), ("grader", "openai-api/fake/model-a"),
        ("grader_2", "openai-api/fake/judge-b")]
    counts = runs["count_judged"]
    assert [_tokens(r) for r in j.roles] == [
        counts[("model-a", "model")], counts[("model-a", "grader")], counts[("judge-b", "grader")]]
    # the replayed run: the recording's usage, as recorded
    r = _usage(runs["replay"], ONCOLOGY_RCT)
    assert (r.roles[0].usage.input_tokens, r.roles[0].usage.output_tokens,
            r.roles[0].usage.reasoning_tokens) == tuple(runs["n"] * v for v in RECORDED.values())


@pytest.mark.slow
def test_cost_from_a_prices_file_and_per_answer(runs):
    prices = read_prices(runs["prices_file"])
    counts = runs["count_judged"]
    a = _usage(runs["a"], ONCOLOGY_RCT, prices)
    cost_a = _cost("openai-api/fake/model-a", runs["count_a"])
    assert a.total.dollars == pytest.approx(cost_a, rel=1e-12) and a.total.source == "--prices"
    # the oncology study: cost per valid reply (model-a: every reply valid)
    assert (a.answer, a.answers) == ("valid reply", runs["n"])
    assert a.per_answer.dollars == pytest.approx(cost_a / runs["n"], rel=1e-12)
    b = _usage(runs["b"], ONCOLOGY_RCT, prices)
    cost_b = _cost("openai-api/fake/model-b", runs["count_b"])
    assert 0 < runs["valid_b"] < runs["n"]
    assert b.answers == runs["valid_b"]  # "It is NEGATIVE" is not a valid reply
    assert b.per_answer.dollars == pytest.approx(cost_b / runs["valid_b"], rel=1e-12)
    # MedREQAL: cost per correct answer; three roles priced, the run's cost their sum
    j = _usage(runs["judged"], MEDREQAL, prices)
    want = [_cost(m, t) for m, t in (("openai-api/fake/model-a", counts[("model-a", "model")]),
                                     ("openai-api/fake/model-a", counts[("model-a", "grader")]),
                                     ("openai-api/fake/judge-b", counts[("judge-b", "grader")]))]
    assert [c.dollars for c in j.costs] == pytest.approx(want, rel=1e-12)
    assert j.total.dollars == pytest.approx(math.fsum(want), rel=1e-12)
    # the fixture's first three questions are SUPPORTED, REFUTED, NEI: "SUPPORTED" is right once
    assert (j.answer, j.answers) == ("correct answer", 1)
    assert j.per_answer.dollars == pytest.approx(math.fsum(want), rel=1e-12)
    # replayed: the recording's cost, not ours, even with a price for its name
    r = _usage(runs["replay"], ONCOLOGY_RCT, prices)
    assert r.total.source == r.per_answer.source == REPLAYED and r.total.dollars is None
    # no price: unknown, never a partial sum
    none = _usage(runs["judged"], MEDREQAL, {})
    assert none.total.dollars is None
    assert "no price for openai-api/fake/model-a" in none.total.source


@pytest.mark.slow
def test_report_compare_baseline_and_gate_show_the_same_figures(runs, capsys):
    prices = read_prices(runs["prices_file"])
    a = _usage(runs["a"], ONCOLOGY_RCT, prices)
    j = _usage(runs["judged"], MEDREQAL, prices)
    # the report (its function: 20 resamples for the paired comparisons, not the command's 200)
    logs = [str(runs[k].location) for k in ("a", "replay", "judged")]
    md = build_report(logs, runs["tmp"] / "report", n_boot=20, prices=prices).markdown.read_text()
    section = md[md.index("## Tokens and cost"):md.index("## What produced each run")]
    lines = section.splitlines()
    row_a = next(line for line in lines if line.startswith("| openai-api/fake/model-a")
                 and runs["a"].location.split("/")[-1] in line)
    cells = f"| {runs['n']} | {money(a.total.dollars)} | {money(a.per_answer.dollars)} | --prices |"
    assert cells in row_a
    tokens_a = f"| {a.roles[0].usage.input_tokens} | {a.roles[0].usage.output_tokens} | — |"
    assert any(line.startswith("| openai-api/fake/model-a") and tokens_a in line
               for line in lines)
    assert any(f"| grader_2 | openai-api/fake/judge-b | {j.roles[2].usage.input_tokens} |"
               in line for line in lines)
    assert f"| 1 | {money(j.total.dollars)} | {money(j.per_answer.dollars)} |" in section
    replayed = next(line for line in lines if line.startswith("| gpt-rec (replayed)")
                    and "| replay/gpt-rec |" not in line)
    assert f"| {REPLAYED} | {REPLAYED} | {REPLAYED} |" in replayed
    n = runs["n"]
    recorded = " | ".join(str(n * v) for v in RECORDED.values())
    assert f"| model | replay/gpt-rec | {recorded} | none (replayed) |" in section

    # compare's reading side: its rows from the same logs, its table
    logs = [runs["a"], runs["replay"]]
    sources = {lg.eval.model: "here" for lg in logs}
    rows = [_row(lg, {"openai-api/fake/model-a": "model-a"}, sources, "title_abstract", prices)
            for lg in logs]
    text = format_table(Comparison("title_abstract", None, rows, [], "", Path("logs"), None))
    block = text[text.index("Tokens and cost"):]
    assert [r.label for r in rows] == ["model-a", "gpt-rec (replayed)"]
    line_a = next(line for line in block.splitlines() if line.startswith("model-a"))
    assert line_a.split()[1:] == ["model", f"{a.roles[0].usage.input_tokens:,}",
                                  str(a.roles[0].usage.output_tokens), "—",
                                  money(a.total.dollars), money(a.per_answer.dollars)]
    line_r = next(line for line in block.splitlines() if line.startswith("gpt-rec"))
    assert line_r.split()[2:] == ["model", *(f"{n * v:,}" for v in RECORDED.values()), "none",
                                  "(replayed)", "none", "(replayed)"]

    # the baseline records the same figures; the gate prints their change, never gates on it
    baseline = make_baseline([runs["a"].location, runs["judged"].location], prices)
    recorded = {r["task"]: r["usage"] for r in baseline["runs"]}
    rec_a = recorded["oncology_rct"]
    assert rec_a["cost"] == a.total.dollars and rec_a["cost_per_answer"] == a.per_answer.dollars
    assert rec_a["roles"][0]["tokens"]["input_tokens"] == a.roles[0].usage.input_tokens
    assert [r["role"] for r in rec_a["roles"]] == ["model"]
    assert [r["cost"] for r in recorded["medreqal"]["roles"]] == [c.dollars for c in j.costs]
    assert recorded["medreqal"]["answers"] == 1
    # model-b's run gated against model-a's (the same setup): the change in its figures
    b = _usage(runs["b"], ONCOLOGY_RCT, prices)
    usage: list[str] = []
    rows_g, _ = regress(baseline, [runs["b"].location], n_boot=100, usage=usage, prices=prices)
    (ia, oa), (ib, ob) = _tokens(a.roles[0]), _tokens(b.roles[0])
    assert usage == [
        f"oncology_rct / openai-api/fake/model-b: input tokens {ia:,} -> {ib:,} ({ib - ia:+,}); "
        f"output tokens {oa} -> {ob} ({ob - oa:+}); reasoning tokens — -> —; cost "
        f"{money(a.total.dollars)} -> {money(b.total.dollars)} "
        f"({money(b.total.dollars - a.total.dollars, sign=True)}); cost per valid reply "
        f"{money(a.per_answer.dollars)} -> {money(b.per_answer.dollars)} "
        f"({money(b.per_answer.dollars - a.per_answer.dollars, sign=True)})"]
    assert not any(r.metric.startswith(("cost", "tokens")) for r in rows_g)  # never gated
    # an older baseline (no usage) still reads; the command prints the lines after the table
    for run in baseline["runs"]:
        del run["usage"]
    old = runs["tmp"] / "old-baseline.json"
    old.write_text(json.dumps(baseline))
    capsys.readouterr()
    code = main(["regress", "--baseline", str(old), str(runs["a"].location), "--n-boot", "100",
                 "--prices", str(runs["prices_file"]), "--allow-absent"])
    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    at = printed.index("tokens and cost, baseline -> new (information, never gated):")
    # after the gated metrics and what the gate detects (tests/test_regress.py)
    assert printed[at - 5].startswith("gated for oncology_rct")
    assert printed[at - 4].startswith("what each gate can detect")
    assert printed[at + 1].startswith("  oncology_rct / openai-api/fake/model-a: input tokens ")
    assert "the baseline holds no token counts" in printed[at + 1]
    assert printed[-1].startswith("pass: ")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2]", "expected model name -> {input, output"),
        ("m: {input: 1, output: 2}", "model 'm': input_cache_write, input_cache_read: expected"),
        ('{"m": {"input": "x", "output": 1', "not JSON or YAML"),
        ("m: {input: cheap, output: 1, input_cache_write: 0, input_cache_read: 0}",
         "model 'm': input: expected a number"),
        # pydantic takes each of these as a price: refused, naming the field
        ("m: {input: -2.5, output: 1, input_cache_write: 0, input_cache_read: 0}",
         "model 'm': input -2.5 is negative: expected a price from 0 to 1,000,000"),
        # finite, but its cost of a run overflows to $inf (issue 44): above $1 a token
        ("m: {input: 1, output: 1.0e+308, input_cache_write: 0, input_cache_read: 0}",
         "model 'm': output 1e+308 is above 1,000,000 ($1 a token): expected a price from 0 "
         "to 1,000,000 ($ per million tokens)"),
        ('{"m": {"input": 1, "output": 1, "input_cache_write": 1000001, "input_cache_read": 0}}',
         "model 'm': input_cache_write 1000001 is above 1,000,000"),
        ("m: {input: .nan, output: 1, input_cache_write: 0, input_cache_read: 0}",
         "model 'm': input nan is not a finite number"),
        ('{"m": {"input": 1, "output": Infinity, "input_cache_write": 0, "input_cache_read": 0}}',
         "model 'm': output inf is not a finite number"),
        ("m: {input: true, output: 1, input_cache_write: 0, input_cache_read: 0}",
         "model 'm': input true is not a number"),
    ],
)
def test_a_bad_prices_file_is_one_line(tmp_path, text, says):
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(CommandError) as got:
        read_prices(path)
    assert got.value.code == 2 and says in str(got.value) and str(path) in str(got.value)


def test_a_huge_finite_price_is_one_line_before_any_log_is_read(runs, tmp_path, capsys):
    """Before: ``output: 1e308`` priced the run at ``$inf``, exit 0 (issue 44)."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("openai-api/fake/model-a: {input: 0.2, output: 1e308, "
                      "input_cache_write: 0, input_cache_read: 0}\n")
    baseline = tmp_path / "b.json"
    assert main(["baseline", runs["a"].location, "-o", str(baseline), "--prices",
                 str(prices)]) == 2
    out, err = capsys.readouterr()
    assert err == (f"med-evals baseline: error: --prices {prices}: model "
                   "'openai-api/fake/model-a': output 1e308 is above 1,000,000 ($1 a token): "
                   "expected a price from 0 to 1,000,000 ($ per million tokens) for each of "
                   "input, output, input_cache_write, input_cache_read\n")
    assert not out and not baseline.exists()


def test_prices_read_as_inspects_model_cost_config(tmp_path):
    """JSON or YAML, Inspect's ModelCost fields, as ``--model-cost-config`` reads them."""
    json_file = tmp_path / "p.json"
    json_file.write_text(json.dumps(PRICES))
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text(yaml.safe_dump(PRICES))
    assert read_prices(json_file) == read_prices(yaml_file) == {
        k: ModelCost(**v) for k, v in PRICES.items()}
    assert read_prices(None) == {}
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r"), "--prices",
                 str(tmp_path / "missing.yaml")]) == 2


def test_money_keeps_three_significant_digits_below_a_dollar():
    assert [money(x) for x in (0.0020775, 0.000136, 0.0, 12.345, 1234.5, None)] == [
        "$0.00208", "$0.000136", "$0", "$12.35", "$1,234.50", "—"]
    assert money(-0.0005, sign=True) == "-$0.0005" and money(0.01, sign=True) == "+$0.01"


@pytest.mark.slow
def test_a_misspelt_price_entry_is_named_with_the_closest_model(runs, tmp_path, capsys):
    """``openai/gpt4o:`` for ``openai/gpt-4o``: the model has no price, and the entry that
    was meant for it is named, in the cost's reason and, once, in a warning line on the
    console of baseline, regress and report (before: report named it only in the report)."""
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"openai-api/fake/modela": PRICES["openai-api/fake/model-a"]}))
    u = run_usage(runs["a"].location, ONCOLOGY_RCT,
                  list(load_run(runs["a"].location).values.values()), read_prices(prices))
    assert u.total.dollars is None
    assert u.total.source == ("no price for openai-api/fake/model-a (--prices FILE); --prices "
                              "has 'openai-api/fake/modela', not 'openai-api/fake/model-a'")
    baseline = tmp_path / "b.json"
    assert main(["baseline", runs["a"].location, "-o", str(baseline), "--prices",
                 str(prices)]) == 0
    warning = ("warning: --prices entry 'openai-api/fake/modela' matches no model in the logs "
               "(closest model: openai-api/fake/model-a)")
    err = capsys.readouterr().err
    assert err.splitlines() == [warning]
    assert main(["regress", "--n-boot", "100", "--baseline", str(baseline), runs["a"].location,
                 "--prices", str(prices)]) == 0
    assert capsys.readouterr().err.splitlines().count(warning) == 1
    assert main(["report", runs["a"].location, "--out", str(tmp_path / "report"), "--prices",
                 str(prices)]) == 0
    assert capsys.readouterr().err.splitlines().count(warning) == 1


@pytest.mark.slow
def test_usage_reported_on_some_calls_only_is_partial(tmp_path_factory, capsys):
    """A provider that reports usage on some calls only: the sums are of those calls, said to
    be partial (``usage reported on 3 of 6 calls``) and the cost a lower bound (``≥``), in the
    report, the baseline and the gate."""
    with oncology_module(tmp_path_factory, "partial_usage") as (tmp, _):
        with FakeOpenAIServer(reply=follower, word_usage=True,
                              no_usage=lambda text: len(text) % 2 == 0) as server:
            model = get_model("openai-api/fake/model-a", base_url=server.base_url, api_key="t")
            [log] = inspect_eval(oncology_rct(), model=model, display="none",
                                 log_dir=str(tmp / "logs"))
        calls, without = server.counts["ok"], server.counts["no_usage"]
        assert 0 < without < calls
        run = load_run(log.location)
        model_role = run.roles[0]
        assert (model_role.calls, model_role.reported) == (calls, calls - without)
        assert model_role.partial_text() == f"usage reported on {calls - without} of {calls} calls"
        # the tokens summed are the server's count over the calls that reported them
        counted = sum(len(_all_text(body).split()) for _, body in server.requests
                      if not len(_last_user(body)) % 2 == 0)
        assert model_role.usage.input_tokens == counted
        prices = {k: ModelCost(**v) for k, v in PRICES.items()}
        u = run.usage(prices)
        assert u.total.partial and u.total.dollars is not None
        from med_evals.logs.usage import cost_text

        assert cost_text(u.total).startswith("≥ $")
        assert u.costs[0].source == (f"--prices (partial: usage reported on {calls - without} "
                                     f"of {calls} calls)")
        baseline = make_baseline([log.location], prices)
        assert baseline["runs"][0]["usage"]["partial"] is True
        usage: list[str] = []
        regress(baseline, [log.location], n_boot=100, usage=usage, prices=prices)
        assert usage[0].endswith(f"(partial: usage reported on {calls - without} of {calls} "
                                 "calls of model)")
        result = build_report([log.location], tmp / "report", n_boot=10, prices=prices)
        md = result.markdown.read_text()
        assert f"usage reported on {calls - without} of {calls} calls" in md
