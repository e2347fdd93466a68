"""Where runs stand (med_evals.stats.standing): each number the report, compare, diff, regress and
power print, computed by hand on small made-up samples."""

import math

import pytest
from scipy.stats import norm

from med_evals.stats.intervals import (
    bootstrap_difference,
    bootstrap_interval,
    clustered_wilson_interval,
)
from med_evals.stats.standing import (
    Entry,
    detectable,
    detectable_text,
    headline_intervals,
    items_needed,
    proportion,
    ranking,
    trivial_blocks,
)
from med_evals.tasks import MEDEVIDENCE, MEDREQAL, ONCOLOGY_RCT

#: c = z_{0.975} + z_{0.80}, by hand
C = norm.ppf(0.975) + norm.ppf(0.80)
Z = norm.ppf(0.975)
NEI = "NOT ENOUGH INFORMATION"


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's score interval, from its formula."""
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return centre - half, centre + half


def onc(golds: str, preds: str) -> dict[str, dict]:
    """Oncology values from letters: P, N, or I (an invalid reply)."""
    word = {"P": "POSITIVE", "N": "NEGATIVE", "I": "INVALID"}
    out = {}
    for i, (g, p) in enumerate(zip(golds, preds, strict=True)):
        out[f"title_abstract-{i:03d}"] = {
            "prediction": word[p], "target": word[g], "valid": p != "I", "correct": int(p == g),
            "condition": "title_abstract", "trial": i, "lenient": word[p]}
    return out


#: 12 trials (6 positive, 6 negative): A right on all, B wrong on the last, C right on the
#: first 4 only (its 8 wrong answers are trials B gets right)
GOLD = "PNPNNP" * 2
RIGHT = GOLD
B_REPLIES = GOLD[:11] + "N"
C_REPLIES = GOLD[:4] + "".join("N" if g == "P" else "P" for g in GOLD[4:])


def test_intervals_wilson_for_proportions_and_bootstrap_for_f1():
    """Accuracy over valid replies: Wilson over the valid ones (8 right of 10 valid); valid
    rate: Wilson over all 12; macro-F1: the percentile bootstrap of the headline function."""
    golds, preds = "PNPNNPPNPNPN", "PNPNNPPNNPII"  # 8 right of the 10 valid, 2 invalid
    values = onc(golds, preds)
    iv = headline_intervals(ONCOLOGY_RCT, Entry("a", values), n_boot=50)
    acc, valid, f1 = iv["accuracy_valid"], iv["valid_rate"], iv["macro_f1_valid"]
    assert (acc.method, acc.n, acc.value) == ("Wilson", 10, 0.8)
    assert acc.interval == pytest.approx(wilson(8, 10), abs=1e-12)
    assert (valid.method, valid.n) == ("Wilson", 12)
    assert valid.interval == pytest.approx(wilson(10, 12), abs=1e-12)
    assert f1.method == "bootstrap" and f1.n == 12
    ordered = [values[k] for k in sorted(values)]
    assert f1.interval == bootstrap_interval(ONCOLOGY_RCT.headline_values, ordered, 50)[
        "macro_f1_valid"]
    # no source recorded: no clustered interval
    assert acc.clustered is None and not acc.shared


def test_a_number_that_is_not_its_count_over_n_is_bootstrapped():
    """The proportion check: a value whose share of right replies is not the number."""
    values = list(onc("PNPN", "PNNN").values())
    assert proportion("accuracy_valid", values, 0.75) == [1, 1, 0, 1]
    assert proportion("accuracy_valid", values, 0.5) is None
    assert proportion("macro_f1_valid", values, 0.75) is None


