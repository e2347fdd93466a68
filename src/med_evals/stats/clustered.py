"""Intervals clustered by source: where several samples share one (the oncology conditions of
one trial, MedEvidence questions from one review, MedREQAL questions one review gave several
of), their errors go together and the plain interval is too narrow.

Computed by Inspect's own metrics (``inspect_ai.scorer``), called on ``SampleScore``s carrying
each sample's source in its metadata:

- **clustered standard error** of a mean: ``stderr(cluster=...)`` (Miller 2024, "Adding error
  bars to evals", arXiv 2411.00640, appendix A, with a finite-cluster correction):
  ``sqrt(C / (C - 1) * sum_c (sum_{i in c} (x_i - mean))^2) / n`` over C clusters, 0 with one;
  beside it the plain ``stderr()``: the sample standard deviation (ddof=1) / sqrt(n), which the
  clustered one equals when every sample is its own cluster;
- **95% interval of a proportion** (accuracy): ``ci_wilson(cluster=...)``: Wilson's score
  interval at the Korn-Graubard effective sample size ``p(1-p) / se_clustered^2`` (capped at n)
  with a Student-t critical value on C - 1 degrees of freedom (Inspect's docstring: Franco et
  al. 2019); beside it the plain ``ci_wilson()`` (the Wilson interval of
  :func:`med_evals.stats.intervals.wilson_interval`);
- the **design effect** ``(se_clustered / se)^2``: how many samples one independent one is
  worth (1: clustering changes nothing).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, cast

from inspect_ai.scorer import Metric, MetricProtocol, SampleScore, Score, ci_wilson, stderr

#: the sample-metadata key the scores carry their source under
KEY = "source"


def _scores(values: Sequence[float], clusters: Sequence[Hashable]) -> list[SampleScore]:
    if len(values) != len(clusters):
        raise ValueError("values and clusters differ in length")
    return [
        SampleScore(score=Score(value=float(x)), sample_id=i, sample_metadata={KEY: c})
        for i, (x, c) in enumerate(zip(values, clusters, strict=True))
    ]


def _number(metric: Metric, scores: list[SampleScore]) -> float:
    return float(cast(float, cast(MetricProtocol, metric)(scores)))


def _interval(metric: Metric, scores: list[SampleScore]) -> tuple[float, float]:
    bounds = cast(dict[str, float], cast(MetricProtocol, metric)(scores))
    return (float(bounds["lower"]), float(bounds["upper"]))


def clustered_se(values: Sequence[float], clusters: Sequence[Hashable]) -> dict[str, float]:
    """The plain and clustered standard errors of the mean of any per-sample numbers (e.g. a
    paired difference, -1/0/1), with the cluster count and design effect."""
    scores = _scores(values, clusters)
    se = _number(stderr(), scores)
    se_c = _number(stderr(cluster=KEY), scores)
    return {
        "n": len(values),
        "clusters": len(set(clusters)),
        "se": se,
        "se_clustered": se_c,
        "design_effect": (se_c / se) ** 2 if se > 0 else math.nan,
    }


def clustered_proportion(
    correct: Sequence[int], clusters: Sequence[Hashable]
) -> dict[str, Any]:
    """A proportion (accuracy: ``correct`` per sample, 1 or 0) with its plain and clustered
    standard errors and 95% Wilson intervals (the clustered one needs two clusters or more:
    NaN otherwise)."""
    if not correct:
        return {"p": math.nan, "n": 0, "clusters": 0, "se": math.nan, "se_clustered": math.nan,
                "design_effect": math.nan, "wilson": (math.nan, math.nan),
                "wilson_clustered": (math.nan, math.nan)}
    scores = _scores(correct, clusters)
    out: dict[str, Any] = {"p": sum(correct) / len(correct), **clustered_se(correct, clusters)}
    out["wilson"] = _interval(ci_wilson(), scores)
    out["wilson_clustered"] = (
        _interval(ci_wilson(cluster=KEY), scores) if out["clusters"] >= 2 else (math.nan, math.nan)
    )
    return out
