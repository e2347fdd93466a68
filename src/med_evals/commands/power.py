"""``med-evals power --baseline baseline.json --detect 0.05``: how many items a gate needs.

For each run and condition a baseline records, and each gated (headline) number: its value,
the samples it was recorded on, the smallest drop a gate on that many samples detects now, and
the items a gate needs to detect a drop of ``--detect`` with 80% power at alpha = 0.05
(:func:`med_evals.stats.standing.items_needed`; definitions in docs/numbers.md, "What a number can
say"). Then ``med-evals subset make TASK NAME --size N`` draws a subset of that size. Reads the
baseline only; runs nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from med_evals.commands.regress import read_baseline
from med_evals.outputs.exit_codes import USAGE, CommandError
from med_evals.stats.power import ALPHA, POWER, z_sum
from med_evals.stats.standing import items_needed
from med_evals.tasks import STUDIES, spec

#: bootstrap resamples for a macro-F1's standard error (the report's number)
N_BOOT = 200


def sizes(baseline: dict[str, Any], drop: float, n_boot: int = N_BOOT) -> list[dict[str, Any]]:
    """One row per baseline run, condition and headline number: ``task``, ``model``,
    ``condition``, ``metric`` (its display name), ``value``, ``n``, ``now`` (the drop a gate on
    ``n`` samples detects), ``needed`` (None: no gate detects ``drop``; ``why``), ``method``."""
    rows = []
    for run in baseline["runs"]:
        if run["task"] not in STUDIES:
            continue
        study = spec(run["task"])
        by_cond: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for sid in sorted(run["samples"]):
            v = run["samples"][sid]
            by_cond[str(v.get("condition") or "")].append(v)
        for cond in sorted(by_cond):
            found = items_needed(study, by_cond[cond], run.get("task_args"), drop, n_boot)
            for h in study.headline:
                rows.append({"task": run["task"], "model": run["model"], "condition": cond,
                             "metric": h.display, **found[h.name]})
    return rows


def _drop(x: float) -> str:
    if math.isnan(x):
        return "—"
    return "none" if math.isinf(x) else f"{x:.3f}"


def format_sizes(rows: Sequence[dict[str, Any]], drop: float, n_boot: int) -> str:
    """The table, then how each column was found and why a size is missing."""
    c = z_sum()
    head = ["task", "model", "condition", "metric", "baseline", "n", "detects now",
            f"items for {drop:g}"]
    table = [[r["task"], r["model"], r["condition"] or "—", r["metric"],
              "—" if math.isnan(r["value"]) else f"{r['value']:.3f}", str(r["n"]),
              _drop(r["now"]), "—" if r["needed"] is None else f"{r['needed']:,}"]
             for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    right = {4, 5, 6, 7}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(x.rjust(w) if i in right else x.ljust(w)
                         for i, (x, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    out = [
        f"Items a gate needs to detect a drop of {drop:g} ({100 * drop:g} points) with "
        f"{POWER:.0%} power at α = {ALPHA} (two-sided; c = {c:.4f}), from each baseline run "
        "(docs/numbers.md):",
        "",
        line(head),
        "-" * len(line(head)),
        *(line(t) for t in table),
        "",
        "- detects now: the smallest drop a gate on the baseline's n samples detects.",
        "- accuracy over all samples, valid rate (and accuracy over valid replies where every "
        "baseline reply is valid): the new run's errors taken as independent of the baseline's "
        "(ours; runs that err on the same samples detect smaller drops): "
        "n = c²·(q − d²)/d², q = 2p(1 − p) + d(2p − 1).",
        f"- macro-F1 (and accuracy over valid replies where some are invalid): c·√2·se, se the "
        f"baseline's bootstrap standard error ({n_boot} resamples, seed 0), taken to shrink as "
        "1/√n (ours): n·(detects now / d)². A baseline at a macro-F1 of 1 (or 0) on few "
        "samples has a bootstrap se near 0 and its size is too small: read its accuracy's.",
    ]
    whys = sorted({" ".join(x for x in (f"{r['task']} / {r['model']}", r["condition"],
                                        f"{r['metric']}: {r['why']}") if x)
                   for r in rows if r["needed"] is None and r["why"]})
    out += [f"- no size: {w}" for w in whys]
    return "\n".join(out)


def power_command(baseline: str, detect: float, n_boot: int = N_BOOT) -> int:
    """``med-evals power``: print the items a gate needs to detect a drop of ``detect``, per
    run, condition and gated metric of the ``baseline`` file."""
    from med_evals.outputs.text import terminal

    if not 0 < detect < 1:
        raise CommandError(f"--detect {detect}: a drop between 0 and 1 (0.05 is 5 points)",
                           USAGE)
    if n_boot < 100:
        raise CommandError(f"--n-boot {n_boot}: at least 100 resamples", USAGE)
    rows = sizes(read_baseline(baseline), detect, n_boot)
    print(terminal(format_sizes(rows, detect, n_boot)))
    return 0
