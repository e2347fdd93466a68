import math
import random

import numpy as np
import pytest
from scipy.stats import binomtest, norm
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, recall_score
from statsmodels.stats.proportion import proportion_confint

from med_evals.scorers.classification import encode, macro_f1_codes
from med_evals.scorers.oncology_rct import binary_estimates, binary_summary
from med_evals.stats.intervals import (
    bootstrap_difference,
    bootstrap_se,
    mcnemar_exact,
    proportion_with_intervals,
    wald_interval,
    wilson_interval,
)

STUDY_ALPHA = 2 * norm.sf(1.96)  # the study's z = 1.96 as a statsmodels alpha


def _study_wald(p, n):
    """The study's normal-approximation interval, from statsmodels (which clips to [0, 1])."""
    return proportion_confint(p * n, n, alpha=STUDY_ALPHA, method="normal")


@pytest.fixture
def fixed_predictions():
    rng = random.Random(7)
    y_true = [rng.choice(["POSITIVE", "NEGATIVE"]) for _ in range(97)]
    y_pred = [
        t if rng.random() < 0.8 else ("NEGATIVE" if t == "POSITIVE" else "POSITIVE") for t in y_true
    ]
    return y_true, y_pred


def test_binary_summary_matches_sklearn_and_statsmodels(fixed_predictions):
    y_true, y_pred = fixed_predictions
    s = binary_summary(y_true, y_pred)
    labels = ["POSITIVE", "NEGATIVE"]
    assert s["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred))
    assert s["macro_f1"] == pytest.approx(f1_score(y_true, y_pred, average="macro", labels=labels))
    assert s["f1_positive"] == pytest.approx(f1_score(y_true, y_pred, pos_label="POSITIVE"))
    assert s["sensitivity"] == pytest.approx(recall_score(y_true, y_pred, pos_label="POSITIVE"))
    assert s["specificity"] == pytest.approx(recall_score(y_true, y_pred, pos_label="NEGATIVE"))
    cm = confusion_matrix(y_true, y_pred, labels=labels)
    assert (s["tp"], s["fn"], s["fp"], s["tn"]) == (cm[0, 0], cm[0, 1], cm[1, 0], cm[1, 1])
    n = len(y_true)
    for name, size in [
        ("accuracy", n),
        ("macro_f1", n),
        ("f1_positive", n),
        ("sensitivity", s["tp"] + s["fn"]),
        ("specificity", s["tn"] + s["fp"]),
    ]:
        p = s[name]
        assert s[f"{name}_wald"] == pytest.approx(_study_wald(p, size))
        assert s[f"{name}_wilson"] == pytest.approx(
            proportion_confint(p * size, size, method="wilson")
        )


def test_binary_estimates_equal_sklearn_to_the_last_digit():
    """Accuracy from the confusion matrix's diagonal and macro-F1 from one F1 call are
    scikit-learn's accuracy_score and f1_score exactly (``==``), on sizes from 1 to 1,001 and
    one-sided inputs (a label never predicted, or never true: zero_division=0)."""
    rng = random.Random(11)
    labels = ["POSITIVE", "NEGATIVE"]
    for n in [1, 2, 3, 5, 17, 120, 250, 1001]:
        for _ in range(8):
            y_true = [rng.choice(labels) for _ in range(n)]
            y_pred = [rng.choice(labels) if rng.random() < 0.8 else y_true[0] for _ in range(n)]
            e = binary_estimates(y_true, y_pred)
            assert e["accuracy"] == float(accuracy_score(y_true, y_pred))
            assert e["macro_f1"] == float(
                f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)
            )
            assert e["f1_positive"] == float(
                f1_score(y_true, y_pred, pos_label="POSITIVE", zero_division=0)
            )


def test_wald_is_clipped_like_the_study():
    assert wald_interval(1.0, 104) == (1.0, 1.0)  # "1.00 (1.00-1.00)" in the study's Table 1
    lo, hi = wald_interval(0.99, 50)
    assert hi == 1.0 and lo == pytest.approx(0.99 - 1.96 * math.sqrt(0.99 * 0.01 / 50), abs=1e-12)
    assert wilson_interval(1.0, 104)[0] < 1.0  # Wilson does not collapse at the boundary