def test_intervals_clustered_by_review():
    """Six MedEvidence questions from two reviews: the clustered Wilson interval is Inspect's
    (Korn-Graubard) one, over the same 0/1; the macro-F1's, the cluster bootstrap."""
    labels = MEDEVIDENCE.labels()
    values, sources = {}, {}
    for i, (gold, pred, review) in enumerate([
        ("higher", "higher", "r1"), ("lower", "higher", "r1"), ("higher", "higher", "r1"),
        ("lower", "lower", "r2"), ("higher", "lower", "r2"), ("lower", "lower", "r2"),
    ]):
        sid = f"evidence-{i}"
        values[sid] = {"prediction": pred, "target": gold, "valid": pred in labels,
                       "condition": "evidence"}
        sources[sid] = review
    iv = headline_intervals(MEDEVIDENCE, Entry("a", values, {}, sources), n_boot=40)
    acc = iv["accuracy_all"]
    assert acc.value == 4 / 6 and acc.clusters == 2 and acc.shared
    assert acc.clustered == clustered_wilson_interval([1, 0, 1, 1, 0, 1], ["r1"] * 3 + ["r2"] * 3)
    assert acc.interval == pytest.approx(wilson(4, 6), abs=1e-12)
    f1 = iv["macro_f1_all"]
    ordered = [values[k] for k in sorted(values)]
    assert f1.clustered == bootstrap_interval(
        MEDEVIDENCE.headline_values, ordered, 40, clusters=["r1"] * 3 + ["r2"] * 3)[
        "macro_f1_all"]


def test_one_sample_per_source_is_the_plain_bootstrap():
    """Resampling sources of one sample each is resampling samples: the same draws, the same
    interval (the report reuses the plain one for the oncology trials of one condition)."""
    ordered = list(onc(GOLD, C_REPLIES).values())
    plain = bootstrap_interval(ONCOLOGY_RCT.headline_values, ordered, 30)
    by_trial = bootstrap_interval(ONCOLOGY_RCT.headline_values, ordered, 30,
                                  clusters=list(range(12)))
    assert plain == by_trial


def test_trivial_rows_once_per_set_of_samples():
    a = Entry("a", onc(GOLD, RIGHT))
    b = Entry("b", onc(GOLD, B_REPLIES))
    other = Entry("c", onc("PPPNNN", "PPPNNN"))
    blocks = trivial_blocks(ONCOLOGY_RCT, "title_abstract", [a, b, other], draws=5)
    assert [blk.labels for blk in blocks] == [["a", "b"], ["c"]]
    first = blocks[0]
    assert first.n == 12
    # 6 positive, 6 negative: the tie goes to POSITIVE, first in the label set; always
    # POSITIVE is right on 6 of 12, its F1 2*6/(12+6) for POSITIVE and 0 for NEGATIVE
    assert [r.name for r in first.rows] == [
        "majority class (POSITIVE)", "always POSITIVE", "always NEGATIVE",
        "uniform random (mean of 5 draws)"]
    assert first.best is first.rows[0]
    assert first.best.numbers == pytest.approx(
        {"macro_f1_valid": (12 / 18) / 2, "accuracy_valid": 0.5, "valid_rate": 1.0})


