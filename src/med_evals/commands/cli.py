"""``med-evals``: a thin command line over functions the tests call directly."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from med_evals.outputs.text import terminal
from med_evals.tasks import STUDIES


def _flip_rate(args: argparse.Namespace) -> int:
    from med_evals.logs.files import LogPathError
    from med_evals.logs.runs import score_values, select_logs
    from med_evals.outputs.exit_codes import CommandError
    from med_evals.outputs.files import check_file
    from med_evals.scorers.oncology_rct import DEFAULT_FLIP_PAIRS, flip_rate, parse_pair
    from med_evals.tasks.oncology_conditions import unknown_condition

    try:
        pairs = [parse_pair(p) for p in (args.pair or DEFAULT_FLIP_PAIRS)]
    except ValueError as ex:
        raise CommandError(f"--pair: {ex}") from None
    for a, b in pairs:
        for name in (a, b):
            if (problem := unknown_condition(name)) is not None:
                raise CommandError(f"--pair {a}:{b}: {problem}")
    if args.out:
        check_file(args.out, "--out")  # before any log is read
    try:
        selection = select_logs(args.logs, strict=True)
    except LogPathError as ex:
        raise CommandError(str(ex)) from None
    # one log per eval (after a kill and eval-retry, the finished one), as report and regress
    for line in [*selection.unreadable, *(u[3] for u in selection.unfinished),
                 *selection.superseded]:
        print(f"skipped: {terminal(line, one_line=True)}", file=sys.stderr)
    by_model: dict[str, list] = {}
    for path in selection.finished:
        try:
            model, values = score_values(path, "trial_outcome")
        except ValueError as ex:
            print(f"skipped: {terminal(str(ex), one_line=True)}", file=sys.stderr)
            continue
        by_model.setdefault(model, []).extend(values)
    rows = []
    for model, values in by_model.items():
        present = {v["condition"] for v in values}
        for a, b in pairs:
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
    _emit(pd.DataFrame(rows), args.out)
    return 0


def _score_recorded(args: argparse.Namespace) -> int:
    from med_evals.commands.report.oncology_rct import recorded_table
    from med_evals.commands.score_recorded import read_recorded, score_recorded
    from med_evals.outputs.files import check_file

    if args.out:
        check_file(args.out, "--out")  # before any work
    trials = None
    if args.with_trials:
        from med_evals.tasks.oncology_rct import load_trials

        trials, _ = load_trials(args.data_dir)
    replies = read_recorded(Path(args.table), trials)
    _emit(recorded_table(score_recorded(replies)), args.out)
    return 0


def _recorded_to_replay(args: argparse.Namespace) -> int:
    from med_evals.commands.recorded_to_replay import cli

    return cli(args)


def _export_counterfactuals(args: argparse.Namespace) -> int:
    from med_evals.commands.export_counterfactuals import export_counterfactuals
    from med_evals.logs.files import LogPathError
    from med_evals.outputs.exit_codes import USAGE, CommandError
    from med_evals.outputs.files import check_file

    check_file(args.out, "--out")  # before any log is read
    try:
        summary = export_counterfactuals(args.logs, args.out)
    except LogPathError as ex:  # a location that cannot be listed (s3://...: unreachable)
        raise CommandError(str(ex), USAGE) from None
    skipped = summary.pop("skipped")
    for line in skipped:
        print(f"skipped: {terminal(line, one_line=True)}", file=sys.stderr)
    print(", ".join(f"{k} {v}" for k, v in summary.items()))
    if not summary["rows"]:
        why = f" ({len(skipped)} skipped, listed above)" if skipped else ""
        raise CommandError(f"no accepted rewrite in the logs{why}; nothing written", USAGE)
    print(f"wrote {args.out}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from med_evals.commands.report import ReportError, build_report
    from med_evals.logs.files import LogPathError
    from med_evals.logs.usage import read_prices
    from med_evals.outputs.exit_codes import USAGE, CommandError

    prices = read_prices(args.prices)  # before any log is read
    try:
        result = build_report(
            args.logs, args.out, allow_mixed=args.allow_mixed, reference=args.reference,
            prices=prices,
        )
    except (ReportError, LogPathError) as ex:  # LogPathError: an s3://... it cannot list
        raise CommandError(str(ex), USAGE) from None
    for line in result.skipped:
        print(f"skipped: {terminal(line, one_line=True)}", file=sys.stderr)
    _price_notes(prices, result.models)
    for line in result.warnings:
        print(f"warning: {terminal(line, one_line=True)}", file=sys.stderr)
    for line in result.notes:
        print(f"note: {terminal(line, one_line=True)}", file=sys.stderr)
    print(terminal(f"wrote {result.markdown}, {result.html}, {len(result.figures)} figures and "
                   f"{len(result.tables)} tables as CSV and LaTeX"))
    if result.not_shown:
        from med_evals.commands.report.build import not_shown_line
        from med_evals.outputs.exit_codes import FAILED

        print(f"med-evals report: error: {not_shown_line(result.shown, result.not_shown)}: "
              "listed above as skipped", file=sys.stderr)
        return FAILED
    return 0


def _baseline(args: argparse.Namespace) -> int:
    from med_evals.commands.regress import check_output, make_baseline, save_baseline
    from med_evals.logs.usage import read_prices

    check_output(args.output)  # before reading any log
    prices = read_prices(args.prices)
    baseline = make_baseline(args.logs, prices)
    save_baseline(baseline, args.output)
    for line in baseline["skipped"]:
        print(f"skipped: {terminal(line, one_line=True)}", file=sys.stderr)
    for r in baseline["runs"]:
        if r.get("partial"):
            print(terminal(f"warning: {r['task']} / {r['model']} is a partial run: "
                           f"{r['partial']}; the gate compares later runs on these samples "
                           "only", one_line=True), file=sys.stderr)
    _price_notes(prices, [role["model"] for r in baseline["runs"]
                          for role in (r.get("usage") or {}).get("roles") or []])
    runs = ", ".join(
        f"{r['task']} / {r['model']} ({len(r['samples'])} samples)" for r in baseline["runs"]
    )
    print(terminal(f"wrote {args.output}: {runs}", one_line=True))
    return 0


def _regress(args: argparse.Namespace) -> int:
    from med_evals.commands.regress import (
        decide,
        detect_lines,
        format_rows,
        gated_metrics,
        read_baseline,
        regress,
    )
    from med_evals.logs.usage import read_prices
    from med_evals.outputs.exit_codes import CommandError

    if args.n_boot < 100:
        raise CommandError(f"--n-boot {args.n_boot}: at least 100 resamples")
    if args.margin is not None and not 0 < args.margin < 1:
        raise CommandError(f"--margin {args.margin}: a drop between 0 and 1 (0.02 is 2 points)")
    prices, usage, models = read_prices(args.prices), list[str](), list[str]()
    rows, notes = regress(read_baseline(args.baseline), args.logs, n_boot=args.n_boot,
                          all_metrics=args.all_metrics, prices=prices, usage=usage,
                          models=models, margin=args.margin)
    _price_notes(prices, models)
    for line in notes:
        print(f"note: {terminal(line, one_line=True)}", file=sys.stderr)
    if rows:
        print(terminal(format_rows(rows)))
    for task, names in gated_metrics(rows).items():
        print(f"gated for {task}: {', '.join(names)} (headline metrics, paired bootstrap)")
    detects = detect_lines(rows)
    if detects:
        print("what each gate can detect (80% power, α = 0.05, on the samples compared, at "
              "their observed differences; where too few differ, from the baseline alone, "
              "as `med-evals power` sizes a gate; docs/numbers.md):")
        print("\n".join(terminal(f"  {line}", one_line=True) for line in detects))
    if usage:
        print("tokens and cost, baseline -> new (information, never gated):")
        print("\n".join(terminal(f"  {line}", one_line=True) for line in usage))
    decision = decide(rows, allow_untested=args.allow_untested, allow_absent=args.allow_absent,
                      margin=args.margin)
    print("\n" + "\n".join(terminal(line, one_line=True) for line in decision.lines))
    return decision.code


def _price_notes(prices: dict, models: list[str]) -> None:
    """One ``warning:`` line per ``--prices`` entry that names no model of the runs read (a
    typo: the closest model named), once each, before the command's output."""
    from med_evals.logs.usage import unmatched_prices

    for line in unmatched_prices(prices, models):
        print(f"warning: {terminal(line, one_line=True)}", file=sys.stderr)


