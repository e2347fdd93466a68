"""What the report's numbers can say, through the report itself: three replayed oncology runs
on 12 trials, every new number computed by hand (trivial rows and the flag, intervals, what
each pair detects, ranks with a separable and an inseparable pair)."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from med_evals.commands.report import build_report
from med_evals.tasks.oncology_rct import oncology_rct

from ..oncology_support import oncology_module
from .support import replay_run
from .test_same_numbers import md_tables

C = norm.ppf(0.975) + norm.ppf(0.80)
Z = norm.ppf(0.975)
N_BOOT = 40
#: the fixture's 6 trials twice: 6 positive, 6 negative
GOLD = ["POSITIVE", "NEGATIVE", "POSITIVE", "NEGATIVE", "NEGATIVE", "POSITIVE"] * 2
FLIP = {"POSITIVE": "NEGATIVE", "NEGATIVE": "POSITIVE"}


def replies(wrong: set[int]):
    """Right on every trial but those in ``wrong``."""
    def reply(text: str, sid: str, epoch: int) -> str:
        trial = int(sid.rsplit("-", 1)[1])
        return FLIP[GOLD[trial]] if trial in wrong else GOLD[trial]

    return reply


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A: right on all 12; B: wrong on trial 11; C: right on trials 0-3 only."""
    with oncology_module(tmp_path_factory, "standing", copies=2) as (tmp, _):
        for name, wrong in (("a", set()), ("b", {11}), ("c", set(range(4, 12)))):
            replay_run(oncology_rct(condition="title_abstract"), replies(wrong),
                       f"openai/model-{name}", tmp / name)
        result = build_report([tmp / x / "logs" for x in "abc"], tmp / "report", n_boot=N_BOOT)
    text = result.markdown.read_text()
    return {caption.split(":")[0]: rows for _, caption, rows in md_tables(text)}, text


def wilson(k: int, n: int) -> str:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return f"{max(0.0, centre - half):.3f}-{min(1.0, centre + half):.3f}"


A, B, Cr = ("openai/model-a (replayed)", "openai/model-b (replayed)",
            "openai/model-c (replayed)")


@pytest.mark.slow
def test_trivial_rows_and_the_flag(report):
    tables, text = report
    rows = {r["run"]: r for r in tables["Headline numbers, as logged (metric 'headline') and "
                                       "gated by med-evals regress"]}
    # 6 positive, 6 negative: the tie goes to POSITIVE; F1 2*6/18 for it, 0 for NEGATIVE
    for name in ("trivial: majority class (POSITIVE) (best)", "trivial: always POSITIVE",
                 "trivial: always NEGATIVE"):
        r = rows[name]
        assert (r["n"], r["Macro-F1"], r["Accuracy"], r["Valid rate"]) == (
            "12", "0.333", "0.500", "1.000")
        assert r["better than trivial"] == "—"
    assert "trivial: uniform random (mean of 40 draws)" in rows  # as many as resamples
    # C: right on trials 0-3; its F1 is 1/3 for each class: no better than always POSITIVE
    assert rows[Cr]["Macro-F1"] == "0.333" and rows[Cr]["better than trivial"] == "no"
    assert rows[Cr]["Macro-F1 − best trivial (95% CI)"].startswith("+0.000 (")
    assert rows[A]["better than trivial"] == "yes"
    assert rows[A]["Macro-F1 − best trivial (95% CI)"].startswith("+0.667 (")
    [line] = [x for x in text.splitlines() if x.startswith("> Not better than trivial")]
    assert line.startswith(
        f"> Not better than trivial: {Cr} (title_abstract): its Macro-F1 0.333 is not above "
        "majority class (POSITIVE)'s 0.333 beyond sampling noise (run − trivial +0.000 (")
    assert line.endswith("), 95% paired bootstrap, 40 resamples)")
    assert f"Not better than trivial: {A}" not in text


@pytest.mark.slow
def test_intervals(report):
    tables, text = report
    rows = {r["run"]: r for r in tables["95% intervals of the headline numbers"]}
    assert rows[A]["Accuracy 95% CI"] == wilson(12, 12)
    assert rows[B]["Accuracy 95% CI"] == wilson(11, 12)
    assert rows[Cr]["Accuracy 95% CI"] == wilson(4, 12)
    assert rows[Cr]["Valid rate 95% CI"] == wilson(12, 12)
    # each trial is one sample of the condition: the trial clusters nothing
    assert ("Clustered by trial: each trial is one sample of each condition here, so the "
            "interval clustered by trial is the plain one.") in text


@pytest.mark.slow
def test_what_each_pair_detects(report):
    tables, _ = report
    rows = {(r["run A"], r["run B"]): r for r in tables["What each pair can detect"]}
    # A and C differ on 8 of 12, every reply valid: c * sqrt(q / (n + c^2))
    mde = C * math.sqrt((8 / 12) / (12 + C * C))
    assert rows[(A, Cr)]["smallest detectable Accuracy"] == f"{mde:.3f} (discordance)"
    assert rows[(A, Cr)]["smallest detectable Valid rate"] == "none (never differ)"
    # A and B differ on 1: n q = 1 < c^2 (1 - q)
    assert rows[(A, B)]["smallest detectable Accuracy"] == "none (too few differ)"
    assert rows[(A, Cr)]["smallest detectable Macro-F1"].endswith(" (bootstrap se)")


@pytest.mark.slow
def test_ranks_with_a_separable_and_an_inseparable_pair(report):
    """Holm over three exact McNemar tests: A vs C (8 to 0) p = 2 * 0.5^8 * 3 = 0.023 and B vs
    C (7 to 0) p = 2 * 0.5^7 * 2 = 0.031: separable; A vs B (1 to 0) p = 1: not."""
    tables, _ = report
    rows = tables["Which runs can be told apart, per condition, on the samples all of them "
                  "scored (same id and target)"]
    got = [(r["rank"], r["possible ranks"], r["run"], r["n shared"], r["Macro-F1 (shared "
            "samples)"], r["significantly better than"], r["cannot be told apart from"])
           for r in rows]
    # B: wrong on one positive trial: F1 2*5/11 for POSITIVE, 2*6/13 for NEGATIVE
    f1_b = (10 / 11 + 12 / 13) / 2
    assert got == [
        ("1", "1-2", A, "12", "1.000", Cr, B),
        ("2", "1-2", B, "12", f"{f1_b:.3f}", Cr, A),
        ("3", "3", Cr, "12", "0.333", "none", "none"),
    ]
    assert [r["accuracy (shared samples)"] for r in rows] == ["1.000", f"{11 / 12:.3f}",
                                                             f"{4 / 12:.3f}"]
