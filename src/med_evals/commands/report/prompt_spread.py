"""Prompt spread (MedREQAL, HealthFC): how much each run's headline numbers move between the
paper's three prompt templates, and whether the order of the runs moves with them.

The MedREQAL paper prompted each model family with its own template (its Table 7), so its
comparison of models is also one of templates. A run of several templates (``-T prompt=all``,
or a list) asks every question under each, the template the sample's condition; for such runs
this section shows each run's headline numbers per template (:meth:`Study.headline_values` over
the template's samples, the logged ``<template>/<number>``), their spread (max - min over the
templates, **ours**), and the order of the runs by the primary number under each template,
saying whether it changes (**ours**: the order of the point estimates, ties kept together; a
tie under one template and an order under another is a change; whether two runs can be told
apart at all is a question for the paired comparisons). Definitions: docs/numbers.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from med_evals.commands.report.document import Document
from med_evals.logs.labels import Group, ordered_conditions
from med_evals.study.spec import Study

SPREAD = "spread (max − min)"


def template_runs(study: Study, groups: Sequence[Group]) -> list[Group]:
    """The runs that asked their questions under two templates or more."""
    return [g for g in groups if len(set(g.conditions()) & set(study.conditions)) >= 2]


def templates_of(study: Study, groups: Sequence[Group]) -> list[str]:
    """The templates every one of ``groups`` ran, in the paper's order."""
    shared = set.intersection(*(set(g.conditions()) for g in groups)) if groups else set()
    return ordered_conditions(study, shared & set(study.conditions))


def numbers(study: Study, group: Group, template: str) -> dict[str, float]:
    """The group's headline numbers over its samples of ``template``."""
    values = group.conditions().get(template)
    return group.headline(list(values.values())) if values else {}


def spread(values: Sequence[float]) -> float:
    """max - min of the defined values (NaN when fewer than two are defined)."""
    defined = [v for v in values if not math.isnan(v)]
    return max(defined) - min(defined) if len(defined) >= 2 else math.nan


def spread_rows(study: Study, groups: Sequence[Group]) -> list[dict[str, Any]]:
    """One row per run and headline number: its value under each template it ran and the
    spread."""
    rows = []
    for g in template_runs(study, groups):
        templates = ordered_conditions(study, set(g.conditions()) & set(study.conditions))
        per = {t: numbers(study, g, t) for t in templates}
        for h in study.headline:
            row: dict[str, Any] = {"run": g.label, "number": h.display}
            row.update({t: per[t][h.name] for t in templates})
            row[SPREAD] = spread([per[t][h.name] for t in templates])
            rows.append(row)
    return rows


def order(values: Mapping[str, float]) -> list[list[str]]:
    """Run labels from the highest value to the lowest, tied ones together (by label), an
    undefined value last."""
    defined = sorted({v for v in values.values() if not math.isnan(v)}, reverse=True)
    tiers = [sorted(k for k, v in values.items() if v == x) for x in defined]
    undefined = sorted(k for k, v in values.items() if math.isnan(v))
    return tiers + ([undefined] if undefined else [])


def rankings(study: Study, groups: Sequence[Group]) -> dict[str, list[list[str]]]:
    """template -> :func:`order` of the runs that ran every template, by the primary number."""
    runs = template_runs(study, groups)
    primary = study.headline[0].name
    return {t: order({g.label: numbers(study, g, t)[primary] for g in runs})
            for t in templates_of(study, runs)}


def ranking_changes(ranked: Mapping[str, list[list[str]]]) -> bool:
    """Whether the order of the runs differs between two of the templates."""
    return len({tuple(map(tuple, tiers)) for tiers in ranked.values()}) > 1


def ranks(tiers: list[list[str]], values: Mapping[str, float]) -> dict[str, str]:
    """Each run's rank from :func:`order`'s tiers: 1 for the highest, a tie marked ``=`` (two
    runs tied first are ``1=`` and the next is 3); an undefined value ``—``."""
    out, rank = {}, 1
    for tier in tiers:
        for label in tier:
            out[label] = ("—" if math.isnan(values[label])
                          else f"{rank}{'=' if len(tier) > 1 else ''}")
        rank += len(tier)
    return out


def ranking_rows(study: Study, groups: Sequence[Group]) -> list[dict[str, Any]]:
    """One row per template: the rank of each run that ran every template, by the primary
    number; none when fewer than two runs did."""
    runs = template_runs(study, groups)
    ranked = rankings(study, groups)
    if len(runs) < 2 or len(ranked) < 2:
        return []
    primary = study.headline[0].name
    rows = []
    for t, tiers in ranked.items():
        values = {g.label: numbers(study, g, t)[primary] for g in runs}
        rows.append({"template": t, **ranks(tiers, values)})
    return rows


def ranking_line(study: Study, groups: Sequence[Group]) -> str:
    """``Ranking changes with the template: yes`` (or ``no``), or why there is no ranking."""
    runs = template_runs(study, groups)
    ranked = rankings(study, groups)
    if len(runs) < 2 or len(ranked) < 2:
        return (f"Ranking by {study.headline[0].display} per template: needs two runs of the "
                f"same templates ({len(runs)} run(s) of several templates here).")
    return f"Ranking changes with the template: {'yes' if ranking_changes(ranked) else 'no'}"


def spread_section(doc: Document, study: Study, groups: Sequence[Group]) -> None:
    """The spread table, the ranking table and whether the ranking changes; nothing when no
    run ran several templates."""
    rows = spread_rows(study, groups)
    if not rows:
        return
    doc.table(
        rows,
        "Prompt spread: each run's headline numbers under each prompt template",
        keys=2,
        note=f"The templates of the paper's Table 7 (-T prompt=all); {SPREAD}: ours.",
    )
    h = study.headline[0]
    doc.table(
        ranking_rows(study, groups),
        f"Rank of each run by {h.display} under each template",
        note="1: the highest; = a tie; the order of the point estimates (ours): whether two "
        "runs can be told apart is in the paired comparisons.",
    )
    doc.p(ranking_line(study, groups), "note")
