"""``med-evals diff LOG_A LOG_B``: where two runs of one study differ, from their logs.

For each condition both runs have (``--condition`` for one): McNemar's exact test on paired
correctness with its discordant counts, the paired bootstrap difference A - B of each headline
number (:meth:`Study.headline_values`, as the report's paired comparisons compute it), the
smallest difference of each the pair detects at 80% power and each side against the best
trivial row on the paired samples (:mod:`med_evals.stats.standing`), the samples right only in A,
right only in B and wrong in both (at most ``--limit`` of each), and for a study with abstaining
labels each side's abstention numbers on the paired samples. The
samples are paired, judged and listed as the report's "where two runs differ" lists
(:mod:`med_evals.commands.report.differences`). ``--json`` prints one JSON object with the same
numbers.
Text from a log goes through :func:`med_evals.outputs.text.terminal`.
"""

from __future__ import annotations

import difflib
import json
import math
import shlex
from collections.abc import Sequence
from typing import Any

from med_evals.logs.files import LogPathError, log_name
from med_evals.logs.labels import Group, check_comparable, run_labels
from med_evals.logs.pairs import (
    LIMIT,
    VIEWER,
    Differences,
    Reply,
    differences,
    pairs,
    sample_rows,
    shown,
    viewer_folder,
)
from med_evals.logs.runs import Run, load_selected, select_logs
from med_evals.outputs.exit_codes import USAGE, CommandError
from med_evals.outputs.text import terminal
from med_evals.scorers.abstention import DISPLAY, RATES, abstention_of
from med_evals.scorers.score_table import resampling_rows
from med_evals.stats.intervals import N_BOOT, bootstrap_difference
from med_evals.stats.standing import Entry, detectable, detectable_text, standing, trivial_blocks


def _one_run(path: str, which: str) -> Run:
    """The run of the log at ``path`` (a log file, or a folder holding one run's log)."""
    try:
        loaded = load_selected(select_logs([path], strict=True))
    except LogPathError as ex:
        raise CommandError(f"{which}: {ex}", USAGE) from None
    runs, skipped = loaded.runs, loaded.skipped
    if not runs:
        why = skipped[0] if skipped else f"{path}: no log"
        raise CommandError(f"{which}: {why}", USAGE)
    if len(runs) > 1:
        raise CommandError(
            f"{which} {path}: {len(runs)} runs in this folder; give one log file", USAGE)
    return runs[0]


def _groups(a: Run, b: Run) -> tuple[Group, Group]:
    """One report group per run, labelled as the report labels them (and by the log file where
    both labels are the same: two runs of one model and setup)."""
    labels = run_labels([a, b])
    la, lb = labels[id(a)], labels[id(b)]
    if la == lb:
        la, lb = f"{la} ({log_name(a.path)})", f"{lb} ({log_name(b.path)})"
    return (Group(la, a.study, [a], dict(a.values)), Group(lb, b.study, [b], dict(b.values)))


def _no_condition(condition: str, study: Any, shared: Sequence[str], ga: Group,
                  gb: Group) -> str:
    """Why ``--condition`` names no condition both runs have, in one line: the runs record no
    condition at all (a MedREQAL run of one prompt variant), the condition is one run's only,
    or a misspelling (the closest condition named, never the one given)."""
    named = [c for c in shared if c]
    if not named:
        return (f"--condition {condition}: the runs record no condition (all their samples are "
                f"one group, compared whole); leave --condition out")
    has = [g.label for g in (ga, gb) if condition in g.conditions()]
    if has:
        return (f"--condition {condition}: only {has[0]} has it (both have: "
                f"{', '.join(named)})")
    close = [c for c in difflib.get_close_matches(condition, [*named, *study.conditions], n=3)
             if c != condition]
    hint = f"; did you mean {close[0]}?" if close else ""
    return (f"--condition {condition}: not a condition both runs have{hint} (both have: "
            f"{', '.join(named)})")


def _number(x: float) -> float | None:
    return None if x is None or math.isnan(x) else x


