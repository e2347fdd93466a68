"""The abstention table of a study section: how often each run declined to commit (NOT ENOUGH
INFORMATION; MedEvidence's uncertain classes), and how right it was when it did commit.

Each number is :func:`med_evals.scorers.abstention.abstention_of` over one run's values of one
condition: the function of the logged ``abstention`` metric (a ``-T metrics=full`` log holds the
same numbers). Shown beside the headline table, for studies that name abstaining labels
(:attr:`med_evals.study.spec.Study.abstaining`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from med_evals.commands.report.document import Document
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.scorers.abstention import DISPLAY, RATES, abstention_of
from med_evals.study.spec import Study

#: the metric this table shows (left out of the section's "other metrics" table)
METRIC = "abstention"


def abstaining(study: Study, group: Group) -> tuple[str, ...]:
    """The labels that are an abstention in the group's label set (empty: none)."""
    return study.abstaining_of(study.label_set_name(group.task_args))


def abstention_rows(study: Study, groups: Sequence[Group]) -> list[dict[str, Any]]:
    """One row per run label and condition: n, each rate and the committed and abstained
    counts."""
    rows = []
    present = {c for g in groups for c in g.conditions()}
    for cond in ordered_conditions(study, present):
        for g in groups:
            values = g.conditions().get(cond)
            labels = abstaining(study, g)
            if not values or not labels:
                continue
            numbers = abstention_of(list(values.values()), study.labels(g.task_args), labels)
            row: dict[str, Any] = {"run": g.label}
            if cond:
                row["condition"] = cond
            row["n"] = len(values)
            row.update({DISPLAY[k]: numbers[k] for k in RATES})
            row["committed"] = numbers["n_committed"]
            row["abstained"] = numbers["n_abstained"]
            rows.append(row)
    return rows


def abstention_table(doc: Document, study: Study, groups: Sequence[Group]) -> None:
    """The table, or nothing for a study without abstaining labels."""
    rows = abstention_rows(study, groups)
    if not rows:
        return
    by_set = {study.label_set_name(g.task_args): ", ".join(abstaining(study, g)) for g in groups}
    named = "; ".join(f"{labels} ({name} labels)" if len(by_set) > 1 else labels
                      for name, labels in by_set.items() if labels)
    doc.table(
        rows,
        f"Abstention (abstaining: {named})",
        keys=2 if any("condition" in r for r in rows) else 1,
        note="Coverage = committed replies (a label that is not an abstention) over all "
        "samples; selective accuracy over the committed replies; abstention recall over the "
        "samples whose gold label is an abstention; over-abstention over the samples whose gold "
        "label is committed; a reply without a label counts as neither committed nor "
        "abstaining (docs/numbers.md, Abstention).",
    )
