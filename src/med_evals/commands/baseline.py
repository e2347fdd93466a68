"""``med-evals baseline``: record runs' metrics and per-sample results in a baseline JSON that
``med-evals regress`` gates later runs against (the baseline's contents:
:func:`med_evals.commands.regress.make_baseline`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from med_evals.commands.console import price_notes, print_lines
from med_evals.outputs.text import terminal


def baseline_command(logs: Sequence[str | Path], output: str, prices: str | None = None) -> int:
    """Write the baseline of ``logs`` to ``output`` (checked before any log is read), the
    tokens priced with the ``prices`` file; a partial run is written with a warning."""
    import sys

    from med_evals.commands.regress import check_output, make_baseline, save_baseline
    from med_evals.logs.usage import read_prices

    check_output(output)  # before reading any log
    priced = read_prices(prices)
    baseline = make_baseline(logs, priced)
    save_baseline(baseline, output)
    print_lines("skipped", baseline["skipped"])
    for r in baseline["runs"]:
        if r.get("partial"):
            print(terminal(f"warning: {r['task']} / {r['model']} is a partial run: "
                           f"{r['partial']}; the gate compares later runs on these samples "
                           "only", one_line=True), file=sys.stderr)
    price_notes(priced, [role["model"] for r in baseline["runs"]
                         for role in (r.get("usage") or {}).get("roles") or []])
    runs = ", ".join(
        f"{r['task']} / {r['model']} ({len(r['samples'])} samples)" for r in baseline["runs"]
    )
    print(terminal(f"wrote {output}: {runs}", one_line=True))
    return 0
