"""Flip rates: how often a trial's prediction changes between two oncology conditions.

The paper defines the flip rate only for baseline vs counterfactual ("the proportion of trials
for which the predicted label differed between the baseline and counterfactual inputs") and
does not say what happens to invalid replies. Two denominators, both ours to choose:

- default, **valid in both**: trials with a valid prediction (POSITIVE / NEGATIVE) in both
  conditions; the others are counted as ``n_excluded``;
- **all paired**: every trial with a reply in both conditions, an INVALID reply counted as an
  outcome of its own (POSITIVE -> INVALID is a flip, INVALID -> INVALID is not). A provider
  failure (ERROR: no reply) is missing, not an outcome: such trials are counted apart
  (``n_error_excluded``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, metric

from med_evals.scorers.labels import ERROR
from med_evals.scorers.score_table import rows_of, table_of
from med_evals.stats import proportion_with_intervals

#: Pairs reported whenever both conditions are in a run: the paper's baseline vs counterfactual,
#: and (ours, not defined in the paper) counterfactual vs counterfactual with the real DOI.
DEFAULT_FLIP_PAIRS = ("title_abstract:counterfactual", "counterfactual:counterfactual_doi")


def parse_pair(pair: str) -> tuple[str, str]:
    a, sep, b = pair.partition(":")
    if not sep or not a or not b:
        raise ValueError(f"a condition pair is written 'a:b', got {pair!r}")
    return a, b


def flip_rate(values: Iterable[Mapping[str, Any]], a: str, b: str) -> dict[str, Any]:
    """Share of trials whose prediction differs between conditions ``a`` and ``b``.

    ``p``, ``count``, ``n``, ``wald``, ``wilson``: over trials valid in both conditions
    (``n_excluded``: paired trials left out for an invalid or errored prediction in either).
    ``all_paired``: the same numbers over every trial with a reply in both conditions, INVALID
    an outcome of its own (``n_error_excluded``: paired trials left out for an ERROR).
    """
    by_cond = rows_of(list(values)).table.groups("condition")
    pa = {v["trial"]: v for v in (by_cond[a].values if a in by_cond else [])}
    pb = {v["trial"]: v for v in (by_cond[b].values if b in by_cond else [])}
    common = sorted(set(pa) & set(pb), key=str)
    both_valid = [t for t in common if pa[t]["valid"] and pb[t]["valid"]]
    flips = sum(pa[t]["prediction"] != pb[t]["prediction"] for t in both_valid)
    replied = [t for t in common if ERROR not in (pa[t]["prediction"], pb[t]["prediction"])]
    flips_all = sum(pa[t]["prediction"] != pb[t]["prediction"] for t in replied)
    out = proportion_with_intervals(flips, len(both_valid))
    out.update(
        pair=f"{a}:{b}",
        n_paired=len(common),
        n_excluded=len(common) - len(both_valid),
        all_paired=proportion_with_intervals(flips_all, len(replied)),
        n_error_excluded=len(common) - len(replied),
    )
    return out


@metric
def flip_rates(pairs: list[str] | None = None, detail: bool = True) -> Metric:
    """Share of trials whose prediction differs between two conditions, with intervals: over
    trials valid in both (``<a>~<b>``), and over all paired trials with a reply, INVALID an
    outcome of its own (``<a>~<b>/all_paired``).

    Args:
        pairs: Condition pairs ``"a:b"``; a pair is reported when both are in the run.
        detail: Also the intervals, counts and the all-paired rate (False: the rate only, as
            in the short metric set a run logs by default).
    """
    wanted = [parse_pair(p) for p in (pairs or DEFAULT_FLIP_PAIRS)]

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        values = table_of(scores).rows()
        present = {v["condition"] for v in values}
        out: dict[str, float] = {}
        for a, b in wanted:
            if a in present and b in present:
                fr = flip_rate(values, a, b)
                key = f"{a}~{b}"
                out[key] = fr["p"]
                if not detail:
                    continue
                out[f"{key}/wald_lo"], out[f"{key}/wald_hi"] = fr["wald"]
                out[f"{key}/wilson_lo"], out[f"{key}/wilson_hi"] = fr["wilson"]
                out[f"{key}/n"] = fr["n"]
                ap = fr["all_paired"]
                out[f"{key}/all_paired"] = ap["p"]
                out[f"{key}/all_paired_wilson_lo"], out[f"{key}/all_paired_wilson_hi"] = ap[
                    "wilson"
                ]
                out[f"{key}/all_paired_n"] = ap["n"]
        return out

    return compute
