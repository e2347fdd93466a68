"""Where runs stand: the statistics core (:mod:`med_evals.stats.intervals`,
:mod:`med_evals.stats.trivial`, :mod:`med_evals.stats.power`, :mod:`med_evals.stats.ranking`)
over runs read back, for the report and ``med-evals compare``, ``diff``, ``regress`` and
``power``. Each function here only chooses the samples and the method; the numbers are the
core's (docs/numbers.md, "What a number can say").

- **Which headline numbers are proportions** (:data:`PROPORTIONS`, ours): accuracy over all
  samples (right = the label is the target), accuracy over valid predictions (right among the
  valid) and the valid rate, named so by every study; each is checked on the samples at hand
  (its count / n must equal the headline function's number, else it is treated as any other
  number). A proportion's interval is Wilson's; any other number's (macro-F1) a percentile
  bootstrap of the headline function.
- **What a pair detects** (:func:`detectable`): a proportion whose denominator is the same
  samples in both runs (over all samples; over valid predictions when every paired sample is
  valid in both) from the pair's observed discordance
  (:func:`med_evals.stats.power.pair_detectable`);
  any other number from its paired bootstrap's standard error
  (:func:`med_evals.stats.power.detectable_from_se`), under the same floor: nothing where too
  few samples differ (:func:`med_evals.stats.power.too_few_differ`; for such a number, the
  samples whose prediction or validity differs: :func:`differing`).
- **What a baseline alone lets a gate detect, or rule out** (:func:`from_baseline`): the drop a
  gate on its n samples detects, and the margin it rules out (``--margin``), with 80% power;
  :func:`items_needed` sizes a gate for a chosen drop or margin.
- **Trivial rows** (:func:`trivial_blocks`): once per condition and set of samples (the same
  sample ids with the same targets, under one label set): runs on the same samples share them.
- **Ranks** (:func:`rankings`): three runs or more of a condition, on the samples all of them
  scored with the same target.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from med_evals.logs.labels import Group, ordered_conditions
from med_evals.logs.pairs import correct
from med_evals.scorers.score_table import resampling_rows
from med_evals.stats import power
from med_evals.stats.intervals import (
    bootstrap_interval,
    bootstrap_se,
    clustered_wilson_interval,
    wilson_interval,
)
from med_evals.stats.ranking import PairTest, Ranked, rank_runs
from med_evals.stats.trivial import TrivialRow, beats_trivial, best_trivial, trivial_rows
from med_evals.study.spec import Study

#: headline numbers that are a share of samples: name -> (what is counted: ``correct`` or
#: ``valid``, whether over valid predictions only)
PROPORTIONS: dict[str, tuple[str, bool]] = {
    "accuracy_all": ("correct", False),
    "accuracy_valid": ("correct", True),
    "valid_rate": ("valid", False),
}
#: how close count / n must be to the headline function's number to be taken for it
TOLERANCE = 1e-9

Values = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Entry:
    """One run (a report group, or a ``compare`` row) on one condition: its label, its
    samples (id -> score value), its task arguments (its label set) and each sample's source."""

    label: str
    values: Mapping[str, Mapping[str, Any]]
    task_args: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str | None] = field(default_factory=dict)

    def ordered(self) -> list[Mapping[str, Any]]:
        return [self.values[k] for k in sorted(self.values)]


def group_sources(group: Group) -> dict[str, str | None]:
    """sample id -> its source (:attr:`~med_evals.study.spec.Study.source`), from the log each
    sample's value was kept from (the newest: runs are oldest first)."""
    out: dict[str, str | None] = {}
    for run in group.runs:
        for sid in run.values:
            out[sid] = (run.samples.get(sid) or {}).get("source")
    return out


def entries(groups: Sequence[Group], condition: str) -> list[Entry]:
    """The groups that have ``condition``, as entries."""
    out = []
    for g in groups:
        values = g.conditions().get(condition)
        if values:
            out.append(Entry(g.label, values, g.task_args, group_sources(g)))
    return out


def _hit(what: str, value: Mapping[str, Any]) -> int:
    return correct(value) if what == "correct" else int(bool(value["valid"]))


def _close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= TOLERANCE


