"""What a study's numbers can say, in the report (docs/numbers.md, "What a number can say"):
the trivial rows of each condition and each run's standing against the best of them
(:func:`standings`, shown in the headline table by
:func:`med_evals.commands.report.tables.headline_table`,
and :func:`not_better_lines`), each headline number's 95% interval, plain and clustered by
source (:func:`interval_tables`), which runs can be told apart (:func:`ranking_table`) and what
each pair can detect (:func:`detect_table`). The numbers are :mod:`med_evals.stats.standing`'s."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from med_evals.commands.report.document import (
    MISSING,
    Document,
    Shown,
    fmt_interval,
    is_missing,
    shown_interval,
)
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.stats.power import z_sum
from med_evals.stats.standing import (
    Interval,
    TrivialBlock,
    block_of,
    entries,
    headline_intervals,
    rankings,
    standing,
    trivial_blocks,
)
from med_evals.stats.trivial import TrivialRow
from med_evals.study.spec import Study


def fmt_diff(d: dict[str, float]) -> str:
    """``+0.120 (-0.050 to +0.300)`` for a difference with its 95% interval (a
    :class:`~med_evals.commands.report.document.Shown` of the three numbers)."""
    if is_missing(d.get("difference")):
        return MISSING
    text = f"{d['difference']:+.3f}"
    if not (is_missing(d.get("lo")) or is_missing(d.get("hi"))):
        text += f" ({d['lo']:+.3f} to {d['hi']:+.3f})"
        return shown_interval(text, d["difference"], (d["lo"], d["hi"]))
    return shown_interval(text, d["difference"], None)


@dataclass
class ConditionStanding:
    """What one condition's headline numbers can say (:mod:`med_evals.stats.standing`): its trivial
    rows, each run's standing against the best of them, each run's intervals."""

    blocks: list[TrivialBlock]
    #: run label -> :func:`med_evals.stats.trivial.beats_trivial` (None: no trivial row to beat)
    standing: dict[str, dict[str, Any] | None]
    #: run label -> headline name -> its 95% interval
    intervals: dict[str, dict[str, Interval]]


def standings(study: Study, groups: Sequence[Group], n_boot: int) -> dict[str, ConditionStanding]:
    """condition -> its :class:`ConditionStanding`, every number over each run's own samples:
    trivial rows once per set of samples (:func:`med_evals.stats.standing.trivial_blocks`; the
    random
    row the mean of ``n_boot`` draws), the paired bootstrap against the best row and the
    intervals with ``n_boot`` resamples, seed 0."""
    out = {}
    present = {c for g in groups for c in g.conditions()}
    for cond in ordered_conditions(study, present):
        runs = entries(groups, cond)
        blocks = trivial_blocks(study, cond, runs, draws=n_boot)
        out[cond] = ConditionStanding(
            blocks,
            {e.label: standing(study, e, block_of(blocks, e.label), n_boot) for e in runs},
            {e.label: headline_intervals(study, e, n_boot) for e in runs},
        )
    return out


def trivial_label(block: TrivialBlock, row: TrivialRow, several: bool) -> str:
    """``trivial: always POSITIVE`` (``(best)`` after the row runs are tested against); with
    several sets of samples in a condition, whose samples: ``trivial (samples of <run>): ...``."""
    whose = f" (samples of {', '.join(block.labels)})" if several else ""
    return f"trivial{whose}: {row.name}" + (" (best)" if row is block.best else "")


def not_better_lines(study: Study, conditions: Mapping[str, ConditionStanding],
                     n_boot: int) -> list[str]:
    """One line per run not better than its best trivial row beyond sampling noise."""
    primary = study.headline[0].display
    lines = []
    for cond, st in conditions.items():
        for label, beat in st.standing.items():
            if beat is None or beat["beats"] is not False:
                continue
            where = f" ({cond})" if cond else ""
            lines.append(
                f"Not better than trivial: {label}{where}: its {primary} {beat['run']:.3f} is "
                f"not above {beat['trivial']}'s {beat['trivial_value']:.3f} beyond sampling "
                f"noise (run − trivial {fmt_diff(beat)}, 95% paired bootstrap, {n_boot} "
                "resamples)"
            )
    return lines


def _method(method: str, over: str, n_boot: int) -> str:
    return (f"Wilson score interval over {over}" if method == "Wilson" else
            f"95% percentile bootstrap of the headline function ({n_boot} resamples, seed 0)")


def interval_tables(doc: Document, study: Study, conditions: Mapping[str, ConditionStanding],
                    n_boot: int) -> None:
    """Each run's headline numbers' 95% intervals; beside them, where several samples share a
    source (a MedEvidence review), the intervals clustered by it; else a note saying why
    there are none."""
    with_cond = any(conditions)
    plain, clustered = [], []
    methods: dict[str, set[str]] = {h.name: set() for h in study.headline}
    shared = False
    for cond, st in conditions.items():
        for label, ivs in st.intervals.items():
            row: dict[str, Any] = {"run": label}
            if with_cond:
                row["condition"] = cond
            row["n"] = max(i.n for i in ivs.values())
            crow = {**row, f"{study.source}s": max(i.clusters for i in ivs.values())}
            for h in study.headline:
                iv = ivs[h.name]
                methods[h.name].add(iv.method)
                shared = shared or iv.shared
                row[f"{h.display} 95% CI"] = fmt_interval(iv.interval, 3)
                crow[f"{h.display} 95% CI, clustered by {study.source}"] = (
                    MISSING if iv.clustered is None else fmt_interval(iv.clustered, 3))
            plain.append(row)
            if any(iv.clustered is not None for iv in ivs.values()):
                clustered.append(crow)
    how = "; ".join(
        f"{h.display}: " + " or ".join(_method(m, h.over, n_boot) for m in sorted(methods[h.name]))
        for h in study.headline if methods[h.name]
    )
    keys = 2 if with_cond else 1
    doc.table(plain, "95% intervals of the headline numbers", keys=keys, note=f"{how}.")
    if not plain:
        return
    if study.source is None:
        doc.p(
            f"No interval clustered by source: the {study.title} data records no source shared "
            "by several samples (no review or trial id), so the intervals treat samples as "
            "independent; they are too narrow where several samples come from one source.",
            "note",
        )
    elif shared:
        doc.table(
            clustered,
            f"95% intervals clustered by {study.source}",
            keys=keys,
            note=f"Samples of one {study.source} err together. Proportions: Wilson's interval "
            "at the Korn-Graubard effective sample size, Inspect's ci_wilson(cluster=); other "
            f"numbers: the cluster bootstrap (whole {study.source}s resampled, {n_boot} "
            "resamples, seed 0); docs/numbers.md.",
        )
    else:
        doc.p(
            f"Clustered by {study.source}: each {study.source} is one sample of each "
            f"condition here, so the interval clustered by {study.source} is the plain one.",
            "note",
        )


#: the paired rows' columns of what each pair detects (:func:`paired_rows`)
DETECTS = "smallest detectable"


def detectable_cell(d: Mapping[str, Any]) -> Shown | str:
    """``0.301 (bootstrap se)``, ``0.350 (discordance)``, ``none (too few differ)``, ``no
    estimate (same on every resample)`` or —; a
    :class:`~med_evals.commands.report.document.Shown` of the difference (none where there is
    no finite one) and, in a column ``<column> how``, the method or why there is none."""
    x = d["difference"]
    if not is_missing(x) and math.isinf(x):  # below the floor, whichever route
        return _detects("none (never differ)" if d.get("discordant") == 0
                        else "none (too few differ)", None)
    if d.get("se") == 0:
        return _detects("no estimate (same on every resample)", None)
    if is_missing(x):
        return MISSING
    return _detects(f"{x:.3f} ({d['method']})", x, d["method"])


def _detects(text: str, x: float | None, how: str | None = None) -> Shown:
    return Shown(text, [("{}", x), ("{} how", how if how is not None else text)])


def _same(a: float, b: float) -> bool:
    return (is_missing(a) and is_missing(b)) or a == b


def ranking_table(doc: Document, study: Study, groups: Sequence[Group]) -> None:
    """For three runs or more of a condition on shared samples: ranks with the runs each
    cannot be told apart from (:func:`med_evals.stats.standing.rankings`)."""
    found = rankings(study, groups)
    if not found:
        return
    with_cond = any(r.condition for r in found)
    primary = study.headline_by_name(found[0].primary).display
    rows = []
    for r in found:
        for x in r.ranked:
            row: dict[str, Any] = {}
            if with_cond:
                row["condition"] = r.condition
            row["rank"] = x.rank
            row["possible ranks"] = Shown(
                str(x.best_rank) if x.best_rank == x.worst_rank
                else f"{x.best_rank}-{x.worst_rank}",
                [("best possible rank", x.best_rank), ("worst possible rank", x.worst_rank)])
            row["run"] = x.run
            row["n shared"] = r.n
            row[f"{primary} (shared samples)"] = x.primary
            if not all(_same(r.values[k], r.accuracy[k]) for k in r.accuracy):
                row["accuracy (shared samples)"] = r.accuracy[x.run]
            row["significantly better than"] = "; ".join(x.worse) or "none"
            row["cannot be told apart from"] = "; ".join(x.inseparable) or "none"
            rows.append(row)
    doc.table(
        rows,
        "Which runs can be told apart, per condition, on the samples all of them scored (same "
        "id and target)",
        keys=2 if with_cond else 1,
        note=f"Ranked by {primary} over those samples; every pair compared by McNemar's exact "
        "test on correctness (an invalid reply wrong), the p-values Holm-corrected together "
        "(family-wise α = 0.05); possible ranks: from 1 + the runs significantly better to "
        "k − the runs significantly worse (docs/numbers.md).",
    )


def detect_table(doc: Document, rows: Sequence[dict[str, Any]], keys: int) -> None:
    """What each pair of the paired comparisons (``rows``: their key columns, ``n paired`` and
    the :data:`DETECTS` columns) can detect."""
    detects = [{k: v for k, v in r.items() if k in list(r)[:keys] + ["n paired"]
                or k.startswith(DETECTS)} for r in rows if any(k.startswith(DETECTS) for k in r)]
    c = z_sum()
    doc.table(
        detects,
        "What each pair can detect",
        keys=keys,
        note="The smallest true difference of each headline number the pair's samples detect "
        "with 80% power at α = 0.05 (Miller 2024, arXiv 2411.00640; docs/numbers.md). "
        "discordance: a share of samples over the same samples in both runs (accuracy over "
        f"all samples, the valid rate): {c:.2f}·√(q / (n + {c:.2f}²)), q the share of paired "
        "samples on which the two differ (in being right, in being valid); bootstrap se: any "
        "other number (macro-F1; accuracy over valid replies where some are invalid): "
        f"{c:.2f} × the paired bootstrap's standard error; none: too few samples differ for a "
        "difference of any size.",
    )
