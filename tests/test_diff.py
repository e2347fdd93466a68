"""``med-evals diff LOG_A LOG_B``: the paired test, the bootstrap differences and the lists for
two replayed oncology runs, as text (log text made safe for a terminal) and as JSON (the
report's numbers); its errors are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from med_evals.commands.cli import main as cli_main
from med_evals.commands.report.tables import fmt_diff, paired_rows
from med_evals.logs.labels import group_runs
from med_evals.logs.runs import load_runs
from med_evals.tasks import ONCOLOGY_RCT
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


@pytest.mark.slow
def test_a_condition_runs_without_conditions_do_not_have(logs, capsys):
    """MedREQAL runs of one prompt variant record no condition: ``--condition chat`` says so
    (before: "did you mean chat? (both have: )"); a condition both runs lack is never offered
    as its own correction."""
    code, out, err = _diff(capsys, logs["medreqal"], logs["medreqal"], "--condition", "chat")
    assert code == 2 and out == ""
    assert err == ("med-evals diff: error: --condition chat: the runs record no condition (all "
                   "their samples are one group, compared whole); leave --condition out\n")
    code, _, err = _diff(capsys, logs["a"], logs["b"], "--condition", "doi_only")
    assert code == 2 and "did you mean doi_only" not in err
    assert err.startswith("med-evals diff: error: --condition doi_only: not a condition both "
                          "runs have")


@pytest.mark.slow
def test_what_the_pair_detects_and_each_side_against_trivial(logs, capsys):
    """Counterfactual condition, 6 trials (gold 3 positive, 3 negative): A right on all; B
    answers POSITIVE, invalid on trials 1 and 4, so valid on 4 (3 of them negative): its F1
    over valid replies is 2/5 for POSITIVE and 0 for NEGATIVE. The trivial rows: the tie goes
    to POSITIVE, F1 2*3/9 for it and 0 for NEGATIVE."""
    from scipy.stats import norm

    args = [logs["a"], logs["b"], "--condition", "counterfactual", "--limit", "0",
            "--n-boot", str(N_BOOT)]
    code, out, _ = _diff(capsys, *args, "--json")
    assert code == 0
    [c] = _strict(out)["comparisons"]
    code, text, _ = _diff(capsys, *args)
    assert code == 0
    lines = text.splitlines()
    # what the pair detects: the valid rate from its discordance (2 of 6 differ: n q = 2 <
    # c^2 (1 - q)), the rest from the paired bootstrap's se (B has invalid replies)
    cz = norm.ppf(0.975) + norm.ppf(0.80)
    d = c["detectable"]
    assert d["valid_rate"] == {
        "display": "Valid rate", "difference": None, "detectable": False,
        "method": "discordance", "n": 6, "discordant": 2,
        "text": "none (only 2 of 6 samples differ: too few)"}
    f1 = d["macro_f1_valid"]
    assert f1["method"] == "bootstrap se" and f1["difference"] == pytest.approx(cz * f1["se"])
    i = lines.index("  smallest difference this pair detects (80% power, α = 0.05):")
    assert lines[i + 1:i + 4] == [
        f"    Macro-F1: {f1['difference']:.3f} (2.80 × the paired bootstrap's standard error "
        f"{f1['se']:.3f})",
        f"    Accuracy: {d['accuracy_valid']['difference']:.3f} (2.80 × the paired bootstrap's "
        f"standard error {d['accuracy_valid']['se']:.3f})",
        "    Valid rate: none (only 2 of 6 samples differ: too few)",
    ]
    # the trivial rows on the pair's samples, and each side against the best
    t = c["trivial"]
    assert t["best"] == "majority class (POSITIVE)" and t["n"] == 6
    assert [r["numbers"]["macro_f1_valid"] for r in t["rows"][:3]] == [pytest.approx(1 / 3)] * 3
    assert t["a"]["difference"] == pytest.approx(1 - 1 / 3) and t["a"]["beats"] is True
    assert t["b"]["difference"] == pytest.approx(0.2 - 1 / 3) and t["b"]["beats"] is False
    random = t["rows"][3]["numbers"]["macro_f1_valid"]
    assert lines[i + 4:i + 7] == [
        "  trivial rows on these 6 samples (Macro-F1): majority class (POSITIVE) 0.333, always "
        f"POSITIVE 0.333, always NEGATIVE 0.333, uniform random (mean of {N_BOOT} draws) "
        f"{random:.3f}",
        f"  A − best trivial (majority class (POSITIVE)): Macro-F1 +0.667 ({t['a']['lo']:+.3f} "
        f"to {t['a']['hi']:+.3f}): better beyond sampling noise (95% paired bootstrap, "
        f"{N_BOOT} resamples)",
        f"  B − best trivial (majority class (POSITIVE)): Macro-F1 -0.133 ({t['b']['lo']:+.3f} "
        f"to {t['b']['hi']:+.3f}): NOT better beyond sampling noise (95% paired bootstrap, "
        f"{N_BOOT} resamples)",
    ]
