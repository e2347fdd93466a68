"""The report's "Judges" section: for every LLM-judge scorer in the runs, each grader's numbers
and the jury's, the graders' agreement (kappa as the scorer logs it, Krippendorff's alpha), ties,
judge failures, and the graders' models, tokens and cost.

Which runs: a study run with a judge scorer beside its own (MedREQAL or HealthFC with ``-T
judge=true``: ``conclusion_agreement``, whose per-sample values are the run's
:attr:`~med_evals.logs.runs.Run.others`), and a run of a task that only judges
(:data:`JUDGE_TASKS`: ``counterfactual_judges``, ``plausibility_judge`` or
``detectability_judge``), which is no study: :func:`judge_runs` reads those logs.

One function per number: every number is the judge's own logged metric
(:data:`med_evals.scorers.judges.JUDGE_METRICS`) computed over the run's per-sample judge
values, named as its log names it (``agrees``, ``grader_2/agrees``, ``jury/kappa``,
``jury/alpha``); a count stays an integer. Tokens and cost: each grader role's, by
:func:`med_evals.logs.usage.role_cost`, the function the "Tokens and cost" section prices with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from med_evals.commands.report.document import Document
from med_evals.logs.files import read_header
from med_evals.logs.runs import LogSelection, LogUnreadable, Run, load_run, task_name
from med_evals.logs.usage import (
    Prices,
    RoleUsage,
    cost_text,
    read_role_usages,
    role_cost,
    token_count,
)
from med_evals.scorers.classification import metric_values
from med_evals.scorers.judges import JUDGE_METRICS, JURY, grader_number, jury_roles

#: the tasks that only judge (no study spec): their logs are read for this section
JUDGE_TASKS = ("counterfactual_judges",)

ABOUT = (
    "Each LLM judge in the runs: its numbers over each run's per-sample grades, computed by the "
    "judge's own metric (the numbers its log holds, named as the log names them: a number of "
    "one grader under '<role>/', the graders' agreement under 'jury/'). The jury's verdict is "
    "the grade most graders gave (a rating: their median); a tie for most is 'ties', left out "
    "of the shares as judge failures are. jury/kappa: Cohen's kappa for two graders, Fleiss' "
    "for three or more, over the items every grader graded (jury/kappa_items); jury/alpha: "
    "Krippendorff's alpha (Inspect's krippendorff_alpha; nominal for verdicts and picks, "
    "ordinal for ratings), over the items two or more graders graded. Judge failures: items "
    "a grader gave no readable grade for after its attempts, or its provider failed on. "
    "Definitions: docs/numbers.md, 'Judges and juries'."
)
#: what a judge scorer judges, for the section's headings
WHAT = {
    "conclusion_agreement": "agreement of each reply with the review's conclusion",
    "plausibility_judge": "ratings (1-5) of counterfactual and original abstracts",
    "detectability_judge": "which abstract of a pair was edited",
}


@dataclass(frozen=True)
class Judged:
    """One judge scorer of one run: its per-sample values (sample id -> value)."""

    run: Run
    label: str
    scorer: str
    values: Mapping[str, Mapping[str, Any]]

    def numbers(self) -> dict[str, float]:
        """Every number the judge's metric logs, over these values (counts as integers)."""
        return metric_values([JUDGE_METRICS[self.scorer]()], self.values, counts=True)

    def roles(self) -> list[str]:
        """The jury's grader roles in order; empty for one grader."""
        return jury_roles(self.values.values())


def judge_runs(selection: LogSelection) -> tuple[list[Run], list[str]]:
    """The runs of the finished logs of :data:`JUDGE_TASKS` in ``selection`` (their judge
    scorer's values), and the logs among them that could not be read (path, why)."""
    runs, failed = [], []
    for path in selection.finished:
        task = (selection.headers.get(path) or ("", ""))[0]
        if task not in JUDGE_TASKS:
            continue
        try:
            log = read_header(path)
        except Exception as ex:  # noqa: BLE001 - named in the report, not fatal
            failed.append(f"{path}: unreadable log ({' '.join(str(ex).split())[:300]})")
            continue
        names = [s.name for s in (log.results.scores if log.results else [])]
        scorer = next((n for n in names if n in JUDGE_METRICS), None)
        if scorer is None or task_name(log) not in JUDGE_TASKS:
            continue
        try:  # its samples a chunk at a time, within the read limit
            run = load_run(path, scorer)
        except LogUnreadable as ex:
            failed.append(str(ex))
            continue
        run.mtime = selection.mtimes.get(path)
        runs.append(run)
    return runs, failed


def judge_label(run: Run) -> str:
    """A judging task's run: ``counterfactual_judges, judge=rate``."""
    judge = run.task_args.get("judge")
    return f"{run.task}, judge={judge}" if judge else run.task