def proportion(name: str, values: Values, number: float) -> list[int] | None:
    """The per-sample 0/1 of headline number ``name`` over its denominator (all samples, or
    the valid ones), when it is a proportion (:data:`PROPORTIONS`) whose count / n is
    ``number`` on these ``values``; else None."""
    if name not in PROPORTIONS:
        return None
    what, over_valid = PROPORTIONS[name]
    hits = [_hit(what, v) for v in values if v["valid"] or not over_valid]
    share = sum(hits) / len(hits) if hits else math.nan
    return hits if _close(share, number) else None


# --- intervals ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A headline number's 95% interval, plain and clustered by source."""

    name: str
    value: float
    #: "Wilson" (a proportion) or "bootstrap" (any other number)
    method: str
    interval: tuple[float, float]
    #: the samples the number is over (a proportion over valid predictions: the valid ones)
    n: int
    #: the interval clustered by source (None: no source recorded)
    clustered: tuple[float, float] | None = None
    #: the sources among the samples, and whether one holds several (else clustered = plain)
    clusters: int = 0
    shared: bool = False


def headline_intervals(
    study: Study, entry: Entry, n_boot: int, seed: int = 0
) -> dict[str, Interval]:
    """:func:`compute_headline_intervals`, computed once per content (the report's headline
    table and its summary ask for the same intervals)."""
    key = ["intervals", study.task, entry.task_args, entry.ordered(),
           [entry.sources.get(k) for k in sorted(entry.values)], n_boot, seed]
    return dict(_memo(key, lambda: compute_headline_intervals(study, entry, n_boot, seed)))


def compute_headline_intervals(
    study: Study, entry: Entry, n_boot: int, seed: int = 0
) -> dict[str, Interval]:
    """Each headline number's 95% interval over ``entry``'s samples: Wilson for a proportion,
    the percentile bootstrap of the headline function (``n_boot`` resamples, seeded) for the
    rest; beside each, where the samples' sources are recorded, the interval clustered by
    source (Inspect's clustered Wilson interval,
    :func:`med_evals.stats.intervals.clustered_wilson_interval`; for the rest, the cluster
    bootstrap of :func:`med_evals.stats.intervals.bootstrap_interval`)."""
    values = entry.ordered()
    ids = sorted(entry.values)
    numbers = study.headline_values(values, entry.task_args)
    sources = [entry.sources.get(k) for k in ids]
    known = bool(values) and all(s is not None for s in sources)
    # every source one sample: resampling sources is resampling samples (the same draws)
    singletons = len(set(sources)) == len(sources)

    def fn(vals: list[Any]) -> Mapping[str, float]:
        return study.headline_values(vals, entry.task_args)

    plain_boot: dict[str, tuple[float, float]] | None = None
    cluster_boot: dict[str, tuple[float, float]] | None = None
    out = {}
    for h in study.headline:
        value = numbers[h.name]
        hits = proportion(h.name, values, value)
        if hits is not None:
            what, over_valid = PROPORTIONS[h.name]
            mine = [s for v, s in zip(values, sources, strict=True) if v["valid"] or not over_valid]
            lo_hi = wilson_interval(value, len(hits))
            clustered = clustered_wilson_interval(hits, mine) if known else None
            out[h.name] = Interval(h.name, value, "Wilson", lo_hi, len(hits), clustered,
                                   len(set(mine)) if known else 0,
                                   known and len(set(mine)) < len(mine))
            continue
        if plain_boot is None:
            plain_boot = bootstrap_interval(fn, resampling_rows(values), n_boot, seed)
        clustered = None
        if known:
            if cluster_boot is None:
                cluster_boot = plain_boot if singletons else bootstrap_interval(
                    fn, resampling_rows(values), n_boot, seed, clusters=sources)
            clustered = cluster_boot[h.name]
        out[h.name] = Interval(h.name, value, "bootstrap", plain_boot[h.name], len(values),
                               clustered, len(set(sources)) if known else 0,
                               known and len(set(sources)) < len(values))
    return out


# --- trivial baselines --------------------------------------------------------------------


