"""``med-evals power --baseline baseline.json --detect 0.05``: how many items a gate needs.

For each run and condition a baseline records, and each gated (headline) number: its value,
the samples it was recorded on, the smallest drop a gate on that many samples detects now, and
the items a gate needs to detect a drop of ``--detect`` with 80% power at alpha = 0.05
(:func:`med_evals.stats.standing.items_needed`; definitions in docs/numbers.md, "What a number can
say"); with ``--margin`` instead, the margin a gate on that many samples rules out now and the
items an equivalence gate (``med-evals regress --margin``) needs to show a run as good as its
baseline no worse by more than the margin (one-sided at 0.05). A size larger than the study's
dataset (its published count) is flagged: no subset of it can be that large. Then
``med-evals subset make TASK NAME --size N`` draws a subset of that size. Reads the baseline
only; runs nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from med_evals.commands.regress import read_baseline
from med_evals.outputs.exit_codes import USAGE, CommandError
from med_evals.stats import power
from med_evals.stats.standing import SE_BOOT, items_needed
from med_evals.tasks import STUDIES, spec

#: bootstrap resamples for a macro-F1's standard error (the report's number; the gate's too,
#: where it sizes from the baseline alone)
N_BOOT = SE_BOOT


def dataset_items(task: str) -> int | None:
    """The items of ``task``'s dataset: its published row count (the manifest's
    ``expected_rows`` of the study's first dataset); None where the package states none."""
    from med_evals.data.datasets import DatasetError, expected_counts

    study = spec(task)
    if not study.datasets:
        return None
    try:
        return expected_counts(study.datasets[0])[0]
    except (DatasetError, OSError):
        return None


def sizes(
    baseline: dict[str, Any], drop: float, n_boot: int = N_BOOT, margin: bool = False
) -> list[dict[str, Any]]:
    """One row per baseline run, condition and headline number: ``task``, ``model``,
    ``condition``, ``metric`` (its display name), ``value``, ``n``, ``now`` (the drop a gate on
    ``n`` samples detects; with ``margin``: the margin it rules out), ``needed`` (None: no gate
    detects ``drop``; ``why``), ``method``, ``dataset`` (the dataset's items, None: unknown),
    and ``all`` (what a gate on all of them does, where ``needed`` is more)."""
    rows = []
    for run in baseline["runs"]:
        if run["task"] not in STUDIES:
            continue
        study = spec(run["task"])
        total = dataset_items(run["task"])
        by_cond: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for sid in sorted(run["samples"]):
            v = run["samples"][sid]
            by_cond[str(v.get("condition") or "")].append(v)
        for cond in sorted(by_cond):
            found = items_needed(study, by_cond[cond], run.get("task_args"), drop, n_boot,
                                 margin=margin)
            for h in study.headline:
                row = {"task": run["task"], "model": run["model"], "condition": cond,
                       "metric": h.display, **found[h.name], "dataset": total, "all": None}
                # a dataset the baseline outgrows is not the published one: nothing to flag
                if total is not None and row["needed"] is not None and total >= row["n"] and (
                        row["needed"] > total):
                    row["all"] = _on_all(row, total, margin)
                rows.append(row)
    return rows


def _on_all(row: dict[str, Any], total: int, margin: bool) -> float:
    """What a gate on all ``total`` items of the dataset detects (rules out): the row's own
    method on ``total`` samples."""
    if row["method"] == "independent errors":
        alpha = power.one_sided() if margin else power.ALPHA
        return power.gate_drop(total, row["value"], alpha=alpha)
    return float(row["now"] * math.sqrt(row["n"] / total))


def _drop(x: float) -> str:
    if math.isnan(x):
        return "—"
    return "none" if math.isinf(x) else f"{x:.3f}"


def _who(row: dict[str, Any]) -> str:
    return f"{row['task']} / {row['model']}" + (f" {row['condition']}" if row["condition"]
                                                 else "")


def _items(row: dict[str, Any]) -> str:
    if row["needed"] is None:
        return "—"
    if row["all"] is not None:
        return f"{row['needed']:,} > {row['dataset']:,}"
    return f"{row['needed']:,}"


