import pytest

from med_evals.scorers.labels import ERROR, INVALID
from med_evals.scorers.oncology_rct import (
    invert_outcome,
    is_exact_case,
    parse_outcome_lenient,
    parse_outcome_strict,
)

# reply, strict (the study's rule), exact case, lenient
REPLIES = [
    ("POSITIVE", "POSITIVE", True, "POSITIVE"),
    ("NEGATIVE", "NEGATIVE", True, "NEGATIVE"),
    (" negative\n", "NEGATIVE", False, "NEGATIVE"),
    ("\n\nPOSITIVE  ", "POSITIVE", True, "POSITIVE"),
    ("Positive", "POSITIVE", False, "POSITIVE"),
    ("POSITIVE.", INVALID, False, "POSITIVE"),
    ("NEGATIVE.", INVALID, False, "NEGATIVE"),
    ("**POSITIVE**", INVALID, False, "POSITIVE"),
    ("`NEGATIVE`", INVALID, False, "NEGATIVE"),
    ("Answer: NEGATIVE", INVALID, False, "NEGATIVE"),
    (
        "The trial met its primary endpoint of overall survival (HR 0.72, p=0.002), so it is "
        "POSITIVE.",
        INVALID,
        False,
        "POSITIVE",
    ),
    ("POSITIVE or NEGATIVE depending on the endpoint", INVALID, False, INVALID),
    ("POSITIVE\nNEGATIVE", INVALID, False, INVALID),
    ("", ERROR, False, ERROR),
    # whitespace only is text: the study strips it to "" and parses it INVALID; only no text
    # at all (None, or "" which its `if content` turns into None) is ERROR
    ("   \n", INVALID, False, INVALID),
    (" ", INVALID, False, INVALID),
    (None, ERROR, False, ERROR),
    (
        "I'm sorry, but I can't determine the outcome of this trial from a DOI alone.",
        INVALID,
        False,
        INVALID,
    ),
    ("UNKNOWN", INVALID, False, INVALID),
    ("POSITIVELY", INVALID, False, INVALID),
]


@pytest.mark.parametrize("reply,strict,exact,lenient", REPLIES)
def test_parsers(reply, strict, exact, lenient):
    assert parse_outcome_strict(reply) == strict
    assert is_exact_case(reply) is exact
    assert parse_outcome_lenient(reply) == lenient


def test_invert_outcome():
    assert invert_outcome("POSITIVE") == "NEGATIVE"
    assert invert_outcome("NEGATIVE") == "POSITIVE"
    with pytest.raises(ValueError, match="cannot invert"):
        invert_outcome("INVALID")