@dataclass
class TrivialBlock:
    """The trivial rows of one condition over one set of samples, and the runs over them."""

    condition: str
    #: the run labels whose samples these are
    labels: list[str]
    n: int
    rows: list[TrivialRow]
    #: the constant or majority row a run must beat (:func:`med_evals.stats.trivial.best_trivial`)
    best: TrivialRow | None


def trivial_blocks(study: Study, condition: str, runs: Sequence[Entry],
                   draws: int | None = None) -> list[TrivialBlock]:
    """The trivial rows of ``condition``: one block per distinct set of samples among
    ``runs`` (the same ids with the same targets, under the same label set), in the runs'
    order."""
    blocks: dict[Hashable, TrivialBlock] = {}
    for e in runs:
        key = (study.labels(e.task_args),
               tuple((k, str(e.values[k]["target"])) for k in sorted(e.values)))
        if key in blocks:
            blocks[key].labels.append(e.label)
            continue
        kwargs = {} if draws is None else {"draws": draws}

        def rows_of(e: Entry = e, kwargs: dict[str, int] = kwargs) -> list[TrivialRow]:
            return trivial_rows(study, e.ordered(), e.task_args, **kwargs)

        rows = _memo(["trivial", study.task, key, kwargs], rows_of)
        blocks[key] = TrivialBlock(condition, [e.label], len(e.values), rows,
                                   best_trivial(study, rows))
    return list(blocks.values())


def block_of(blocks: Sequence[TrivialBlock], label: str) -> TrivialBlock | None:
    return next((b for b in blocks if label in b.labels), None)


#: results of :func:`standing` and the trivial rows by what they are computed from (the values,
#: the label set, the row, the resamples): ``med-evals compare`` asks for the numbers its report
#: has just computed, over the same samples; a pure function's results, so never stale
_MEMO: dict[str, Any] = {}
MEMO_SIZE = 256


def _memo(key: Any, compute: Callable[[], Any]) -> Any:
    text = json.dumps(key, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest not in _MEMO:
        if len(_MEMO) >= MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[digest] = compute()
    return _MEMO[digest]


def standing(study: Study, entry: Entry, block: TrivialBlock | None,
             n_boot: int) -> dict[str, Any] | None:
    """:func:`med_evals.stats.trivial.beats_trivial` of the run against its block's best row
    (seed 0); None when there is no such row."""
    if block is None or block.best is None:
        return None
    best = block.best
    values = entry.ordered()
    return dict(_memo(
        ["standing", study.task, study.labels(entry.task_args), values, best.prediction, n_boot],
        lambda: beats_trivial(study, values, best, entry.task_args, n_boot)))


# --- what a pair detects ------------------------------------------------------------------


def _paired_hits(
    name: str, va: Values, vb: Values, number_a: float, number_b: float
) -> tuple[list[int], list[int]] | None:
    """Both runs' per-sample 0/1 of a proportion over the same samples: over all samples, or
    over valid predictions when every paired sample is valid in both runs."""
    if name not in PROPORTIONS:
        return None
    what, over_valid = PROPORTIONS[name]
    if over_valid and not all(v["valid"] for v in [*va, *vb]):
        return None
    ha = proportion(name, va, number_a)
    hb = proportion(name, vb, number_b)
    if ha is None or hb is None or len(ha) != len(hb):
        return None
    return ha, hb


def detectable(
    study: Study, va: Values, vb: Values, boot: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, Any]]:
    """The smallest difference of each headline number the pair (``va``, ``vb``: the same
    samples in the same order) detects at 80% power and alpha = 0.05: ``difference`` (``inf``:
    none of any size; NaN: undefined), ``method`` (``discordance`` or ``bootstrap se``),
    ``n``, and ``discordant`` or ``se``. ``boot``: the pair's
    :func:`~med_evals.stats.intervals.bootstrap_difference` of the headline function (``a``, ``b``,
    ``se``
    of each number)."""
    out: dict[str, dict[str, Any]] = {}
    for h in study.headline:
        b = boot[h.name]
        hits = _paired_hits(h.name, va, vb, b["a"], b["b"])
        if hits is not None:
            d = power.pair_detectable(*hits)
            out[h.name] = {"difference": d["difference"], "method": "discordance",
                           "n": d["n"], "discordant": d["discordant"]}
        else:
            se = b["se"]
            k = differing(va, vb)
            if power.too_few_differ(len(va), k):
                # the discordance route's floor: a bootstrap of so few differing samples (none
                # on an identical rerun) shows nothing of how the number varies
                diff = math.inf
            else:
                # se 0: the two runs' numbers agree on every resample: no estimate
                diff = power.detectable_from_se(se) if se > 0 else math.nan
            out[h.name] = {"difference": diff, "method": "bootstrap se", "n": len(va),
                           "se": se, "discordant": k}
    return out


