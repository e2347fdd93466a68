"""Which runs can be told apart (med_evals.stats.ranking): a hand fixture whose p-values are checked
with scipy's binomial test and whose Holm correction is done by hand."""

import math

import pytest
from scipy.stats import binomtest

from med_evals.stats.ranking import pair_tests, rank_runs


def right_on(*spans):
    """Correctness over 30 samples: right on the samples in ``spans``, wrong on the rest."""
    right = {i for span in spans for i in span}
    return [int(i in right) for i in range(30)]


#: A right on 0-27; B on 0-13; C on 0-11 and 29; D is C plus 14-19.
RUNS = {
    "A": right_on(range(28)),
    "B": right_on(range(14)),
    "C": right_on(range(12), [29]),
    "D": right_on(range(12), range(14, 20), [29]),
}
#: samples right only in the first run / only in the second, counted by hand
DISCORDANT = {("A", "B"): (14, 0), ("A", "C"): (16, 1), ("A", "D"): (10, 1),
              ("B", "C"): (2, 1), ("B", "D"): (2, 7), ("C", "D"): (0, 6)}
PRIMARY = {name: sum(v) / 30 for name, v in RUNS.items()}


def holm(pvalues):
    """Holm's step-down adjustment by hand: the i-th smallest p times (m - i), made monotone."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def test_pair_tests_are_exact_mcnemar_with_holm():
    tests = pair_tests(RUNS)
    assert [(t.a, t.b) for t in tests] == list(DISCORDANT)
    raw = []
    for t in tests:
        b, c = DISCORDANT[(t.a, t.b)]
        assert (t.a_only, t.b_only) == (b, c)
        p = binomtest(b, b + c, 0.5).pvalue
        assert t.p_value == pytest.approx(p)
        raw.append(p)
    # by hand: A-B 2 * 0.5^14, A-C 2 * 18 / 2^17, A-D 2 * 12 / 2^11, B-C 1, B-D 2 * 46 / 2^9,
    # C-D 2 * 0.5^6
    assert raw == pytest.approx([2 * 0.5**14, 36 / 2**17, 24 / 2**11, 1.0, 92 / 2**9, 2 / 2**6])
    assert [t.p_holm for t in tests] == pytest.approx(holm(raw))
    by_pair = {(t.a, t.b): t for t in tests}
    # A-D: 4 * 0.0117 = 0.047 < 0.05, separable; C-D: raw 0.031, Holm 3 * 0.031 = 0.094: not
    assert by_pair[("A", "D")].p_holm == pytest.approx(4 * 24 / 2**11)
    assert by_pair[("A", "D")].better == "A"
    assert by_pair[("C", "D")].p_value < 0.05 < by_pair[("C", "D")].p_holm
    assert by_pair[("C", "D")].better is None
    assert by_pair[("B", "C")].better is None
    assert by_pair[("A", "B")].better == by_pair[("A", "C")].better == "A"


def test_rank_intervals_and_who_cannot_be_told_apart():
    ranked, tests = rank_runs(RUNS, PRIMARY)
    assert len(tests) == 6
    got = {r.run: (r.rank, r.best_rank, r.worst_rank, r.better, r.worse, r.inseparable)
           for r in ranked}
    assert [r.run for r in ranked] == ["A", "D", "B", "C"]  # by accuracy: 28, 19, 14, 13 of 30
    assert got == {
        "A": (1, 1, 1, (), ("D", "B", "C"), ()),
        "D": (2, 2, 4, ("A",), (), ("B", "C")),
        "B": (3, 2, 4, ("A",), (), ("D", "C")),
        "C": (4, 2, 4, ("A",), (), ("D", "B")),
    }
    assert ranked[0].primary == 28 / 30


def test_order_follows_the_primary_number_and_tests_follow_correctness():
    """A primary number that orders the runs otherwise (a macro-F1, say) moves the rows, not the
    tests; ties share a rank; an undefined primary number goes last."""
    primary = {"A": 0.5, "B": 0.9, "C": 0.9, "D": math.nan}
    ranked, _ = rank_runs(RUNS, primary)
    assert [(r.run, r.rank) for r in ranked] == [("B", 1), ("C", 1), ("A", 3), ("D", 4)]
    a = next(r for r in ranked if r.run == "A")
    assert (a.best_rank, a.worst_rank, a.worse) == (1, 1, ("B", "C", "D"))


def test_two_runs_and_bad_input():
    ranked, tests = rank_runs({"A": RUNS["A"], "B": RUNS["B"]}, {"A": 0.9, "B": 0.5})
    assert tests[0].p_holm == tests[0].p_value  # one test: nothing to correct
    assert [(r.run, r.best_rank, r.worst_rank) for r in ranked] == [("A", 1, 1), ("B", 2, 2)]
    with pytest.raises(ValueError, match="two runs or more"):
        rank_runs({"A": RUNS["A"]}, {"A": 0.9})
    with pytest.raises(ValueError, match="primary number for every run"):
        rank_runs(RUNS, {"A": 0.9})
    with pytest.raises(ValueError, match="differ in length"):
        rank_runs({"A": RUNS["A"], "B": RUNS["B"][:-1]}, {"A": 0.9, "B": 0.5})