def _studies(args: argparse.Namespace) -> int:
    """Each study's conditions, headline numbers and metric sets, from the registry."""
    import json

    from med_evals.outputs.exit_codes import CommandError
    from med_evals.study.fingerprint import catalogue

    names = args.tasks or list(STUDIES)
    unknown = [n for n in names if n not in STUDIES]
    if unknown:
        raise CommandError(f"{unknown[0]}: not a study (studies: {', '.join(STUDIES)})")
    if args.fingerprints:
        from med_evals.study.fingerprint import fingerprint

        changed = 0
        for name in names:
            study, now = STUDIES[name], fingerprint(STUDIES[name])
            changed += now != study.fingerprint_recorded
            print(f"{name:14} version {study.version:8} fingerprint {now}"
                  + ("" if now == study.fingerprint_recorded
                     else f"  (recorded: {study.fingerprint_recorded or 'none'})"))
        return 1 if changed else 0
    found = [catalogue(STUDIES[n]) for n in names]
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    for c in found:
        print(f"{c['task']}: {c['title']}, version {c['version']}")
        if c["conditions"]:
            print(f"  conditions: {', '.join(c['conditions'])}")
        for h in c["headline"]:
            whose = "paper" if h["source"] == "paper" else f"ours: {h.get('why') or 'ours'}"
            print(f"  headline {h['name']}: {h['display']} over {h['over']} ({whose})")
        for name, s in c["label sets"].items():
            print(f"  label set {name}: {', '.join(s['labels'])}")
            print(f"    -T metrics=headline logs: {', '.join(s['headline metrics'])}")
            print(f"    -T metrics=full logs:     {', '.join(s['full metrics'])}")
    return 0