def differing(va: Values, vb: Values) -> int:
    """The paired samples (``va``, ``vb``: the same samples in the same order) whose prediction
    or validity differs between the two runs: the only samples a headline number's paired
    difference can come from."""
    return sum((a.get("prediction"), bool(a.get("valid"))) != (b.get("prediction"),
                                                              bool(b.get("valid")))
               for a, b in zip(va, vb, strict=True))


def detectable_text(d: Mapping[str, Any]) -> str:
    """``0.301`` with how it was found, or why no difference is detectable, in words:
    ``0.301 (2.80 x the paired bootstrap's standard error 0.107)``, ``0.350 (from the
    discordance: 5 of 12 samples right in one run only)``, ``none (only 2 of 12 samples right
    in one run only: too few)``."""
    c = power.z_sum()
    diff = d["difference"]
    if d["method"] == "bootstrap se" and not math.isinf(diff):
        if math.isnan(d["se"]):
            return "no estimate (no bootstrap standard error: no resample defined it)"
        if d["se"] == 0:
            return ("no estimate (the paired bootstrap's standard error is 0: the runs' "
                    "numbers agree on every resample)")
        return f"{diff:.3f} ({c:.2f} × the paired bootstrap's standard error {d['se']:.3f})"
    n, k = d["n"], d["discordant"]
    if math.isinf(diff):
        if n < power.min_paired_n():
            return f"none (fewer than {power.min_paired_n()} paired samples)"
        if k == 0:
            return f"none (the runs never disagree on the {n} samples)"
        return f"none (only {k} of {n} samples differ: too few)"
    if math.isnan(diff):
        return "no estimate (no paired samples)"
    return f"{diff:.3f} (from the discordance: {k} of {n} samples differ)"


# --- ranks --------------------------------------------------------------------------------


@dataclass
class Ranking:
    """The ranks of three runs or more of one condition on the samples all of them scored."""

    condition: str
    n: int
    #: the number that orders them (the study's first headline) over the shared samples
    primary: str
    values: dict[str, float]
    #: accuracy over the shared samples (the correctness the tests compare)
    accuracy: dict[str, float]
    ranked: list[Ranked]
    tests: list[PairTest]


def ranking(study: Study, condition: str, runs: Sequence[Entry]) -> list[Ranking]:
    """:func:`med_evals.stats.ranking.rank_runs` of the ``runs`` of ``condition`` (per label set;
    three or more runs), on the samples all of them scored with the same target."""
    out = []
    by_labels: dict[tuple[str, ...], list[Entry]] = {}
    for e in runs:
        by_labels.setdefault(study.labels(e.task_args), []).append(e)
    primary = study.headline[0].name
    for members in by_labels.values():
        if len(members) < 3:
            continue
        shared = set.intersection(*(set(e.values) for e in members))
        keys = sorted(k for k in shared
                      if len({str(e.values[k]["target"]) for e in members}) == 1)
        if not keys:
            continue
        correct_of = {e.label: [correct(e.values[k]) for k in keys] for e in members}
        numbers = {e.label: study.headline_values([e.values[k] for k in keys], e.task_args)
                   [primary] for e in members}
        ranked, tests = rank_runs(correct_of, numbers)
        out.append(Ranking(condition, len(keys), primary, numbers,
                           {k: sum(v) / len(v) for k, v in correct_of.items()}, ranked, tests))
    return out


def rankings(study: Study, groups: Sequence[Group]) -> list[Ranking]:
    """:func:`ranking` of every condition of the groups, in the study's order."""
    present = {c for g in groups for c in g.conditions()}
    return [r for cond in ordered_conditions(study, present)
            for r in ranking(study, cond, entries(groups, cond))]


