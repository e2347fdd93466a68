import re

import pytest

from med_evals.scorers.labels import ERROR, INVALID
from med_evals.scorers.medevidence import (
    answer_value,
    gold_label,
    parse_effect,
    parse_effect_lenient,
    reply_fields,
)

# (reply, the authors' grading, our lenient reading)
FIVE = [
    (
        "- **Rationale**: ...\n- **Full Answer**: Lower pain [1].\n- **Answer**: Lower",
        "lower",
        "lower",
    ),
    ("**Answer**: No Difference", "no difference", "no difference"),
    ("  **ANSWER**:   insufficient data  ", "insufficient data", "insufficient data"),
    ("**Answer**: Higher\n\n**Note**: one small trial", "higher", "higher"),
    ("**Answer**: Higher\n**Answer**: Lower", "lower", "lower"),  # a repeated key: the last
    ("<think>**Answer**: Lower</think>\n- **Answer**: Higher", "higher", "higher"),
    # valid only in the lenient reading: the authors require the value to equal a class
    ("- **Answer**: **Uncertain Effect**", INVALID, "uncertain effect"),
    ("**Answer**: Higher.", INVALID, "higher"),
    ("Answer: Lower", INVALID, "lower"),  # no asterisks: no field
    ("**Answer:** Higher", INVALID, "higher"),  # colon inside the asterisks: no field
    ("**Answer**: Lower\nNote: based on one trial.", INVALID, "lower"),  # value runs on
    ("The evidence shows no significant difference between the groups.", INVALID, "no difference"),
    ("- **Answer**: insufficient evidence", INVALID, "insufficient data"),
    # invalid in both
    ("**Answer**: Higher or Lower", INVALID, INVALID),
    ("I cannot answer this question.", INVALID, INVALID),
    ("", INVALID, ERROR),  # an empty reply: the authors grade it invalid
    (None, ERROR, ERROR),  # no reply at all (provider failure)
]


@pytest.mark.parametrize("reply,authors,lenient", FIVE)
def test_parse_five(reply, authors, lenient):
    assert parse_effect(reply, "five") == authors
    assert parse_effect_lenient(reply, "five") == lenient


def _authors_grade(reply: str, gold: str) -> bool:
    """The authors' rules, re-derived independently from their code: their field regex verbatim
    (findall, groups (-, key, value, char, -)), thinking stripped, value lower/strip == gold."""
    text = re.sub(r"<think>.*?</think>", "", reply, flags=re.DOTALL).strip()
    pattern = r"(-\s*)?\*\*(.*?)\*\*:\s*((.|\n)*?)(?=\n+(-\s*)?\*\*|\Z)"
    matches = re.findall(pattern, text, re.DOTALL)
    parsed = {k.strip().lower().replace(" ", "_"): v.strip() for _, k, v, _, _ in matches}
    ans = parsed.get("answer", "").lower().strip() if matches else ""
    return gold.lower() == ans


@pytest.mark.parametrize("reply", [r for r, _, _ in FIVE if r is not None])
@pytest.mark.parametrize(
    "gold", ["higher", "lower", "no difference", "uncertain effect", "insufficient data"]
)
def test_default_grading_equals_the_authors(reply, gold):
    assert (parse_effect(reply, "five") == gold) == _authors_grade(reply, gold)


def test_fields_as_the_authors_read_them():
    reply = "- **Rationale**: a\nb\n- **Full Answer**: c [1]\n- **Answer**: Higher"
    assert reply_fields(reply) == {"rationale": "a\nb", "full_answer": "c [1]", "answer": "Higher"}
    assert answer_value("no fields here") == ""


def test_parse_three_offers_only_three():
    assert parse_effect("**Answer**: Uncertain", "three") == "uncertain"
    assert parse_effect("**Answer**: Lower", "three") == "lower"
    assert parse_effect("**Answer**: No Difference", "three") == INVALID
    assert parse_effect_lenient("Answer: uncertain", "three") == "uncertain"


def test_gold_label_schemes():
    assert gold_label("No difference", "five") == "no difference"
    assert [
        gold_label(a, "three")
        for a in ("higher", "lower", "no difference", "uncertain effect", "insufficient data")
    ] == ["higher", "lower", "uncertain", "uncertain", "uncertain"]
    with pytest.raises(ValueError, match="unknown MedEvidence answer"):
        gold_label("better", "five")
