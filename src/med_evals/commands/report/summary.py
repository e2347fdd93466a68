"""The report's first table: a summary across studies, one row per study, condition and run
with its primary headline number (the study's first :class:`~med_evals.study.spec.Headline`, the one
its paper leads with), and its interval where the report shows the headline numbers' intervals
(``interval``: the function that computes them, handed in).

The rows are :func:`med_evals.commands.report.tables.headline_rows`, the headline table's own rows,
so
every number is :meth:`Study.headline_values` over the same samples: the summary shows what
each study's headline table shows, never a copy computed another way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from med_evals.commands.report.document import Document, fmt_interval
from med_evals.commands.report.tables import HeadlineRow, headline_rows
from med_evals.logs.labels import Group
from med_evals.tasks import STUDIES

INTERVAL = "95% interval"


#: the 95% interval of a headline row's number (the row, the number's name), or None
IntervalOf = Callable[[HeadlineRow, str], "tuple[float, float] | None"]


def summary_rows(
    groups: Mapping[str, Sequence[Group]], interval: IntervalOf | None = None
) -> list[dict[str, Any]]:
    """One row per study (the registry's order), condition and run label; with ``interval``
    (the headline intervals' function, where the report shows them), a column of each primary
    number's interval."""
    rows: list[dict[str, Any]] = []
    for study in STUDIES.values():
        if study.task not in groups:
            continue
        primary = study.headline[0]
        for r in headline_rows(study, groups[study.task]):
            bounds = interval(r, primary.name) if interval else None
            rows.append({
                "study": study.title,
                "condition": r.condition,
                "run": r.label,
                "n": r.n,
                "number": f"{primary.display}, {primary.over}",
                "value": r.values.get(primary.name),
                INTERVAL: fmt_interval(bounds, 3) if bounds else None,
            })
    drop = {k for k in ("condition", INTERVAL) if not any(r[k] for r in rows)}
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def section(
    doc: Document, groups: Mapping[str, Sequence[Group]], interval: IntervalOf | None = None
) -> None:
    """The summary's heading and table (nothing without a study run)."""
    rows = summary_rows(groups, interval)
    if not rows:
        return
    doc.h2("Summary across studies")
    doc.table(rows, "Each study's primary headline number per run (and condition)",
              keys=3 if "condition" in rows[0] else 2,
              note="As each study's headline table below shows it"
              + ("; the interval is that table's own." if INTERVAL in rows[0] else "."))