def _subset_make(args: argparse.Namespace) -> int:
    from med_evals.data.subsets import (
        draw_stratified,
        stored_subset_dir,
        subset_file,
        user_subset_dir,
        write_subset,
    )
    from med_evals.outputs.exit_codes import CommandError
    from med_evals.outputs.files import check_folder
    from med_evals.tasks import spec

    folder = Path(args.out) if args.out else user_subset_dir()
    check_folder(folder, "--out")
    stored = subset_file(args.task, args.name, stored_subset_dir())
    if stored.is_file() and folder.resolve() != stored.parent.resolve():
        raise CommandError(
            f"{args.task} subset '{args.name}' is a stored subset shipped with med_evals "
            f"({stored}); name yours otherwise (a task reads a user's subset before a stored "
            "one)"
        )
    if args.size < 1:
        raise CommandError(f"--size {args.size}: at least 1 item")
    source = spec(args.task).subset_source
    if source is None:
        raise CommandError(f"{args.task} has no data to draw a subset from")
    revision, strata, key_text = source(args.data_dir)
    if args.size > len(strata):
        raise CommandError(
            f"--size {args.size}: the {args.task} data (revision {revision}) holds "
            f"{len(strata)} items; a subset is at most all of them"
        )
    ids = draw_stratified(strata, args.size, seed=args.seed)
    path = write_subset(
        args.task, args.name, revision, ids, key_text, ["gold label"], args.seed, args.version,
        directory=folder,
    )
    counts: dict[str, int] = {}
    for i in ids:
        counts[str(strata[i])] = counts.get(str(strata[i]), 0) + 1
    print(f"wrote {path}: {len(ids)} items; per stratum: {counts}")
    if folder.resolve() != user_subset_dir().resolve():
        print(f"a task reads it with MED_EVALS_SUBSET_DIR={folder} and -T subset={args.name}")
    return 0