def test_empty_and_one_sided_inputs():
    s = binary_summary([], [])
    assert s["n"] == 0 and math.isnan(s["accuracy"]) and math.isnan(s["accuracy_wald"][0])
    s = binary_summary(["NEGATIVE"] * 3, ["NEGATIVE", "NEGATIVE", "POSITIVE"])
    assert math.isnan(s["sensitivity"])  # no positive targets: undefined, not 0
    assert s["specificity"] == pytest.approx(2 / 3)


def test_proportion_with_intervals():
    r = proportion_with_intervals(12, 40)
    assert r["p"] == pytest.approx(0.3)
    assert r["wilson"] == pytest.approx(proportion_confint(12, 40, method="wilson"))
    assert r["wald"] == pytest.approx(
        proportion_confint(12, 40, alpha=STUDY_ALPHA, method="normal")
    )


def test_mcnemar_exact_is_the_binomial_test_on_discordant_pairs():
    a = [1] * 30 + [1] * 9 + [0] * 3 + [0] * 8
    b = [1] * 30 + [0] * 9 + [1] * 3 + [0] * 8
    r = mcnemar_exact(a, b)
    assert (r["a_only"], r["b_only"], r["n"]) == (9, 3, 50)
    assert r["p_value"] == pytest.approx(binomtest(3, 12, 0.5).pvalue)
    with pytest.raises(ValueError):
        mcnemar_exact([1, 0], [1])


@pytest.mark.slow
def test_bootstrap_difference_is_centred_on_the_point_estimate():
    """The paired bootstrap of the report and the gate, of a function of per-sample values."""
    rng = np.random.default_rng(3)
    labels = ["A", "B", "C"]
    gold = rng.choice(labels, 200)
    pa = np.where(rng.random(200) < 0.8, gold, rng.choice(labels, 200))
    pb = np.where(rng.random(200) < 0.6, gold, rng.choice(labels, 200))
    a = [{"target": g, "prediction": p} for g, p in zip(gold, pa, strict=True)]
    b = [{"target": g, "prediction": p} for g, p in zip(gold, pb, strict=True)]

    def f1(values):
        gold_, pred = [v["target"] for v in values], [v["prediction"] for v in values]
        return {"macro_f1": macro_f1_codes(*encode(gold_, pred, labels), len(labels))}

    r = bootstrap_difference(f1, a, b, n_boot=300, seed=1)["macro_f1"]
    want = f1_score(gold, pa, average="macro", labels=labels) - f1_score(
        gold, pb, average="macro", labels=labels
    )
    assert r["difference"] == pytest.approx(want)
    assert r["lo"] < want < r["hi"] and r["lo"] > 0  # A is clearly better
    assert bootstrap_difference(f1, a, b, n_boot=300, seed=1)["macro_f1"] == r
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_difference(f1, a, b[:-1])


def _accuracy(values):
    return {"accuracy": float(np.mean(values)) if len(values) else math.nan}


def test_bootstrap_standard_errors_of_accuracy_are_the_binomial_ones():
    """The paired bootstrap's ``se`` of an accuracy difference is sqrt((q - delta^2) / n) (q the
    discordant share), one run's bootstrap se is sqrt(p (1 - p) / n): within 8% at 1,000
    resamples (the bootstrap se's own relative error is about 1 / sqrt(2 * 1000) = 2%)."""
    n = 400
    a = [1] * 300 + [0] * 100  # 0.75
    b = [1] * 260 + [0] * 40 + [1] * 20 + [0] * 80  # 0.70: right only in A 40, only in B 20
    q, delta = 60 / n, 20 / n
    r = bootstrap_difference(_accuracy, a, b, n_boot=1000, seed=2)["accuracy"]
    assert r["difference"] == pytest.approx(delta)
    assert r["se"] == pytest.approx(math.sqrt((q - delta**2) / n), rel=0.08)
    se = bootstrap_se(_accuracy, a, n_boot=1000, seed=2)["accuracy"]
    assert se == pytest.approx(math.sqrt(0.75 * 0.25 / n), rel=0.08)
    assert bootstrap_se(_accuracy, a, n_boot=1000, seed=2)["accuracy"] == se  # seeded
    assert math.isnan(bootstrap_se(_accuracy, [1])["accuracy"])
    assert math.isnan(bootstrap_difference(_accuracy, [], [])["accuracy"]["se"])


# --- the bootstrap's resamples: scipy's, the documented draws -------------------------------


