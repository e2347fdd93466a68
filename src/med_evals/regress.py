"""Regression gate: record a run as a baseline, then compare new runs with it.

What is gated is each study's **headline** (its spec in :mod:`med_evals.studies`: e.g. valid
rate, accuracy, macro-F1, sensitivity and specificity over valid predictions for the oncology
study; accuracy and macro-F1 over all samples and the valid rate for the others). Each number is
computed by :meth:`~med_evals.studies.Study.headline_values` — the function the logged metric
comes from — over the per-sample values of each condition, and judged on a 95% paired bootstrap
interval of new - old over the samples both runs scored: a regression when the interval lies
wholly below zero. Generation means (ROUGE-L, BERTScore) are printed for information.

A changed dataset revision, prompt, task version, task argument or scorer setting is reported
as "setup changed", never as a regression: the numbers are not comparable. A log whose run did
not finish (status other than ``success``) is refused: :func:`regress` lists it and the CLI
exits non-zero (``inspect eval`` itself exits 0 for a run that stopped with an error).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspect_ai.log import read_eval_log

from med_evals.logs import Run, expand_log_paths, load_runs
from med_evals.report.paired import bootstrap_difference
from med_evals.scorers.generation import mean_present
from med_evals.studies import NON_SETUP_ARGS, spec

FORMAT = 2
FLOAT_KEYS = ("rouge_l", "bertscore_f1")


def setup_of(run: Run) -> dict[str, Any]:
    """What must not change between baseline and new run for the numbers to be comparable."""
    p = run.provenance
    args = {k: v for k, v in p["task_args"].items() if k not in (*NON_SETUP_ARGS, "subset")}
    return {
        "dataset_revision": p.get("revision"),
        "data_checksum": p.get("data_checksum"),
        "prompt": p.get("prompt"),
        "task_version": p.get("task_version"),
        "task_args": args,
        "scorer_settings": p.get("scorer_settings"),
        "temperature": p.get("temperature"),
        "max_tokens": p.get("max_tokens"),
    }


def make_baseline(logs: Sequence[str | Path]) -> dict[str, Any]:
    runs, skipped = load_runs(logs)
    if not runs:
        raise ValueError("no usable log for a baseline: " + "; ".join(skipped))
    return {
        "format": FORMAT,
        "runs": [
            {
                "task": r.task,
                "model": r.model,
                "task_args": r.task_args,
                "log": Path(r.path).name,
                "setup": setup_of(r),
                "metrics": r.metrics,
                "samples": r.values,
            }
            for r in runs
        ],
        "skipped": skipped,
    }


@dataclass
class Row:
    task: str
    model: str
    metric: str
    old: float
    new: float
    test: str
    detail: str
    verdict: str

    @property
    def difference(self) -> float:
        return self.new - self.old


def _groups(samples: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for sid, v in samples.items():
        out[str(v.get("condition") or "")][sid] = v
    return out


def _verdict(lo: float, hi: float) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return "untested"
    return "REGRESSION" if hi < 0 else "improved" if lo > 0 else "ok"


def compare_run(base: dict[str, Any], run: Run, n_boot: int = 1000) -> list[Row]:
    """Rows for the headline metrics (gated) and generation means (info) of one run."""
    new_setup = setup_of(run)
    if base["setup"] != new_setup:
        changed = [k for k in base["setup"] if base["setup"][k] != new_setup.get(k)]
        return [
            Row(run.task, run.model, "(all)", math.nan, math.nan, "setup check",
                "changed: " + ", ".join(changed), "setup changed")
        ]
    study = spec(run.task)
    old_groups, new_groups = _groups(base["samples"]), _groups(run.values)
    rows: list[Row] = []
    for group in sorted(set(old_groups) & set(new_groups)):
        old, new = old_groups[group], new_groups[group]
        prefix = f"{group}/" if group and len(new_groups) > 1 else ""
        shared = sorted(set(old) & set(new))
        boot = bootstrap_difference(
            lambda vals: study.headline_values(vals, run.task_args),
            [new[i] for i in shared],
            [old[i] for i in shared],
            n_boot=n_boot,
        )
        old_all = study.headline_values(list(old.values()), run.task_args)
        new_all = study.headline_values(list(new.values()), run.task_args)
        for h in study.headline:
            b = boot[h.name]
            rows.append(
                Row(run.task, run.model, f"{prefix}{h.name}", old_all[h.name], new_all[h.name],
                    f"headline, paired bootstrap n={len(shared)}",
                    f"95% CI of diff {b['lo']:+.3f} to {b['hi']:+.3f}",
                    _verdict(b["lo"], b["hi"]))
            )
        for key in FLOAT_KEYS:
            o, n = mean_present(list(old.values()), key), mean_present(list(new.values()), key)
            if not (math.isnan(o) and math.isnan(n)):
                rows.append(Row(run.task, run.model, f"{prefix}{key}_mean", o, n,
                                "logged metric", "", "info"))
    return rows


def failed_logs(logs: Sequence[str | Path]) -> list[str]:
    """One line per log whose run did not finish (status not ``success``)."""
    out = []
    for path in expand_log_paths(logs):
        try:
            status = read_eval_log(path, header_only=True).status
        except Exception as ex:  # noqa: BLE001 - an unreadable log is reported, not fatal
            out.append(f"{path}: unreadable log ({ex})")
            continue
        if status != "success":
            out.append(f"{path}: run did not complete (status {status})")
    return out


def regress(
    baseline: dict[str, Any], logs: Sequence[str | Path], n_boot: int = 1000
) -> tuple[list[Row], list[str]]:
    """Rows for every headline metric of every new run matched to a baseline run (task, model,
    then task only), and notes (logs skipped, runs without a baseline)."""
    if baseline.get("format") != FORMAT:
        raise ValueError(
            f"baseline format {baseline.get('format')} is not {FORMAT}: record it again with "
            "`med-evals baseline`"
        )
    runs, skipped = load_runs(logs)
    notes = list(skipped)
    rows: list[Row] = []
    for run in runs:
        matches = [b for b in baseline["runs"] if b["task"] == run.task and b["model"] == run.model]
        matches = matches or [b for b in baseline["runs"] if b["task"] == run.task]
        if not matches:
            notes.append(f"{run.path}: no baseline run of task {run.task}")
            continue
        rows += compare_run(matches[0], run, n_boot)
    return rows, notes


def gated_metrics(rows: Sequence[Row]) -> dict[str, list[str]]:
    """task -> the headline metrics gated (for the CLI to say which)."""
    out: dict[str, list[str]] = {}
    for r in rows:
        if r.test.startswith("headline"):
            names = out.setdefault(r.task, [])
            name = r.metric.split("/")[-1]
            if name not in names:
                names.append(name)
    return out


def format_rows(rows: Sequence[Row]) -> str:
    """A table with every name in full (tasks, models and metrics are never cut short)."""
    cols = [
        ("task", [r.task for r in rows]),
        ("model", [r.model for r in rows]),
        ("metric", [r.metric for r in rows]),
    ]
    widths = [max([len(h), *(len(x) for x in xs)]) for h, xs in cols]
    header = "  ".join(h.ljust(w) for (h, _), w in zip(cols, widths, strict=True))
    header += f"  {'old':>8} {'new':>8} {'diff':>8}  verdict      test / detail"
    lines = [header, "-" * len(header)]
    for r in rows:
        old = "" if math.isnan(r.old) else f"{r.old:8.4f}"
        new = "" if math.isnan(r.new) else f"{r.new:8.4f}"
        diff = "" if math.isnan(r.old) or math.isnan(r.new) else f"{r.difference:+8.4f}"
        names = "  ".join(
            x.ljust(w) for x, w in zip((r.task, r.model, r.metric), widths, strict=True)
        )
        lines.append(
            f"{names}  {old:>8} {new:>8} {diff:>8}  {r.verdict:12} {r.test} {r.detail}".rstrip()
        )
    return "\n".join(lines)


def save_baseline(baseline: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(baseline, indent=1, sort_keys=True, default=str))


def read_baseline(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