def _emit(df: pd.DataFrame, out: str | None) -> None:
    """Print a table (log-derived text made safe for a terminal) and write it as CSV for a
    spreadsheet (written whole; formulas neutralised: :func:`med_evals.outputs.files.write_csv`)."""
    from med_evals.outputs.files import write_csv
    from med_evals.outputs.text import terminal

    if out:
        write_csv(df, out, "--out")
        print(f"wrote {terminal(out)}")
    shown = df.copy()
    for col in shown.columns:  # text columns (object, or pandas' own string dtype)
        if not pd.api.types.is_numeric_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: terminal(v) if isinstance(v, str) else v)
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(shown.to_string(index=False))


#: ``--prices`` of report, baseline and regress (compare's: med_evals.commands.compare)
PRICES_HELP = (
    "YAML or JSON file: model name (as the log names it) -> {input, output, input_cache_write, "
    "input_cache_read} in $ per million tokens, the shape of Inspect's --model-cost-config "
    "file; prices the tokens of models Inspect has no price for (vllm/..., openai-api/...) "
    "(docs/numbers.md#tokens-and-cost)"
)


#: ``med-evals --help`` lists the commands in these groups, in this order (a command missing
#: here is listed under "other", so none is ever hidden: tests/test_cli.py)
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "evaluation": ("compare", "run", "merge-shards", "report", "flip-rate", "studies"),
    "comparison and gating": ("diff", "baseline", "regress", "power"),
    "data tools": ("subset", "fetch", "build", "score-recorded", "recorded-to-replay",
                   "export-counterfactuals"),
}


def version_text() -> str:
    """``med-evals 0.1.0 (inspect-ai 0.3.285; studies: oncology_rct 2.1.0, ...)``."""
    from importlib.metadata import PackageNotFoundError, version

    from med_evals import __version__

    try:
        inspect = version("inspect_ai")
    except PackageNotFoundError:  # pragma: no cover - inspect-ai is a dependency
        inspect = "not installed"
    studies = ", ".join(f"{name} {s.version}" for name, s in STUDIES.items())
    return f"med-evals {__version__} (inspect-ai {inspect}; studies: {studies})"


