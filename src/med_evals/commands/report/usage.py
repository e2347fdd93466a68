"""The report's "Tokens and cost" section: per study, each run's tokens and cost per role, its
cost and its cost per answer, each figure computed by :mod:`med_evals.logs.usage` (the functions
``med-evals compare`` and ``med-evals baseline``/``regress`` print with)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inspect_ai.model import ModelCost

from med_evals.commands.report.document import Document
from med_evals.logs.runs import Run
from med_evals.logs.usage import (
    CACHE_FIELDS,
    REPLAYED,
    TOKEN_FIELDS,
    RunUsage,
    answers_name,
    cost_text,
    paid_line,
    token_count,
)
from med_evals.tasks import STUDIES

#: how the figures are made, printed under the section's title
ABOUT = (
    "From each run's log (Inspect's token counts per model and per role): the model under test "
    "('model') and each grader role. Input tokens are those charged at the full rate (cached "
    "input apart, where the provider reports it); output tokens include reasoning tokens. Cost: "
    "the --prices file's prices for the model, else the cost Inspect put in the log, else "
    "Inspect's own price data; a replayed model's cost is the recording's, not ours "
    f"({REPLAYED}); a run's cost is unknown (—) when one of its roles' is. Cost per answer: the "
    "run's cost over its correct answers (the oncology study: its valid replies), every epoch's "
    "calls counted. The figures are what the run's samples used (a run resumed after a kill: "
    "every sample once, those its first attempt made included); what a resumed eval paid over "
    "all its attempts is said below its table. Where a provider reported usage on some calls "
    "only, the sums are of those ('usage reported on 9 of 20 calls') and the cost a lower bound "
    "(≥). Definitions: docs/numbers.md, 'Tokens and cost'."
)


def usage_rows(
    runs: Sequence[Run], labels: Mapping[int, str], usages: Sequence[RunUsage]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per run: its cost and cost per answer; one row per run and role: its tokens and
    cost). Token columns the providers did not report for any run (cached input) are left out."""
    cache = [f for f in CACHE_FIELDS
             if any(token_count(r.usage, f) is not None for u in usages for r in u.roles)]
    fields = ["input_tokens", *cache, "output_tokens", "reasoning_tokens"]
    partial = any(r.partial for u in usages for r in u.roles)
    per_run, per_role = [], []
    for run, u in zip(runs, usages, strict=True):
        label, log = labels[id(run)], Path(run.path).name
        per_run.append({
            "run": label,
            "log": log,
            answers_name(u.answer): u.answers,
            "cost": cost_text(u.total),
            f"cost per {u.answer}": cost_text(u.per_answer),
            "priced by": u.total.source,
        })
        for role, cost in zip(u.roles, u.costs, strict=True):
            per_role.append({
                "run": label,
                "role": role.role,
                "model": role.model,
                **{TOKEN_FIELDS[f]: token_count(role.usage, f) for f in fields},
                **({"usage reported": (f"{role.reported} of {role.calls} calls"
                                       if role.calls is not None else None)} if partial else {}),
                "cost": cost_text(cost),
            })
    return per_run, per_role


def usage_section(
    doc: Document, runs: Sequence[Run], labels: Mapping[int, str],
    prices: Mapping[str, ModelCost] | None = None,
) -> None:
    """Per study (in the registry's order), its runs' tokens and cost, sorted by label."""
    by_study = [(s, sorted((r for r in runs if r.task == s.task),
                           key=lambda r: (labels[id(r)], Path(r.path).name)))
                for s in STUDIES.values()]
    by_study = [(s, rs) for s, rs in by_study if rs]
    if not by_study:
        return
    doc.h2("Tokens and cost")
    doc.p(ABOUT, "note")
    for study, study_runs in by_study:
        usages = [r.usage(prices) for r in study_runs]
        per_run, per_role = usage_rows(study_runs, labels, usages)
        doc.h3(study.title)
        doc.table(per_run, f"{study.title}: each run's cost and cost per "
                  f"{usages[0].answer}", keys=2)
        doc.table(per_role, f"{study.title}: tokens and cost per role", keys=2)
        for run, used in zip(study_runs, usages, strict=True):
            paid = run.paid_usage(prices)
            if paid is not None:
                doc.p(f"{labels[id(run)]}: {paid_line(paid, used)}", "warn")
