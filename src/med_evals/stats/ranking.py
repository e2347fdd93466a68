"""Which runs can be told apart: ranks with intervals, for runs of one study and condition on
the same samples.

Ours, the choice among those the issue named (paired tests with a stated correction, or
bootstrap rank intervals):

- every pair of runs is compared by McNemar's exact test on paired correctness
  (:func:`med_evals.stats.intervals.mcnemar_exact`: right in one run and wrong in the other, per
  sample);
- the p-values of all ``k (k - 1) / 2`` pairs are corrected together by Holm's step-down method
  (Holm 1979; statsmodels ``multipletests(method="holm")``), which holds the family-wise error
  rate at alpha (0.05) under any dependence between the tests;
- run A is **significantly better** than run B when their Holm-adjusted p < alpha and A was
  right on more of the samples they disagree on;
- each run's **rank interval**: best rank = 1 + the runs significantly better than it, worst
  rank = k - the runs significantly worse; the runs it **cannot be told apart from** are those
  neither significantly better nor worse.

The runs are ordered (and ``rank``ed: 1 = highest, ties share the lower rank, NaN last) by the
primary number the caller gives (e.g. the study's first headline), while the tests are on
correctness (accuracy over the shared samples, an invalid reply wrong): the rank interval says
what the correctness data can separate, whatever the primary number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from med_evals.stats.intervals import mcnemar_exact

ALPHA = 0.05


@dataclass(frozen=True)
class PairTest:
    """One pair's test: ``a_only`` samples right only in ``a``, ``b_only`` only in ``b``."""

    a: str
    b: str
    a_only: int
    b_only: int
    p_value: float
    #: Holm-adjusted over every pair
    p_holm: float
    #: the run significantly better (None: the two cannot be told apart)
    better: str | None


@dataclass(frozen=True)
class Ranked:
    """One run's place: its rank by the primary number and the interval the tests allow."""

    run: str
    primary: float
    rank: int
    best_rank: int
    worst_rank: int
    #: runs significantly better / worse than this one, and those it cannot be told apart from
    better: tuple[str, ...]
    worse: tuple[str, ...]
    inseparable: tuple[str, ...]


def pair_tests(
    correct: Mapping[str, Sequence[int]], alpha: float = ALPHA
) -> list[PairTest]:
    """McNemar's exact test on every pair of runs, Holm-corrected together."""
    names = list(correct)
    pairs = list(combinations(names, 2))
    raw = [mcnemar_exact(correct[a], correct[b]) for a, b in pairs]
    if not pairs:
        return []
    from statsmodels.stats.multitest import multipletests  # where used: the CLI stays light

    reject, adjusted, _, _ = multipletests([t["p_value"] for t in raw], alpha, method="holm")
    out = []
    for (a, b), t, rej, p_adj in zip(pairs, raw, reject, adjusted, strict=True):
        better = (a if t["a_only"] > t["b_only"] else b) if rej else None
        out.append(PairTest(a, b, t["a_only"], t["b_only"], t["p_value"], float(p_adj), better))
    return out


def rank_runs(
    correct: Mapping[str, Sequence[int]],
    primary: Mapping[str, float],
    alpha: float = ALPHA,
) -> tuple[list[Ranked], list[PairTest]]:
    """The runs ordered by ``primary`` with their rank intervals, and the pair tests.

    ``correct``: run name -> per-sample correctness (1 right, 0 wrong), the same samples in the
    same order for every run; ``primary``: run name -> the number that orders them.
    """
    names = list(correct)
    if len(names) < 2:
        raise ValueError("ranking needs two runs or more")
    if set(primary) != set(names):
        raise ValueError("give a primary number for every run, and only for those")
    if len({len(v) for v in correct.values()}) > 1:
        raise ValueError("the runs' correctness vectors differ in length")
    tests = pair_tests(correct, alpha)
    better: dict[str, list[str]] = {n: [] for n in names}
    worse: dict[str, list[str]] = {n: [] for n in names}
    for t in tests:
        if t.better is not None:
            loser = t.b if t.better == t.a else t.a
            better[loser].append(t.better)
            worse[t.better].append(loser)

    def key(name: str) -> float:
        x = primary[name]
        return -math.inf if math.isnan(x) else x

    order = sorted(names, key=key, reverse=True)
    k = len(names)
    ranked = []
    for name in order:
        rank = 1 + sum(key(other) > key(name) for other in names)
        split = set(better[name]) | set(worse[name])
        ranked.append(Ranked(
            name, primary[name], rank, 1 + len(better[name]), k - len(worse[name]),
            tuple(n for n in order if n in better[name]),
            tuple(n for n in order if n in worse[name]),
            tuple(n for n in order if n != name and n not in split),
        ))
    return ranked, tests