def format_sizes(
    rows: Sequence[dict[str, Any]], drop: float, n_boot: int, margin: bool = False
) -> str:
    """The table, then how each column was found and why a size is missing."""
    alpha = power.one_sided() if margin else power.ALPHA
    c = power.z_sum(alpha)
    now = "rules out now" if margin else "detects now"
    head = ["task", "model", "condition", "metric", "baseline", "n", now, f"items for {drop:g}"]
    table = [[r["task"], r["model"], r["condition"] or "—", r["metric"],
              "—" if math.isnan(r["value"]) else f"{r['value']:.3f}", str(r["n"]),
              _drop(r["now"]), _items(r)]
             for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    right = {4, 5, 6, 7}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(x.rjust(w) if i in right else x.ljust(w)
                         for i, (x, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    if margin:
        title = (f"Items a gate needs to rule out a drop larger than {drop:g} ({100 * drop:g} "
                 f"points; `med-evals regress --margin {drop:g}`) with {power.POWER:.0%} power "
                 f"at α = {power.ALPHA} (one-sided; c = {c:.4f}) for a new run as good as each "
                 "baseline run (docs/numbers.md):")
        first = ("- rules out now: the largest drop a gate on the baseline's n samples rules "
                 "out (the smallest margin it shows), for a new run as good as the baseline.")
    else:
        title = (f"Items a gate needs to detect a drop of {drop:g} ({100 * drop:g} points) with "
                 f"{power.POWER:.0%} power at α = {power.ALPHA} (two-sided; c = {c:.4f}), from "
                 "each baseline run (docs/numbers.md):")
        first = "- detects now: the smallest drop a gate on the baseline's n samples detects."
    out = [
        title,
        "",
        line(head),
        "-" * len(line(head)),
        *(line(t) for t in table),
        "",
        first,
        "- accuracy over all samples, valid rate (and accuracy over valid replies where every "
        "baseline reply is valid): the new run's errors taken as independent of the baseline's "
        "(ours; runs that err on the same samples detect smaller drops): "
        "n = c²·(q − d²)/d², q = 2p(1 − p) + d(2p − 1).",
        f"- macro-F1 (and accuracy over valid replies where some are invalid): c·√2·se, se the "
        f"baseline's bootstrap standard error ({n_boot} resamples, seed 0), taken to shrink as "
        "1/√n (ours): n·(" + ("rules out" if margin else "detects") + " now / d)². A baseline "
        "at a macro-F1 of 1 (or 0) on few samples has a bootstrap se near 0 and its size is "
        "too small: read its accuracy's.",
    ]
    whys = sorted({" ".join(x for x in (f"{r['task']} / {r['model']}", r["condition"],
                                        f"{r['metric']}: {r['why']}") if x)
                   for r in rows if r["needed"] is None and r["why"]})
    out += [f"- no size: {w}" for w in whys]
    verb = "rules out drops larger than" if margin else "detects drops of at least"
    out += [
        f"- no subset is that large: {_who(r)} {r['metric']}: {r['needed']:,} items, but the "
        f"{r['task']} dataset has {r['dataset']:,} (its published count): no subset of it can "
        f"be that large; a gate on all {r['dataset']:,} {verb} {_drop(r['all'])}"
        for r in rows if r["all"] is not None
    ]
    return "\n".join(out)


def power_command(baseline: str, detect: float | None = None, n_boot: int = N_BOOT,
                  margin: float | None = None) -> int:
    """``med-evals power``: print the items a gate needs to detect a drop of ``detect`` (or, with
    ``margin``, to rule out a drop larger than the margin: ``regress --margin``), per run,
    condition and gated metric of the ``baseline`` file."""
    from med_evals.outputs.text import terminal

    equivalence = margin is not None
    drop = margin if equivalence else detect
    flag = "--margin" if equivalence else "--detect"
    if drop is None:
        raise CommandError("give --detect DROP or --margin DROP", USAGE)
    if not 0 < drop < 1:
        raise CommandError(f"{flag} {drop}: a drop between 0 and 1 (0.05 is 5 points)", USAGE)
    if n_boot < 100:
        raise CommandError(f"--n-boot {n_boot}: at least 100 resamples", USAGE)
    rows = sizes(read_baseline(baseline), drop, n_boot, equivalence)
    print(terminal(format_sizes(rows, drop, n_boot, equivalence)))
    return 0
