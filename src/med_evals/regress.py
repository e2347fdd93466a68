"""Regression gate: record a run as a baseline, then compare new runs with it.

A difference counts as a regression only when it is beyond sampling noise:

- accuracy and valid rate: McNemar's exact test on the samples both runs scored (paired on
  sample ids), or a two-proportion z-test when the runs share no samples;
- macro-F1 and per-sample scores (ROUGE-L, BERTScore): a 95% paired bootstrap interval of the
  difference, a regression when it lies wholly below zero;
- other logged metrics are printed for information.

A changed dataset revision, prompt, task version or scorer setting is reported as such ("setup
changed"), never as a regression: the numbers are not comparable.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportions_ztest

from med_evals.logs import Run, load_runs
from med_evals.report.paired import (
    bootstrap_macro_f1_difference,
    bootstrap_mean_difference,
    mcnemar_exact,
)
from med_evals.scorers.effect import LABEL_SETS
from med_evals.scorers.labels import TRIAL_OUTCOME

FORMAT = 1
VERDICT_LABELS = ("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION")
FLOAT_KEYS = ("rouge_l", "bertscore_f1")


def task_labels(task: str, task_args: dict[str, Any]) -> tuple[str, ...]:
    if task == "oncology_rct":
        return TRIAL_OUTCOME.labels
    if task == "medevidence":
        return LABEL_SETS[task_args.get("labels", "five")].labels
    return VERDICT_LABELS


def setup_of(run: Run) -> dict[str, Any]:
    """What must not change between baseline and new run for the numbers to be comparable."""
    p = run.provenance
    args = {k: v for k, v in p["task_args"].items() if k not in ("data_dir", "subset")}
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


def _samples(run: Run) -> dict[str, dict[str, Any]]:
    out = {}
    for sid, v in run.values.items():
        rec = {k: v.get(k) for k in ("prediction", "target", "valid", "condition")}
        rec.update({k: v[k] for k in FLOAT_KEYS if v.get(k) is not None})
        for scorer_values in run.others.values():
            extra = scorer_values.get(sid) or {}
            rec.update({k: extra[k] for k in FLOAT_KEYS if extra.get(k) is not None})
        out[sid] = rec
    return out


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
                "log": Path(r.path).name,
                "setup": setup_of(r),
                "metrics": r.metrics,
                "samples": _samples(r),
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


def _acc_rows(key, old, new, shared, alpha, metric, correct) -> Row:
    task, model, group = key
    o = [correct(old[i]) for i in old]
    n = [correct(new[i]) for i in new]
    old_v, new_v = float(np.mean(o)), float(np.mean(n))
    if shared:
        t = mcnemar_exact([correct(old[i]) for i in shared], [correct(new[i]) for i in shared])
        p, test = t["p_value"], f"McNemar exact, n={len(shared)} paired"
    else:
        _, p = proportions_ztest([sum(n), sum(o)], [len(n), len(o)])
        test = "two-proportion z (unpaired)"
    verdict = "ok"
    if p < alpha:
        verdict = "REGRESSION" if new_v < old_v else "improved"
    return Row(task, model, f"{group}{metric}", old_v, new_v, test, f"p={p:.3g}", verdict)


def _boot_row(key, metric, boot: dict[str, float], old_v: float, new_v: float) -> Row:
    """A row judged on a bootstrap interval of new - old: a regression when it is all below 0."""
    task, model, group = key
    lo, hi = boot["lo"], boot["hi"]
    verdict = "REGRESSION" if hi < 0 else "improved" if lo > 0 else "ok"
    return Row(
        task,
        model,
        f"{group}{metric}",
        old_v,
        new_v,
        f"paired bootstrap, n={boot['n']}",
        f"95% CI of diff {lo:+.3f} to {hi:+.3f}",
        verdict,
    )


def compare_run(base: dict[str, Any], run: Run, alpha: float, n_boot: int) -> list[Row]:
    rows: list[Row] = []
    if base["setup"] != setup_of(run):
        changed = [k for k in base["setup"] if base["setup"][k] != setup_of(run).get(k)]
        return [
            Row(
                run.task,
                run.model,
                "(all)",
                math.nan,
                math.nan,
                "setup check",
                "changed: " + ", ".join(changed),
                "setup changed",
            )
        ]
    labels = task_labels(run.task, run.provenance["task_args"])
    new_samples = _samples(run)
    by_group: dict[str, tuple[dict, dict]] = defaultdict(lambda: ({}, {}))
    for sid, v in base["samples"].items():
        by_group[str(v.get("condition") or "")][0][sid] = v
    for sid, v in new_samples.items():
        by_group[str(v.get("condition") or "")][1][sid] = v
    for group, (old, new) in sorted(by_group.items()):
        if not old or not new:
            continue
        key = (run.task, run.model, f"{group}/" if group and len(by_group) > 1 else "")
        shared = sorted(set(old) & set(new))
        rows.append(
            _acc_rows(
                key,
                old,
                new,
                shared,
                alpha,
                "accuracy_all",
                lambda v: int(v["prediction"] == v["target"]),
            )
        )
        rows.append(
            _acc_rows(key, old, new, shared, alpha, "valid_rate", lambda v: int(bool(v["valid"])))
        )
        if shared:
            b = bootstrap_macro_f1_difference(
                [old[i]["target"] for i in shared],
                [new[i]["prediction"] for i in shared],
                [old[i]["prediction"] for i in shared],
                labels,
                n_boot=n_boot,
            )
            rows.append(_boot_row(key, "macro_f1_all", b, old_v=b["b"], new_v=b["a"]))
            for fk in FLOAT_KEYS:
                both = [i for i in shared if fk in old[i] and fk in new[i]]
                if both:
                    olds = [old[i][fk] for i in both]
                    news = [new[i][fk] for i in both]
                    m = bootstrap_mean_difference(news, olds, n_boot=n_boot)
                    old_mean, new_mean = float(np.mean(olds)), float(np.mean(news))
                    rows.append(_boot_row(key, fk, m, old_v=old_mean, new_v=new_mean))
    tested = {r.metric.split("/")[-1] for r in rows}
    for name, old_value in sorted(base["metrics"].items()):
        if name in run.metrics and name.split("/")[-1] not in tested:
            rows.append(
                Row(
                    run.task,
                    run.model,
                    name,
                    old_value,
                    run.metrics[name],
                    "logged metric",
                    "",
                    "info",
                )
            )
    return rows


def regress(
    baseline: dict[str, Any], logs: Sequence[str | Path], alpha: float = 0.05, n_boot: int = 2000
) -> tuple[list[Row], list[str]]:
    """Rows for every metric of every new run matched to a baseline run (task and model)."""
    if baseline.get("format") != FORMAT:
        raise ValueError(f"baseline format {baseline.get('format')} is not {FORMAT}")
    runs, skipped = load_runs(logs)
    notes = list(skipped)
    rows: list[Row] = []
    for run in runs:
        matches = [b for b in baseline["runs"] if b["task"] == run.task and b["model"] == run.model]
        if not matches:
            matches = [b for b in baseline["runs"] if b["task"] == run.task]
        if not matches:
            notes.append(f"{run.path}: no baseline run of task {run.task}")
            continue
        rows += compare_run(matches[0], run, alpha, n_boot)
    return rows, notes


def format_rows(rows: Sequence[Row]) -> str:
    header = (
        f"{'task':14} {'model':24} {'metric':44} {'old':>8} {'new':>8} {'diff':>8}  "
        "verdict      test / detail"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        old = "" if math.isnan(r.old) else f"{r.old:8.4f}"
        new = "" if math.isnan(r.new) else f"{r.new:8.4f}"
        diff = "" if math.isnan(r.old) or math.isnan(r.new) else f"{r.difference:+8.4f}"
        lines.append(
            f"{r.task:14} {r.model[:24]:24} {r.metric[:44]:44} {old:>8} {new:>8} "
            f"{diff:>8}  {r.verdict:12} {r.test} {r.detail}".rstrip()
        )
    return "\n".join(lines)


def save_baseline(baseline: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(baseline, indent=1, sort_keys=True, default=str))


def read_baseline(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