def _reference_draws(fn, values, n_boot, seed, clusters=None):
    """The documented resamples, written out: ``default_rng(seed)``, one ``integers(0, n, n)``
    per resample (n: samples, or sources each bringing all its samples, in order of first
    appearance); each number's resamples where it is defined."""
    members = [[i] for i in range(len(values))]
    if clusters is not None:
        by = {}
        for i, c in enumerate(clusters):
            by.setdefault(c, []).append(i)
        members = list(by.values())
    rng = np.random.default_rng(seed)
    out = {k: [] for k in fn(list(values))}
    for _ in range(n_boot):
        r = fn([values[i] for c in rng.integers(0, len(members), len(members))
                for i in members[c]])
        for k in out:
            out[k].append(float(r[k]))
    return {k: np.array([x for x in xs if not math.isnan(x)]) for k, xs in out.items()}


def _oncology(n, seed):
    """Oncology values, a third invalid: on small resamples no valid reply is drawn, and the
    numbers over valid predictions are undefined there."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        gold = rng.choice(["POSITIVE", "NEGATIVE"])
        u = rng.random()
        pred = "INVALID" if u < 0.35 else gold if u < 0.8 else rng.choice(["POSITIVE", "NEGATIVE"])
        out.append({"prediction": pred, "target": gold, "valid": pred != "INVALID",
                    "correct": int(pred == gold), "condition": "title_abstract", "trial": i,
                    "lenient": pred})
    return out


@pytest.mark.parametrize("n", [1, 2, 5, 23])
def test_bootstrap_resamples_are_the_documented_draws(n, monkeypatch):
    """bootstrap_interval, its cluster bootstrap, bootstrap_se and the paired
    bootstrap_difference (scipy's resamples, drawn in batches of at most 40 positions here)
    give, to the last digit, the percentiles 2.5 / 97.5 and the standard deviation (ddof=1) of
    the resamples drawn one by one, the undefined ones (NaN) left out."""
    from med_evals.stats import intervals
    from med_evals.tasks import ONCOLOGY_RCT

    monkeypatch.setattr(intervals, "BATCH_DRAWS", 40)  # several batches of scipy's draws
    fn = ONCOLOGY_RCT.headline_values
    a, b = _oncology(n, 1), _oncology(n, 2)
    sources = [i // 3 for i in range(n)]
    n_boot, seed = 57, 3

    def pct(xs):
        return tuple(map(float, np.percentile(xs, [2.5, 97.5]))) if xs.size else (
            math.nan, math.nan)

    def sd(xs):
        return float(np.std(xs, ddof=1)) if xs.size > 1 else math.nan

    for clusters in (None, sources):
        ref = _reference_draws(fn, a, n_boot, seed, clusters)
        got = intervals.bootstrap_interval(fn, a, n_boot, seed, clusters=clusters)
        assert repr(got) == repr({k: pct(xs) for k, xs in ref.items()})
    ref = _reference_draws(fn, a, n_boot, seed)
    if n == 2:  # one valid reply of two: 15 of the 57 resamples drew none, left out
        assert len(ref["accuracy_valid"]) == 42
        assert not math.isnan(intervals.bootstrap_interval(fn, a, n_boot, seed)[
            "accuracy_valid"][0])
    se = intervals.bootstrap_se(fn, a, n_boot, seed)
    assert repr(se) == repr({k: sd(xs) if n > 1 else math.nan for k, xs in ref.items()})

    def diff(vals):  # the pair as one run of (a, b) values, so the reference draws both
        ra, rb = fn([v[0] for v in vals]), fn([v[1] for v in vals])
        return {k: float(ra[k]) - float(rb[k]) for k in ra}

    ref = _reference_draws(diff, list(zip(a, b, strict=True)), n_boot, seed)
    got = intervals.bootstrap_difference(fn, a, b, n_boot, seed)
    assert repr({k: (d["lo"], d["hi"], d["se"]) for k, d in got.items()}) == repr(
        {k: (*pct(xs), sd(xs)) for k, xs in ref.items()})


def test_bootstrap_of_no_resample_or_no_sample():
    """No resample: no interval; no sample: no interval and no difference's interval."""
    from med_evals.stats.intervals import bootstrap_interval

    values = [1, 0, 1]
    assert all(map(math.isnan, bootstrap_interval(_accuracy, values, 0)["accuracy"]))
    assert all(map(math.isnan, bootstrap_interval(_accuracy, [], 10)["accuracy"]))
    r = bootstrap_difference(_accuracy, [], [], 10)["accuracy"]
    assert math.isnan(r["lo"]) and r["n"] == 0
