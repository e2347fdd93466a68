import pytest

from med_evals.scorers.effect import gold_label, parse_effect
from med_evals.scorers.labels import ERROR, INVALID

FIVE = [
    ("- **Rationale**: ...\n- **Full Answer**: Lower pain [1].\n- **Answer**: Lower", "lower"),
    ("**Answer**: No Difference", "no difference"),
    ("- **Answer**: **Uncertain Effect**", "uncertain effect"),
    ("Answer: insufficient data.", "insufficient data"),
    ("Final answer: Higher", "higher"),
    ("<think>maybe lower</think>\n- **Answer**: Higher", "higher"),
    ("The evidence shows no significant difference between the groups.", "no difference"),
    ("- **Full Answer**: Higher response [2].\n- **Answer**: No Difference", "no difference"),
    ("**Answer**: Higher or Lower", INVALID),
    ("I cannot answer this question.", INVALID),
    ("Rates were higher in one trial and lower in another.", INVALID),
    ("", ERROR),
    (None, ERROR),
]


@pytest.mark.parametrize("reply,label", FIVE)
def test_parse_five(reply, label):
    assert parse_effect(reply, "five") == label


def test_parse_three_offers_only_three():
    assert parse_effect("**Answer**: Uncertain", "three") == "uncertain"
    assert parse_effect("**Answer**: Lower", "three") == "lower"
    assert parse_effect("**Answer**: No Difference", "three") == INVALID


def test_gold_label_schemes():
    assert gold_label("No difference", "five") == "no difference"
    assert [
        gold_label(a, "three")
        for a in ("higher", "lower", "no difference", "uncertain effect", "insufficient data")
    ] == ["higher", "lower", "uncertain", "uncertain", "uncertain"]
    with pytest.raises(ValueError, match="unknown MedEvidence answer"):
        gold_label("better", "five")
