"""``med-evals diff LOG_A LOG_B``: the paired test, the bootstrap differences and the lists for
two replayed oncology runs, as text (log text made safe for a terminal) and as JSON (the
report's numbers); its errors are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from med_evals.cli import main as cli_main
from med_evals.report.tables import fmt_diff, paired_rows
from med_evals.run_labels import group_runs
from med_evals.runs import load_runs
from med_evals.studies import ONCOLOGY_RCT
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

from .conftest import FIXTURES
from .oncology_support import follower, oncology_module
from .report import hostile
from .report.support import replay_run

CONDITIONS = "title_abstract,counterfactual"
N_BOOT = 50


def careless(text: str, sid: str, epoch: int) -> str:
    """POSITIVE, but a hostile reply (INVALID) on the samples of trials 1 and 4."""
    if sid.endswith("-001"):
        return hostile.REPLIES["ansi"]
    if sid.endswith("-004"):
        return hostile.REPLIES["script"]
    return "POSITIVE"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    def follows(text: str, sid: str, epoch: int) -> str:
        return follower(text)

    with oncology_module(tmp_path_factory, "diff") as (tmp, _):
        out = {
            "a": replay_run(oncology_rct(condition=CONDITIONS), follows, "model-a", tmp / "a"),
            "b": replay_run(oncology_rct(condition=CONDITIONS), careless, "model-b", tmp / "b"),
            "doi": replay_run(oncology_rct(condition="doi_only"), follows, "model-a",
                              tmp / "doi"),
            "medreqal": replay_run(
                medreqal(data_file=str(FIXTURES / "medreqal_fixture.csv"), bertscore=False),
                lambda t, s, e: "LABEL: SUPPORTED", "model-m", tmp / "m"),
        }
    return {k: log.location for k, log in out.items()}


def _diff(capsys, *args: str) -> tuple[int, str, str]:
    code = cli_main(["diff", *args])
    got = capsys.readouterr()
    return code, got.out, got.err


def _strict(text: str):
    """JSON as a strict parser reads it (NaN is not JSON)."""
    def refuse(name: str):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.slow
def test_json_holds_the_reports_numbers(logs, capsys):
    code, out, err = _diff(capsys, logs["a"], logs["b"], "--json", "--n-boot", str(N_BOOT))
    assert code == 0 and err == ""
    got = _strict(out)
    assert got["study"] == "oncology_rct" and got["n_boot"] == N_BOOT
    runs, _ = load_runs([logs["a"], logs["b"]])
    groups = group_runs(runs, [])[ONCOLOGY_RCT.task]
    rows = paired_rows(ONCOLOGY_RCT, groups, N_BOOT)
    assert [g.label for g in groups] == [got["a"]["label"], got["b"]["label"]]
    assert [c["condition"] for c in got["comparisons"]] == [r["condition"] for r in rows]
    for c, row in zip(got["comparisons"], rows, strict=True):
        test = c["mcnemar"]
        assert c["n_paired"] == row["n paired"]
        assert row["right only in A / in B"] == f"{test['a_only']} / {test['b_only']}"
        assert test["p_value"] == row["McNemar exact p"]
        for h in ONCOLOGY_RCT.headline:
            d = c["headline"][h.name]
            nan = float("nan")
            boot = {k: nan if d[k] is None else d[k] for k in ("difference", "lo", "hi")}
            assert fmt_diff(boot) == row[f"A − B {h.display} (95% CI)"]
        # the lists are the discordant samples, counted as the test counts them
        assert c["right_only_in_a"]["count"] == test["a_only"]
        assert c["right_only_in_b"]["count"] == test["b_only"]
        listed = [*c["right_only_in_a"]["samples"], *c["right_only_in_b"]["samples"],
                  *c["wrong_in_both"]["samples"]]
        assert c["n_paired"] >= len(listed) == len({r["sample"] for r in listed})
    # B's hostile replies: trials 1 and 4, right only in A on every condition
    for c in got["comparisons"]:
        ids = {r["sample"] for r in c["right_only_in_a"]["samples"]}
        assert {f"{c['condition']}-001", f"{c['condition']}-004"} <= ids
        [ansi] = [r for r in c["right_only_in_a"]["samples"] if r["sample"].endswith("-001")]
        assert ansi["reply_b"] == hostile.REPLIES["ansi"] and ansi["label_b"] == "INVALID"
        assert ansi["view_b"].startswith("http://127.0.0.1:7575/#/logs/b/logs/")
    assert "\x1b" not in out and "\\u001b" in out  # ASCII JSON: the escape is an escape


@pytest.mark.slow
def test_text_is_safe_for_a_terminal_and_capped(logs, capsys):
    code, out, err = _diff(capsys, logs["a"], logs["b"], "--condition", "counterfactual",
                           "--limit", "2", "--n-boot", str(N_BOOT))
    assert code == 0 and err == ""
    assert "condition counterfactual: 6 paired samples" in out
    assert "condition title_abstract" not in out
    assert "McNemar exact p = " in out and "right only in A " in out
    assert "Macro-F1" in out and "95% paired bootstrap (50 resamples, seed 0)" in out
    assert "right only in A: 5 (first 2 shown, 3 more)" in out
    assert "counterfactual-001  gold POSITIVE  A POSITIVE  B INVALID" in out
    assert "counterfactual-002 " not in out  # the third of five: not shown
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in out
    assert "reply B: \\x1b[31mred\\x1b]0;title\\x07\\x1b[0m\\x9b2J\n" in out
    assert "viewer links need inspect view --log-dir " in out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("which", "extra", "expected"),
    [
        ("medreqal", [], "LOG_A is a oncology_rct run and LOG_B a medreqal run"),
        ("doi", [], "no shared samples"),
        ("b", ["--condition", "title_abstrct"],
         "not a condition both runs have; did you mean title_abstract?"),
        ("missing", [], "LOG_B: "),
    ],
)
def test_errors_are_one_line_exit_2(logs, capsys, tmp_path, which, extra, expected):
    other = str(tmp_path / "nothing.eval") if which == "missing" else logs[which]
    code, out, err = _diff(capsys, logs["a"], other, *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("med-evals diff: error: ")
    assert expected in err
