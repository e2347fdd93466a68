"""``med-evals flip-rate``: how often a model's answer on an oncology trial flips between two
conditions (``title_abstract`` vs ``counterfactual``, ...), from the oncology study's logs.

One row per model and pair of conditions: the flip rate over the trials with a valid reply in
both conditions (the study's), with its Wald and Wilson 95% intervals, and ours over every paired
trial with a reply (INVALID its own outcome): :func:`med_evals.scorers.oncology_rct.flip_rate`.
Of each eval's logs the finished one is read (after a kill and ``inspect eval-retry``), as
``report`` and ``regress`` read them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from med_evals.commands.console import emit_table, print_lines
from med_evals.outputs.exit_codes import CommandError


def flip_rate_command(logs: Sequence[str | Path], pairs: Sequence[str] | None = None,
                      out: str | None = None) -> int:
    """Print (and with ``out`` write as CSV) the flip rates of every model in ``logs`` between
    each pair ``a:b`` of ``pairs`` (default: title_abstract:counterfactual and
    counterfactual:counterfactual_doi). A bad pair, an ``out`` that cannot be written, a path
    that does not exist, or no log holding both conditions of a pair: :class:`CommandError`
    (exit 2)."""
    from med_evals.logs.files import LogPathError
    from med_evals.logs.runs import score_values, select_logs
    from med_evals.outputs.files import check_file
    from med_evals.scorers.oncology_rct import DEFAULT_FLIP_PAIRS, flip_rate, parse_pair
    from med_evals.tasks.oncology_conditions import unknown_condition

    try:
        parsed = [parse_pair(p) for p in (pairs or DEFAULT_FLIP_PAIRS)]
    except ValueError as ex:
        raise CommandError(f"--pair: {ex}") from None
    for a, b in parsed:
        for name in (a, b):
            if (problem := unknown_condition(name)) is not None:
                raise CommandError(f"--pair {a}:{b}: {problem}")
    if out:
        check_file(out, "--out")  # before any log is read
    try:
        selection = select_logs(logs, strict=True)
    except LogPathError as ex:
        raise CommandError(str(ex)) from None
    # one log per eval (after a kill and eval-retry, the finished one), as report and regress
    print_lines("skipped", [*selection.unreadable, *(u[3] for u in selection.unfinished),
                            *selection.superseded])
    by_model: dict[str, list] = {}
    for path in selection.finished:
        try:
            model, values = score_values(path, "trial_outcome")
        except ValueError as ex:
            print_lines("skipped", [str(ex)])
            continue
        by_model.setdefault(model, []).extend(values)
    rows = []
    for model, values in by_model.items():
        present = {v["condition"] for v in values}
        for a, b in parsed:
            if a in present and b in present:
                fr = flip_rate(values, a, b)
                rows.append(
                    {
                        "model": model,
                        "pair": f"{a} vs {b}",
                        "flip_rate": round(fr["p"], 4),
                        "wald_95": f"{fr['wald'][0]:.3f}-{fr['wald'][1]:.3f}",
                        "wilson_95": f"{fr['wilson'][0]:.3f}-{fr['wilson'][1]:.3f}",
                        "flips": fr["count"],
                        "n_both_valid": fr["n"],
                        "n_excluded": fr["n_excluded"],
                        # ours too: every paired trial with a reply, INVALID its own outcome
                        "flip_rate_all_paired": round(fr["all_paired"]["p"], 4),
                        "wilson_95_all_paired": "{:.3f}-{:.3f}".format(*fr["all_paired"]["wilson"]),
                        "n_all_paired": fr["all_paired"]["n"],
                        "n_error_excluded": fr["n_error_excluded"],
                    }
                )
    if not rows:
        raise CommandError("no log holds both conditions of any requested pair")
    emit_table(pd.DataFrame(rows), out)
    return 0
