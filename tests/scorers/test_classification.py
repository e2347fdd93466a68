"""The one F1 computation (scorers/classification.py ``f1_of_codes``) is scikit-learn's, bit for
bit: counts from ``np.bincount``, the same formula and float64 operations as
``precision_recall_fscore_support(average=None, zero_division=0)``."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

from med_evals.scorers.classification import accuracy_codes, confusion_codes, f1_of_codes


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


@pytest.mark.filterwarnings("ignore:A single label was found:UserWarning")
@pytest.mark.parametrize("seed", range(3))
def test_accuracy_and_confusion_of_codes_are_scikit_learns(seed):
    """Accuracy and the confusion counts (classification.py) are scikit-learn's
    ``accuracy_score`` and ``confusion_matrix(labels=...)``: bit for bit, codes outside the
    labels included (in the accuracy; left out of the counts)."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n, k = int(rng.integers(1, 80)), int(rng.integers(1, 7))
        g, p = rng.integers(0, k + 2, n), rng.integers(0, k + 2, n)
        assert accuracy_codes(g, p) == float(accuracy_score(g, p))
        if not (g < k).any():  # scikit-learn refuses: no gold label among the labels
            assert confusion_codes(g, p, k).sum() == 0
            continue
        assert np.array_equal(confusion_codes(g, p, k),
                              confusion_matrix(g, p, labels=list(range(k))))
    assert np.isnan(accuracy_codes(np.array([], int), np.array([], int)))
    assert confusion_codes(np.array([], int), np.array([], int), 2).tolist() == [[0, 0], [0, 0]]