def _group_commands(parser: argparse.ArgumentParser, sub: Any) -> None:
    """List the subcommands in :data:`COMMAND_GROUPS` in the top-level help (argparse lists
    them in one block otherwise)."""
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    sub._choices_actions.clear()  # not listed twice
    grouped = [c for cs in COMMAND_GROUPS.values() for c in cs]
    groups = dict(COMMAND_GROUPS)
    other = tuple(c for c in helps if c not in grouped)
    if other:
        groups["other"] = other
    width = max(len(c) for c in helps) + 2
    lines = []
    for title, commands in groups.items():
        lines.append(f"{title}:")
        lines += [f"  {c:<{width}}{helps[c]}" for c in commands if c in helps]
        lines.append("")
    lines.append("med-evals COMMAND --help for a command's options; exit codes: "
                 "docs/exit_codes.md")
    parser.epilog = "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="med-evals",
        description="Medical LLM evaluations on Inspect: the main job (compare), reports and "
        "comparisons of runs from their logs, and a CI gate against a baseline. The studies "
        "themselves run with `inspect eval med_evals/<task>`.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands (grouped below)")

    p = sub.add_parser("flip-rate", help="flip rates between conditions, from oncology logs")
    p.add_argument(
        "logs", nargs="+",
        help="log files or folders (local, or any URI Inspect reads: s3://bucket/logs)",
    )
    p.add_argument(
        "--pair",
        action="append",
        help="condition pair a:b (repeatable); default: title_abstract:counterfactual and "
        "counterfactual:counterfactual_doi",
    )
    p.add_argument("--out", help="also write the table as CSV")
    p.set_defaults(func=_flip_rate)

    p = sub.add_parser(
        "score-recorded", help="score a table of recorded oncology replies (no model is called)"
    )
    p.add_argument("table", help="wide (<model>_<condition>_response_raw) or long CSV")
    p.add_argument(
        "--with-trials",
        action="store_true",
        help="take ground truth from the trials dataset (long tables without ground_truth)",
    )
    p.add_argument("--data-dir", help="local data directory (default $MED_EVALS_DATA_DIR)")
    p.add_argument("--out", help="also write the table as CSV")
    p.set_defaults(func=_score_recorded)

    p = sub.add_parser(
        "recorded-to-replay",
        help="write recorded oncology replies as replay files (one JSONL per model)",
    )
    p.add_argument("table", help="wide (<model>_<condition>_response_raw) or long CSV")
    p.add_argument("--out", required=True, help="directory for <model>.jsonl files")
    p.add_argument("--data-dir", help="local data directory (default $MED_EVALS_DATA_DIR)")
    p.add_argument(
        "--by-row", action="store_true", help="table rows are trials 0..n-1 (no DOI match)"
    )
    p.set_defaults(func=_recorded_to_replay)

    p = sub.add_parser(
        "export-counterfactuals",
        help="write the accepted rewrites of counterfactual_build logs as a trials.csv",
    )
    p.add_argument(
        "logs", nargs="+",
        help="counterfactual_build log files or folders (local or s3://...)",
    )
    p.add_argument("--out", required=True, help="CSV to write (rows already in it are kept)")
    p.set_defaults(func=_export_counterfactuals)

    p = sub.add_parser("report", help="paper-style report (Markdown, HTML, PNG) from logs")
    p.add_argument(
        "logs", nargs="+",
        help="log files or folders (local or s3://...), any number of models",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--allow-mixed",
        action="store_true",
        help="compare runs of a task whose dataset revision, prompt or version differ",
    )
    p.add_argument(
        "--reference",
        help="folder holding the published tables med_evals does not ship (the oncology "
        "study's Table 1, oncology-table1-published.csv; default $MED_EVALS_REFERENCE_DIR, else "
        "../shared/reference beside a source checkout, else downloaded from its pinned commit "
        "and cached); MedREQAL's Tables 2 and 3 are shipped",
    )
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    p.set_defaults(func=_report)

    p = sub.add_parser("baseline", help="record runs' metrics and per-sample results")
    p.add_argument(
        "logs", nargs="+",
        help="log files or folders (local, or any URI Inspect reads: s3://bucket/logs)",
    )
    p.add_argument("-o", "--output", required=True, help="baseline JSON to write")
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    p.set_defaults(func=_baseline)

    from med_evals.outputs.exit_codes import table_text

    p = sub.add_parser(
        "regress",
        help="compare new runs with a baseline; exit 1 on regression, 3 when it cannot decide",
        description="Gate each study's headline metrics on a 95% paired bootstrap of new - old\n"
        "(docs/reports.md#regression-gate). Of each eval's logs the finished one is read\n"
        "(after a kill and `inspect eval-retry`, the killed log is named as ignored).",
        epilog=table_text()
        + "\n\n3 (undecided) when: a run did not finish (no finished log of its eval given);\n"
        "a study log has no scores; a new run has no baseline run of its task; the setup\n"
        "changed (data, prompt, task version, task argument, scorer or generation setting);\n"
        "nothing was compared; or a gated metric is untested: its old or new value or its\n"
        "bootstrap interval is undefined (no shared samples, no valid reply on one side).\n"
        "With --margin, also when a gated metric's interval does not rule out a drop larger\n"
        "than the margin. A regression (1) outranks them. All commands' codes:\n"
        "docs/exit_codes.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "logs", nargs="+",
        help="log files or folders (local or s3://...) of the new runs",
    )
    p.add_argument("--baseline", required=True, help="baseline JSON from `med-evals baseline`")
    p.add_argument(
        "--allow-untested",
        action="store_true",
        help="accept gated metrics that could not be tested (listed, with the reason) instead "
        "of exiting 3, as long as at least one metric was tested",
    )
    p.add_argument(
        "--allow-absent",
        action="store_true",
        help="accept baseline runs that no new run was compared with (a job gating part of "
        "what its baseline records) instead of exiting 3; they are listed",
    )
    p.add_argument(
        "--n-boot",
        type=int,
        default=1000,
        metavar="N",
        help="resamples of the paired bootstrap (default 1000, seeded; at least 100): more "
        "make the interval's ends steadier and cost time (about 9 ms each per run and "
        "condition for the oncology headline)",
    )
    p.add_argument(
        "--all-metrics",
        action="store_true",
        help="also print every other number of each study's full metric set, old and new "
        "(information, never gated)",
    )
    p.add_argument(
        "--margin",
        type=float,
        metavar="DROP",
        help="pass only what is shown no worse than the baseline by more than DROP (a share: "
        "0.02 is 2 points): each gated metric's one-sided 95%% paired bootstrap lower bound "
        "of new - old above -DROP; undecided (3) where the samples cannot rule such a drop "
        "out (`med-evals power --margin DROP` sizes a subset that can); a regression (1) as "
        "without it (docs/numbers.md)",
    )
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    p.set_defaults(func=_regress)

    p = sub.add_parser(
        "studies",
        help="each study's conditions, headline numbers and metric sets (from the registry)",
    )
    p.add_argument("tasks", nargs="*", help="studies to show (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON list instead")
    p.add_argument(
        "--fingerprints", action="store_true",
        help="print each study's version and the fingerprint of what its code does now, beside "
        "the recorded one (record it with a bumped version: CONTRIBUTING.md)",
    )
    p.set_defaults(func=_studies)

    p = sub.add_parser("subset", help="named, versioned, stratified subsets of a task's data")
    subsub = p.add_subparsers(dest="subset_command", required=True)
    q = subsub.add_parser(
        "make",
        help="draw a stratified subset and store its ids in your subsets folder "
        "($MED_EVALS_SUBSET_DIR, else the user data folder's med_evals/subsets)",
    )
    q.add_argument("task", choices=sorted(STUDIES))
    q.add_argument("name", help="subset name, e.g. nightly (not a stored subset's: smoke, ci)")
    q.add_argument("--size", type=int, required=True, help="items, at most the data's")
    q.add_argument(
        "--out",
        help="folder to write the subset into instead (a task reads it with "
        "MED_EVALS_SUBSET_DIR=<folder>)",
    )
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--version", type=int, default=1)
    q.add_argument("--data-dir", help="local data directory (default $MED_EVALS_DATA_DIR)")
    q.set_defaults(func=_subset_make)

    from med_evals.commands.compare import add_parser as add_compare

    add_compare(sub)

    from med_evals.commands.diff import add_parser as add_diff

    add_diff(sub)

    from med_evals.commands.run import add_parser as add_run

    add_run(sub)
    from med_evals.commands.merge_shards import add_parser as add_merge_shards

    add_merge_shards(sub)
    from med_evals.commands.power import add_parser as add_power

    add_power(sub)

    from med_evals.commands.build import add_builder_commands

    add_builder_commands(sub)
    _group_commands(parser, sub)

    args = parser.parse_args(argv)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run a command: a :class:`CommandError` or bad input is one line on stderr with its exit
    code (:mod:`med_evals.outputs.exit_codes`), never a traceback."""
    from med_evals.inspect_internals.compat import InputError
    from med_evals.outputs.exit_codes import USAGE, CommandError

    name = " ".join(
        str(v) for v in (args.command, getattr(args, "subset_command", None),
                         getattr(args, "fetch_command", None),
                         getattr(args, "build_command", None)) if v
    )
    try:
        return int(args.func(args))
    except CommandError as ex:
        print(f"med-evals {name}: error: {terminal(str(ex), one_line=True)}", file=sys.stderr)
        return ex.code
    except InputError as ex:
        print(f"med-evals {name}: error: {terminal(str(ex), one_line=True)}", file=sys.stderr)
        return USAGE


if __name__ == "__main__":
    sys.exit(main())