def test_what_a_pair_detects_from_its_discordance_or_its_bootstrap():
    """A and C differ on 8 of 12 trials, all replies valid: accuracy and valid rate from the
    discordance, c * sqrt(q / (n + c^2)); macro-F1 from the bootstrap's se."""
    va = [v for _, v in sorted(onc(GOLD, RIGHT).items())]
    vc = [v for _, v in sorted(onc(GOLD, C_REPLIES).items())]
    boot = bootstrap_difference(ONCOLOGY_RCT.headline_values, va, vc, n_boot=30)
    found = detectable(ONCOLOGY_RCT, va, vc, boot)
    acc = found["accuracy_valid"]
    assert acc["method"] == "discordance" and (acc["n"], acc["discordant"]) == (12, 8)
    assert acc["difference"] == pytest.approx(C * math.sqrt((8 / 12) / (12 + C * C)))
    assert round(acc["difference"], 3) == 0.513
    assert detectable_text(acc) == "0.513 (from the discordance: 8 of 12 samples differ)"
    # every reply valid in both: the valid rate never differs
    assert math.isinf(found["valid_rate"]["difference"])
    assert detectable_text(found["valid_rate"]) == (
        "none (the runs never disagree on the 12 samples)")
    f1 = found["macro_f1_valid"]
    assert f1["method"] == "bootstrap se"
    assert f1["difference"] == pytest.approx(C * boot["macro_f1_valid"]["se"])
    assert detectable_text(f1) == (f"{f1['difference']:.3f} (2.80 × the paired bootstrap's "
                                   f"standard error {f1['se']:.3f})")
    # an invalid reply: accuracy over valid replies has another denominator in each run
    vi = [v for _, v in sorted(onc(GOLD, GOLD[:11] + "I").items())]
    boot = bootstrap_difference(ONCOLOGY_RCT.headline_values, va, vi, n_boot=30)
    found = detectable(ONCOLOGY_RCT, va, vi, boot)
    assert found["accuracy_valid"]["method"] == "bootstrap se"
    # one sample differs: n q = 1 < c^2 (1 - q), nothing detectable
    assert found["valid_rate"]["method"] == "discordance"
    assert detectable_text(found["valid_rate"]) == "none (only 1 of 12 samples differ: too few)"


def test_the_bootstrap_route_has_the_discordance_routes_floor():
    """Issue 44, item 4: a pair of 100 trials differing on 2 (both wrong in B) got macro-F1
    ``0.043 (bootstrap se)`` beside accuracy ``none (too few differ)``. One rule now: a number
    whose paired difference lives on 2 differing samples detects nothing either (n q = 2 <
    c^2 (1 - q)); nor does an identical rerun (differing on none), where the bootstrap's se is
    0 (before: "no estimate")."""
    golds = "PN" * 50
    va = [v for _, v in sorted(onc(golds, golds).items())]
    vb = [v for _, v in sorted(onc(golds, "NP" + golds[2:]).items())]  # 2 of 100 wrong
    boot = bootstrap_difference(ONCOLOGY_RCT.headline_values, vb, va, n_boot=200)
    assert boot["macro_f1_valid"]["se"] > 0  # the bootstrap alone would give a number
    found = detectable(ONCOLOGY_RCT, vb, va, boot)
    acc, f1 = found["accuracy_valid"], found["macro_f1_valid"]
    assert (acc["method"], f1["method"]) == ("discordance", "bootstrap se")
    assert (acc["discordant"], f1["discordant"]) == (2, 2)
    assert math.isinf(acc["difference"]) and math.isinf(f1["difference"])
    assert detectable_text(acc) == detectable_text(f1) == (
        "none (only 2 of 100 samples differ: too few)")
    # the report's cells (table "What each pair can detect"): the same words for both
    from med_evals.commands.report.standing import detectable_cell

    assert detectable_cell(acc) == detectable_cell(f1) == "none (too few differ)"
    # above the floor the bootstrap route is c * se as before: 9 of 100 differ (9 > c^2 (1 -
    # 0.09) = 7.14)
    vc = [v for _, v in sorted(onc(golds, "NP" * 4 + "N" + golds[9:]).items())]
    boot = bootstrap_difference(ONCOLOGY_RCT.headline_values, vc, va, n_boot=200)
    f1 = detectable(ONCOLOGY_RCT, vc, va, boot)["macro_f1_valid"]
    assert f1["discordant"] == 9 and f1["difference"] == pytest.approx(
        C * boot["macro_f1_valid"]["se"])
    # an identical rerun: none of any size, for every number
    boot = bootstrap_difference(ONCOLOGY_RCT.headline_values, va, va, n_boot=20)
    same = detectable(ONCOLOGY_RCT, va, va, boot)
    assert same["macro_f1_valid"]["se"] == 0
    assert {detectable_text(d) for d in same.values()} == {
        "none (the runs never disagree on the 100 samples)"}
    assert {detectable_cell(d) for d in same.values()} == {"none (never differ)"}


