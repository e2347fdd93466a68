import pytest

from med_evals.scorers.labels import LabelSet
from med_evals.scorers.oncology_rct import TRIAL_OUTCOME


def test_labelset_positive_must_be_a_label():
    assert TRIAL_OUTCOME.positive == "POSITIVE"
    with pytest.raises(ValueError):
        LabelSet("x", ("A", "B"), positive="C")