def diff_runs(
    log_a: str, log_b: str, condition: str | None = None, limit: int = LIMIT,
    n_boot: int = N_BOOT,
) -> dict[str, Any]:
    """The comparison ``med-evals diff`` prints, as one JSON-ready object; a
    :class:`CommandError` (exit 2) for two studies, different label sets, no shared samples or a
    condition the runs do not share."""
    a, b = _one_run(log_a, "LOG_A"), _one_run(log_b, "LOG_B")
    if a.task != b.task:
        raise CommandError(
            f"LOG_A is a {a.task} run and LOG_B a {b.task} run: diff compares two runs of one "
            "study", USAGE)
    study = a.study
    if study.labels(a.task_args) != study.labels(b.task_args):
        raise CommandError(
            f"the runs use different label sets ({study.label_set_name(a.task_args)} and "
            f"{study.label_set_name(b.task_args)}): their labels cannot be compared", USAGE)
    ga, gb = _groups(a, b)
    found = pairs(study, [ga, gb])
    if not found:
        raise CommandError(
            f"no shared samples: the runs have no sample with the same id and target in a "
            f"condition both have ({log_name(a.path)}: {len(a.values)} samples, "
            f"{log_name(b.path)}: {len(b.values)})", USAGE)
    shared = [p.condition for p in found]
    if condition is not None:
        if not study.conditions:
            raise CommandError(f"--condition {condition}: {study.task} has no conditions", USAGE)
        if condition not in shared:
            raise CommandError(_no_condition(condition, study, shared, ga, gb), USAGE)
        found = [p for p in found if p.condition == condition]
    root = viewer_folder([a, b])
    comparisons = []
    for pair in found:
        d = differences(pair)
        comparisons.append(_comparison(study, d, limit, n_boot, root))
    return {
        "study": study.task,
        "a": {"label": ga.label, "log": a.path},
        "b": {"label": gb.label, "log": b.path},
        "n_boot": n_boot,
        "limit": limit,
        "viewer": ({"url": VIEWER, "command": f"inspect view --log-dir {shlex.quote(root)}"}
                   if root else None),
        "warnings": check_comparable([a, b], allow_mixed=True),
        "comparisons": comparisons,
    }


def _detectable(study: Any, d: Differences, boot: Any) -> dict[str, Any]:
    """:func:`med_evals.stats.standing.detectable` as JSON: ``difference`` null where no difference
    of any size is detectable (``detectable`` false) or it is undefined; ``text`` in words."""
    pair = d.pair
    found = detectable(study, pair.va, pair.vb, boot)
    out = {}
    for h in study.headline:
        x = found[h.name]
        diff = x["difference"]
        out[h.name] = {
            "display": h.display,
            "difference": None if math.isnan(diff) or math.isinf(diff) else diff,
            "detectable": not math.isinf(diff) if not math.isnan(diff) else None,
            **{k: (_number(v) if isinstance(v, float) else v)
               for k, v in x.items() if k != "difference"},
            "text": detectable_text(x),
        }
    return out


def _trivial(study: Any, d: Differences, n_boot: int) -> dict[str, Any]:
    """The trivial rows on the pair's samples and each side's standing against the best
    (:func:`med_evals.stats.trivial.beats_trivial`, ``n_boot`` resamples, seed 0)."""
    pair = d.pair
    sides = [Entry(g.label, dict(zip(pair.keys, vals, strict=True)), g.task_args)
             for g, vals in ((pair.a, pair.va), (pair.b, pair.vb))]
    # the same samples and targets: one block; as many random draws as bootstrap resamples
    [block] = trivial_blocks(study, pair.condition, sides, draws=n_boot)

    def plain(x: Any) -> Any:
        return _number(x) if isinstance(x, float) else x

    primary = study.headline[0]
    return {
        "n": block.n,
        "primary": {"name": primary.name, "display": primary.display},
        "rows": [{"name": r.name, "kind": r.kind, "prediction": r.prediction,
                  "numbers": {k: _number(v) for k, v in r.numbers.items()}} for r in block.rows],
        "best": block.best.name if block.best else None,
        **{side: (None if (b := standing(study, e, block, n_boot)) is None
                  else {k: plain(v) for k, v in b.items()})
           for side, e in zip(("a", "b"), sides, strict=True)},
    }


