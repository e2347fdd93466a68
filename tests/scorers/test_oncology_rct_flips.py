import math

import pytest
from inspect_ai.scorer import SampleScore, Score

from med_evals.scorers.oncology_rct import (
    DEFAULT_FLIP_PAIRS,
    flip_rate,
    flip_rates,
    outcome_value,
    parse_pair,
)

# trial: (reply under title_abstract, reply under counterfactual); targets do not matter here
REPLIES = {
    0: ("POSITIVE", "NEGATIVE"),  # valid flip
    1: ("NEGATIVE", "NEGATIVE"),  # valid, no flip
    2: ("POSITIVE", "POSITIVE"),  # valid, no flip
    3: ("POSITIVE", "Probably negative."),  # INVALID in one: a flip in the all-paired view
    4: ("I cannot tell.", "Unsure."),  # INVALID in both: no flip in the all-paired view
    5: ("NEGATIVE", None),  # ERROR (no reply): out of both denominators
}


def _values():
    out = []
    for trial, replies in REPLIES.items():
        for cond, reply in zip(("title_abstract", "counterfactual"), replies, strict=True):
            error = "provider failed" if reply is None else None
            out.append(outcome_value(reply, "POSITIVE", cond, trial, error=error))
    return out


def test_two_denominators():
    fr = flip_rate(_values(), "title_abstract", "counterfactual")
    # valid in both: trials 0, 1, 2; one flip
    assert (fr["count"], fr["n"], fr["n_paired"], fr["n_excluded"]) == (1, 3, 6, 3)
    assert fr["p"] == pytest.approx(1 / 3)
    # all paired with a reply: trials 0-4; flips: 0 and 3 (INVALID is its own outcome)
    ap = fr["all_paired"]
    assert (ap["count"], ap["n"], fr["n_error_excluded"]) == (2, 5, 1)
    assert ap["p"] == pytest.approx(2 / 5)
    lo, hi = ap["wilson"]
    assert lo < 0.4 < hi


def test_metric_reports_both():
    scores = [SampleScore(score=Score(value=v), sample_id=i) for i, v in enumerate(_values())]
    m = flip_rates()(scores)
    key = "title_abstract~counterfactual"
    assert m[key] == pytest.approx(1 / 3) and m[f"{key}/n"] == 3
    assert m[f"{key}/all_paired"] == pytest.approx(2 / 5) and m[f"{key}/all_paired_n"] == 5
    # the second default pair is reported only when both of its conditions are in the run
    assert not any(k.startswith("counterfactual~counterfactual_doi") for k in m)


def test_no_pairs_gives_nan_not_an_error():
    fr = flip_rate(_values(), "title_abstract", "doi_only")
    assert fr["n"] == 0 and math.isnan(fr["p"]) and fr["all_paired"]["n"] == 0


def test_pairs():
    assert DEFAULT_FLIP_PAIRS[0] == "title_abstract:counterfactual"  # the paper's contrast
    assert parse_pair("a:b") == ("a", "b")
    with pytest.raises(ValueError, match="written 'a:b'"):
        parse_pair("a-b")