# --- sizing a gate ------------------------------------------------------------------------

#: bootstrap resamples of a baseline's standard error (macro-F1's) when a gate is sized from
#: the baseline alone: ``med-evals power``'s default, and the gate's where its pair detects
#: nothing, so that both print the same figure (the report's number of resamples)
SE_BOOT = 200


def from_baseline(
    study: Study, values: Values, task_args: Mapping[str, Any] | None, n_boot: int = SE_BOOT,
    margin: bool = False,
) -> dict[str, dict[str, Any]]:
    """What a baseline run's ``values`` (one condition) alone let a gate on its n samples do,
    per headline number, with 80% power: ``now``, the smallest drop it detects (alpha = 0.05,
    two-sided), or with ``margin`` the smallest margin it rules out (``regress --margin``:
    one-sided at 0.05, :func:`med_evals.stats.power.one_sided`). A proportion over the same
    samples in both runs (over all samples, or over valid predictions when every baseline
    sample is valid): :func:`med_evals.stats.power.gate_drop`, the new run's errors independent
    of the baseline's (``method`` ``independent errors``); any other number:
    ``c * sqrt(2) * se`` of the baseline's bootstrap standard error
    (:func:`med_evals.stats.power.gate_drop_from_se`; ``method`` ``bootstrap se``, ``se``).
    Each entry also holds ``value``, ``n`` and ``why`` (empty, or why ``now`` is undefined)."""
    numbers = study.headline_values(values, task_args)
    alpha = power.one_sided() if margin else power.ALPHA
    n = len(values)
    se: dict[str, float] | None = None
    out: dict[str, dict[str, Any]] = {}
    for h in study.headline:
        p = numbers[h.name]
        row: dict[str, Any] = {"value": p, "n": n, "why": ""}
        over_valid = PROPORTIONS.get(h.name, ("", False))[1]
        hits = proportion(h.name, values, p)
        if hits is not None and (not over_valid or all(v["valid"] for v in values)):
            row.update(method="independent errors",
                       now=power.gate_drop(n, p, alpha=alpha) if n else math.nan)
        else:
            if se is None:
                se = bootstrap_se(lambda v: study.headline_values(v, task_args),
                                  resampling_rows(values), n_boot)
            now = power.gate_drop_from_se(se[h.name], alpha=alpha)
            row.update(method="bootstrap se", now=now, se=se[h.name])
            if math.isnan(now):
                row["why"] = "no bootstrap standard error on the baseline"
            elif now == 0:
                row["why"] = ("the baseline's bootstrap standard error is 0 (every resample "
                              "gives the same value)")
        out[h.name] = row
    return out


def items_needed(
    study: Study, values: Values, task_args: Mapping[str, Any] | None, drop: float,
    n_boot: int = SE_BOOT, margin: bool = False,
) -> dict[str, dict[str, Any]]:
    """For each headline number of a baseline run's ``values`` (one condition): its value, n,
    the drop a gate on these n samples detects now (with ``margin``: the margin it rules out
    now) and the items a gate needs to detect ``drop`` (to rule out a drop larger than
    ``drop``), with 80% power at alpha = 0.05 (two-sided; one-sided for a margin):
    :func:`from_baseline`'s methods; a proportion sized by
    :func:`med_evals.stats.power.size_for_drop`, any other number, ours, with se taken to
    shrink as 1/sqrt(n): ``ceil(n * (now / drop)^2)``. ``needed`` is None where no gate can
    (``why`` says why)."""
    alpha = power.one_sided() if margin else power.ALPHA
    out = from_baseline(study, values, task_args, n_boot, margin)
    for name, row in out.items():
        row["needed"] = None
        if row["method"] == "independent errors":
            try:
                row["needed"] = power.size_for_drop(drop, row["value"], alpha=alpha)
            except ValueError as ex:
                row["why"] = str(ex)
        elif not row["why"]:
            row["needed"] = max(math.ceil(row["n"] * (row["now"] / drop) ** 2 - 1e-9),
                                power.min_paired_n(alpha))
        out[name] = row
    return out