def _comparison(study: Any, d: Differences, limit: int, n_boot: int,
                root: str | None) -> dict[str, Any]:
    pair = d.pair
    headline = detects = None
    if d.test is not None:  # as the report: no valid prediction, no test and no bootstrap
        boot = bootstrap_difference(pair.a.headline, resampling_rows(pair.va),
                                    resampling_rows(pair.vb), n_boot=n_boot)
        headline = {
            h.name: {"display": h.display, **{k: _number(boot[h.name][k])
                                              for k in ("a", "b", "difference", "lo", "hi")}}
            for h in study.headline
        }
        detects = _detectable(study, d, boot)

    def listed(ids: Sequence[str]) -> dict[str, Any]:
        rows = sample_rows(study, pair, ids[:limit], root)
        return {"count": len(ids), "samples": [r.as_json() for r in rows]}

    return {
        "condition": pair.condition,
        "n_paired": len(pair.keys),
        "mcnemar": None if d.test is None else {
            "p_value": d.test["p_value"], "a_only": d.test["a_only"], "b_only": d.test["b_only"],
        },
        "headline": headline,
        "abstention": _abstention(study, pair),
        "detectable": detects,
        "trivial": _trivial(study, d, n_boot),
        "right_only_in_a": listed(d.a_only),
        "right_only_in_b": listed(d.b_only),
        "wrong_in_both": {**listed(d.both_wrong), "labels_differ": d.labels_differ},
    }


def _abstention(study: Any, pair: Any) -> dict[str, Any] | None:
    """Each side's abstention numbers (:func:`~med_evals.scorers.abstention.abstention_of`) on
    the pair's samples; None for a study without abstaining labels."""
    abstaining = study.abstaining_of(study.label_set_name(pair.a.task_args))
    if not abstaining:
        return None
    labels = study.labels(pair.a.task_args)
    sides = {side: abstention_of(values, labels, abstaining)
             for side, values in (("a", pair.va), ("b", pair.vb))}
    return {"abstaining": list(abstaining),
            **{side: {k: _number(n[k]) for k in RATES} for side, n in sides.items()}}


def _abstention_line(abstention: dict[str, Any]) -> str:
    """``  abstention (NOT ENOUGH INFORMATION), A / B: coverage 0.500 / 0.750, ...``"""
    numbers = ", ".join(
        f"{DISPLAY[k]} {_fmt(abstention['a'][k], False)} / {_fmt(abstention['b'][k], False)}"
        for k in RATES)
    return f"  abstention ({_t(', '.join(abstention['abstaining']))}), A / B: {numbers}"


# --- text ---------------------------------------------------------------------------------


def _t(value: Any) -> str:
    return terminal(str(value), one_line=True)


def _fmt(x: float | None, sign: bool = True) -> str:
    return "—" if x is None else (f"{x:+.3f}" if sign else f"{x:.3f}")


def _rows_text(title: str, listed: dict[str, Any], limit: int, extra: str = "") -> list[str]:
    n = listed["count"]
    lines = [f"  {title}: {n}{extra}" + (f" ({shown(n, limit)})" if n else "")]
    for r in listed["samples"]:
        lines.append(f"    {_t(r['sample'])}  gold {_t(r['gold'])}  A {_t(r['label_a'])}  "
                     f"B {_t(r['label_b'])}")
        if r["input"]:
            lines.append(f"      input: {_t(r['input'])}")
        for side in ("a", "b"):
            if r[f"reply_{side}"] is not None:
                reply = Reply(r[f"reply_{side}"], r[f"reply_{side}_chars"], r[f"epoch_{side}"],
                              r[f"epochs_{side}"])
                lines.append(f"      reply {side.upper()}: {_t(reply.short())}")
            if r[f"view_{side}"]:
                lines.append(f"      view {side.upper()}: {_t(r[f'view_{side}'])}")
    return lines