def judged(runs: Sequence[Run], labels: Mapping[int, str],
           judging: Sequence[Run] = ()) -> list[Judged]:
    """Every judge scorer of the study runs (in ``runs``' order) and of the judging tasks'
    runs."""
    out = [Judged(r, labels[id(r)], scorer, values)
           for r in runs for scorer, values in r.others.items() if scorer in JUDGE_METRICS]
    for r in judging:
        scorer = next(s for s in r.provenance.get("scorers") or [] if s in JUDGE_METRICS)
        out.append(Judged(r, judge_label(r), scorer, r.values))
    return out


def graders_of(run: Run) -> dict[str, str]:
    """Each grader role of a run and its model (``grader`` -> ``openai/gpt-4o``; its settings,
    which the provenance table shows, left out)."""
    roles = run.provenance.get("model_roles") or {}
    return {role: model.split(" {", 1)[0] for role, model in roles.items()
            if grader_number(role) is not None}


def number_rows(j: Judged, numbers: Mapping[str, float]) -> list[dict[str, Any]]:
    """The jury's numbers (or the one grader's), then each grader's, as the log names them
    without the ``<role>/`` prefix; the agreement numbers (``jury/``) are in their own table."""
    roles = j.roles()
    own = {k: v for k, v in numbers.items() if "/" not in k}
    models = graders_of(j.run)
    base = {"run": j.label}
    if not roles:
        role = next(iter(models), "grader")
        return [{**base, "by": role, "model": models.get(role), **own}]
    rows = [{**base, "by": f"jury ({len(roles)} graders)", "model": None, **own}]
    for role in roles:
        prefix = f"{role}/"
        mine = {k[len(prefix):]: v for k, v in numbers.items() if k.startswith(prefix)}
        rows.append({**base, "by": role, "model": models.get(role),
                     **{k: mine.get(k) for k in own}})
    return rows


def agreement_row(j: Judged, numbers: Mapping[str, float]) -> dict[str, Any] | None:
    """The graders' agreement: the ``jury/`` numbers, ties and the jury's judge failures; None
    for one grader (no agreement to measure)."""
    n = numbers.get(f"{JURY}/graders")
    if not n:
        return None
    kind = "Cohen's" if n == 2 else "Fleiss'"
    row: dict[str, Any] = {"run": j.label, "kappa": f"{kind}, {int(n)} graders"}
    row.update({k: v for k, v in numbers.items() if k.startswith(f"{JURY}/")
                and k != f"{JURY}/graders"})
    row["ties"] = numbers.get("ties")
    row["judge_failures"] = numbers.get("judge_failures")
    return row


def grader_cost_rows(
    j: Judged, prices: Prices | None = None
) -> list[dict[str, Any]]:
    """Each grader role of the run: its model, tokens and cost (:func:`role_cost`)."""
    roles: list[RoleUsage] = (list(j.run.roles) if j.run.roles is not None
                              else read_role_usages(j.run.path))
    rows = []
    for role in roles:
        if grader_number(role.role) is None:
            continue
        cost = role_cost(role, prices)
        rows.append({
            "run": j.label,
            "log": Path(j.run.path).name,
            "role": role.role,
            "model": role.model,
            "input tokens": token_count(role.usage, "input_tokens"),
            "output tokens": token_count(role.usage, "output_tokens"),
            "cost": cost_text(cost),
            "priced by": cost.source,
        })
    return rows


def section(doc: Document, judges: Sequence[Judged], prices: Prices | None = None) -> None:
    """The "Judges" section: per judge scorer, its numbers, the graders' agreement, and the
    graders' models and costs. Nothing when no run has a judge."""
    if not judges:
        return
    doc.h2("Judges")
    doc.p(ABOUT, "note")
    for scorer in dict.fromkeys(j.scorer for j in judges):
        mine = [j for j in judges if j.scorer == scorer]
        numbers = [j.numbers() for j in mine]
        what = WHAT.get(scorer, "")
        doc.h3(f"{scorer}: {what}" if what else scorer)
        doc.table([r for j, n in zip(mine, numbers, strict=True) for r in number_rows(j, n)],
                  f"{scorer}: the jury's numbers and each grader's, as the log names them",
                  keys=2)
        agreement = [row for j, n in zip(mine, numbers, strict=True)
                     if (row := agreement_row(j, n)) is not None]
        doc.table(agreement, f"{scorer}: agreement between the graders", keys=1,
                  empty="one grader per run: no agreement between graders to measure",
                  note="kappa: Cohen's for two graders, Fleiss' for more; alpha: "
                  "Krippendorff's.")
        doc.table([r for j in mine for r in grader_cost_rows(j, prices)],
                  f"{scorer}: each grader's model, tokens and cost", keys=3)
