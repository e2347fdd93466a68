"""Flip rates: how often a trial's prediction changes between two oncology conditions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, metric

from med_evals.scorers.classification import by_group, score_dicts
from med_evals.stats import proportion_with_intervals

#: Flip-rate pairs reported whenever both conditions are in a run (the study's two contrasts).
DEFAULT_FLIP_PAIRS = ("title_abstract:counterfactual", "counterfactual:counterfactual_doi")


def parse_pair(pair: str) -> tuple[str, str]:
    a, sep, b = pair.partition(":")
    if not sep or not a or not b:
        raise ValueError(f"a condition pair is written 'a:b', got {pair!r}")
    return a, b


def flip_rate(values: Iterable[Mapping[str, Any]], a: str, b: str) -> dict[str, Any]:
    """Share of trials whose prediction differs between conditions ``a`` and ``b``.

    Over trials with a valid prediction in both conditions (the count of trials left out for
    an invalid or errored prediction in either is reported as ``n_excluded``).
    """
    by_cond = by_group(list(values))
    pa = {v["trial"]: v for v in by_cond.get(a, [])}
    pb = {v["trial"]: v for v in by_cond.get(b, [])}
    common = sorted(set(pa) & set(pb), key=str)
    both_valid = [t for t in common if pa[t]["valid"] and pb[t]["valid"]]
    flips = sum(pa[t]["prediction"] != pb[t]["prediction"] for t in both_valid)
    out = proportion_with_intervals(flips, len(both_valid))
    out.update(pair=f"{a}:{b}", n_paired=len(common), n_excluded=len(common) - len(both_valid))
    return out


@metric
def flip_rates(pairs: list[str] | None = None) -> Metric:
    """Share of trials whose valid prediction differs between two conditions, with intervals.

    Args:
        pairs: Condition pairs ``"a:b"``; a pair is reported when both are in the run.
    """
    wanted = [parse_pair(p) for p in (pairs or DEFAULT_FLIP_PAIRS)]

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values = score_dicts(scores)
        present = {v["condition"] for v in values}
        out: dict[str, float] = {}
        for a, b in wanted:
            if a in present and b in present:
                fr = flip_rate(values, a, b)
                key = f"{a}~{b}"
                out[key] = fr["p"]
                out[f"{key}/wald_lo"], out[f"{key}/wald_hi"] = fr["wald"]
                out[f"{key}/wilson_lo"], out[f"{key}/wilson_hi"] = fr["wilson"]
                out[f"{key}/n"] = fr["n"]
        return out

    return compute