def _trivial_text(t: dict[str, Any], n_boot: int) -> list[str]:
    """The trivial rows in the primary number, then each side against the best of them."""
    if t["best"] is None:
        return []
    primary, display = t["primary"]["name"], t["primary"]["display"]
    rows = ", ".join(f"{_t(r['name'])} {_fmt(r['numbers'][primary], False)}" for r in t["rows"])
    lines = [f"  trivial rows on these {t['n']} samples ({display}): {rows}"]
    for side in ("a", "b"):
        b = t[side]
        if b is None:
            continue
        verdict = ("undefined" if b["beats"] is None else
                   "better beyond sampling noise" if b["beats"] else
                   "NOT better beyond sampling noise")
        interval = (f" ({_fmt(b['lo'])} to {_fmt(b['hi'])})"
                    if b["lo"] is not None and b["hi"] is not None else "")
        lines.append(f"  {side.upper()} − best trivial ({_t(b['trivial'])}): {display} "
                     f"{_fmt(b['difference'])}{interval}: {verdict} (95% paired bootstrap, "
                     f"{n_boot} resamples)")
    return lines


def format_text(result: dict[str, Any]) -> str:
    """The comparison as terminal text (every text from a log made safe)."""
    lines = [
        f"{_t(result['study'])}: A = {_t(result['a']['label'])} ({_t(result['a']['log'])})",
        f"{' ' * len(_t(result['study']))}  B = {_t(result['b']['label'])} "
        f"({_t(result['b']['log'])})",
    ]
    for w in result["warnings"]:
        lines.append(f"warning: {_t(w)}")
    limit = result["limit"]
    for c in result["comparisons"]:
        cond = f"condition {_t(c['condition'])}: " if c["condition"] else ""
        lines += ["", f"{cond}{c['n_paired']} paired samples (same id and target)"]
        test = c["mcnemar"]
        if test is None:
            lines.append("  no valid prediction in either run: no test")
        else:
            lines.append(
                f"  McNemar exact p = {test['p_value']:.4g}; discordant: right only in A "
                f"{test['a_only']}, right only in B {test['b_only']}")
            lines.append(f"  A - B, 95% paired bootstrap ({result['n_boot']} resamples, seed 0) "
                         "of the headline function:")
            for h in c["headline"].values():
                interval = (f" ({_fmt(h['lo'])} to {_fmt(h['hi'])})"
                            if h["lo"] is not None and h["hi"] is not None else "")
                lines.append(f"    {h['display']}: {_fmt(h['difference'])}{interval}  "
                             f"[A {_fmt(h['a'], False)}, B {_fmt(h['b'], False)}]")
            lines.append("  smallest difference this pair detects (80% power, α = 0.05):")
            lines += [f"    {x['display']}: {x['text']}" for x in c["detectable"].values()]
        lines += _trivial_text(c["trivial"], result["n_boot"])
        if c.get("abstention"):
            lines.append(_abstention_line(c["abstention"]))
        lines += _rows_text("right only in A", c["right_only_in_a"], limit)
        lines += _rows_text("right only in B", c["right_only_in_b"], limit)
        both = c["wrong_in_both"]
        lines += _rows_text("wrong in both", both, limit,
                            f" (labels differ in {both['labels_differ']})")
    if result["viewer"]:
        lines += ["", f"viewer links need {_t(result['viewer']['command'])} running "
                  f"({result['viewer']['url']})"]
    return "\n".join(lines)


# --- the command --------------------------------------------------------------------------


def diff_command(log_a: str, log_b: str, condition: str | None = None, limit: int = LIMIT,
                 n_boot: int = N_BOOT, as_json: bool = False) -> int:
    """``med-evals diff``: print where the runs of ``log_a`` and ``log_b`` differ
    (:func:`diff_runs`), as text or as one JSON object."""
    if limit < 0:
        raise CommandError(f"--limit {limit}: 0 or more samples", USAGE)
    if n_boot < 1:
        raise CommandError(f"--n-boot {n_boot}: at least 1 resample", USAGE)
    result = diff_runs(log_a, log_b, condition, limit, n_boot)
    if as_json:
        # ASCII only: every control or bidi character of a log is a \\u escape on the terminal
        print(json.dumps(result, ensure_ascii=True, indent=1))
    else:
        print(format_text(result))
    return 0

