import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import f1_score

from med_evals.report.paired import bootstrap_macro_f1_difference, mcnemar_exact, paired_comparison


def test_mcnemar_exact_is_the_binomial_test_on_discordant_pairs():
    a = [1] * 30 + [1] * 9 + [0] * 3 + [0] * 8
    b = [1] * 30 + [0] * 9 + [1] * 3 + [0] * 8
    r = mcnemar_exact(a, b)
    assert (r["a_only"], r["b_only"], r["n"]) == (9, 3, 50)
    assert r["p_value"] == pytest.approx(binomtest(3, 12, 0.5).pvalue)
    with pytest.raises(ValueError):
        mcnemar_exact([1, 0], [1])


def test_bootstrap_difference_is_centred_on_the_point_estimate():
    rng = np.random.default_rng(3)
    labels = ["A", "B", "C"]
    gold = rng.choice(labels, 200)
    pa = np.where(rng.random(200) < 0.8, gold, rng.choice(labels, 200))
    pb = np.where(rng.random(200) < 0.6, gold, rng.choice(labels, 200))
    r = bootstrap_macro_f1_difference(gold, pa, pb, labels, n_boot=500, seed=1)
    want = f1_score(gold, pa, average="macro", labels=labels) - f1_score(
        gold, pb, average="macro", labels=labels
    )
    assert r["difference"] == pytest.approx(want)
    assert r["lo"] < want < r["hi"] and r["lo"] > 0  # A is clearly better
    assert bootstrap_macro_f1_difference(gold, pa, pb, labels, n_boot=500, seed=1) == r


def test_paired_comparison_pairs_on_shared_keys_only():
    a = {
        "1": {"prediction": "X", "target": "X"},
        "2": {"prediction": "Y", "target": "X"},
        "3": {"prediction": "X", "target": "X"},
    }
    b = {"1": {"prediction": "Y", "target": "X"}, "2": {"prediction": "X", "target": "X"}}
    r = paired_comparison(a, b, ["X", "Y"], n_boot=50)
    assert r["n"] == 2 and r["a_only"] == 1 and r["b_only"] == 1
    b["1"]["target"] = "Y"
    with pytest.raises(ValueError, match="targets differ"):
        paired_comparison(a, b, ["X", "Y"], n_boot=50)
