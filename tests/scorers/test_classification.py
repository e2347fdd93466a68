"""The one F1 computation (scorers/classification.py ``f1_of_codes``) is scikit-learn's, bit for
bit: counts from ``np.bincount``, the same formula and float64 operations as
``precision_recall_fscore_support(average=None, zero_division=0)``."""

import numpy as np
import pytest
from sklearn.metrics import precision_recall_fscore_support

from med_evals.scorers.classification import f1_of_codes


@pytest.mark.parametrize("seed", range(5))
def test_f1_of_codes_is_scikit_learns_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        n, k = int(rng.integers(1, 80)), int(rng.integers(1, 7))
        g, p = rng.integers(0, k + 2, n), rng.integers(0, k + 2, n)  # codes beyond the labels
        codes = list(range(k))
        want = precision_recall_fscore_support(g, p, labels=codes, average=None,
                                               zero_division=0)[2]
        assert np.array_equal(f1_of_codes(g, p, codes), np.asarray(want, dtype=float))


def test_a_code_never_seen_is_0_and_no_sample_gives_zeros():
    g, p = np.array([0, 0, 1]), np.array([0, 1, 1])
    assert list(f1_of_codes(g, p, [0, 1, 5])) == [2 / 3, 2 / 3, 0.0]
    assert list(f1_of_codes(np.array([], int), np.array([], int), [0, 1])) == [0.0, 0.0]