def test_ranks_with_one_separable_and_one_inseparable_pair():
    """A vs C: 8 right only in A, exact p = 2 * 0.5^8, Holm x3 = 0.0234; B vs C: 7 right only
    in B, p = 2 * 0.5^7, Holm x2 = 0.03125; A vs B: 1 discordant, p = 1."""
    runs = [Entry("C", onc(GOLD, C_REPLIES)), Entry("A", onc(GOLD, RIGHT)),
            Entry("B", onc(GOLD, B_REPLIES))]
    [r] = ranking(ONCOLOGY_RCT, "title_abstract", runs)
    assert r.n == 12 and r.primary == "macro_f1_valid"
    assert [(x.run, x.rank, x.best_rank, x.worst_rank) for x in r.ranked] == [
        ("A", 1, 1, 2), ("B", 2, 1, 2), ("C", 3, 3, 3)]
    tests = {(t.a, t.b): t for t in r.tests}
    assert tests[("C", "A")].p_holm == pytest.approx(3 * 2 * 0.5**8)
    assert tests[("C", "A")].better == "A"
    assert tests[("C", "B")].p_holm == pytest.approx(2 * 2 * 0.5**7)
    assert tests[("A", "B")].better is None and tests[("A", "B")].p_value == 1.0
    assert r.accuracy == {"C": 4 / 12, "A": 1.0, "B": 11 / 12}
    # two runs: no ranking
    assert ranking(ONCOLOGY_RCT, "title_abstract", runs[:2]) == []


def medreqal_values(right: int, n: int) -> list[dict]:
    """n MedREQAL samples, the first ``right`` answered right, the rest NEI where the gold is
    SUPPORTED; all valid."""
    out = []
    for i in range(n):
        gold = ("SUPPORTED", "REFUTED", NEI)[i % 3]
        pred = gold if i < right else ("REFUTED" if gold != "REFUTED" else "SUPPORTED")
        out.append({"prediction": pred, "target": gold, "valid": True})
    return out


def test_items_a_gate_needs():
    """A baseline at accuracy 0.8 on 250 samples: a gate detects drops of
    (c^2 (2p-1) + sqrt(c^4 (2p-1)^2 + 8 c^2 (n + c^2) p (1-p))) / (2 (n + c^2)) = 0.108 now, and
    needs c^2 (q - d^2) / d^2 samples, q = 2p(1-p) + d(2p-1), for a drop of 0.05."""
    values = medreqal_values(200, 250)
    found = items_needed(MEDREQAL, values, None, 0.05, n_boot=30)
    acc = found["accuracy_all"]
    p, n, d = 0.8, 250, 0.05
    m, lin = n + C * C, C * C * (2 * p - 1)
    now = (lin + math.sqrt(lin * lin + 8 * C * C * m * p * (1 - p))) / (2 * m)
    q = 2 * p * (1 - p) + d * (2 * p - 1)
    assert acc["value"] == 0.8 and acc["method"] == "independent errors"
    assert acc["now"] == pytest.approx(now) and round(now, 3) == 0.108
    assert acc["needed"] == math.ceil(C * C * (q - d * d) / (d * d)) == 1091
    # the valid rate at 1: q = d, n = c^2 (1 - d) / d
    assert found["valid_rate"]["needed"] == math.ceil(C * C * (1 - d) / d) == 150
    f1 = found["macro_f1_all"]
    assert f1["method"] == "bootstrap se"
    assert f1["now"] == pytest.approx(C * math.sqrt(2) * f1["se"])
    assert f1["needed"] == math.ceil(n * (f1["now"] / d) ** 2)
    # a drop larger than the accuracy: no gate detects it
    low = items_needed(MEDREQAL, medreqal_values(3, 250), None, 0.05, n_boot=30)
    assert low["accuracy_all"]["needed"] is None
    assert "a drop of 0.05 from an accuracy of 0.012" in low["accuracy_all"]["why"]
