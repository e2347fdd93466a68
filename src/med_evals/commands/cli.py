"""``med-evals``: the one parser of the command line.

Every command's arguments are declared here, and nowhere else; each command's work is a plain
function in the module named after the command, which the tests call directly:

- ``compare``: :func:`~med_evals.commands.compare.compare_command`
- ``run``: :func:`~med_evals.commands.run.run_command`
- ``report``: :func:`~med_evals.commands.report.report_command`
- ``flip-rate``: :func:`~med_evals.commands.flip_rate.flip_rate_command`
- ``studies``: :func:`~med_evals.commands.studies.studies_command`
- ``diff``: :func:`~med_evals.commands.diff.diff_command`
- ``baseline``: :func:`~med_evals.commands.baseline.baseline_command`
- ``regress``: :func:`~med_evals.commands.regress.regress_command`
- ``power``: :func:`~med_evals.commands.power.power_command`
- ``subset make``: :func:`~med_evals.commands.subset.subset_make_command`
- ``fetch cochrane``: :func:`~med_evals.commands.fetch.fetch_cochrane_command`
- ``build medreqal``: :func:`~med_evals.commands.build.build_medreqal_command`
- ``score-recorded``: :func:`~med_evals.commands.score_recorded.score_recorded_command`
- ``recorded-to-replay``:
  :func:`~med_evals.commands.recorded_to_replay.recorded_to_replay_command`
- ``export-counterfactuals``:
  :func:`~med_evals.commands.export_counterfactuals.export_counterfactuals_command`

Each command's function is imported when the command runs (a command line that only asks
for ``--help`` imports none of their work). ``med-evals --help`` lists the commands in the
groups of :data:`COMMANDS`, in its epilog (argparse itself lists the sub-commands of one block).
A :class:`~med_evals.outputs.exit_codes.CommandError` or bad input is one line on stderr with
its exit code (docs/exit_codes.md), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from med_evals.commands import compare, diff, power
from med_evals.commands.run import default_processes, max_processes
from med_evals.outputs.exit_codes import table_text
from med_evals.outputs.text import terminal
from med_evals.tasks import STUDIES

Args = argparse.Namespace

#: ``--prices`` of compare, report, baseline and regress
PRICES_HELP = (
    "YAML or JSON file: model name (as the log names it) -> {input, output, input_cache_write, "
    "input_cache_read} in $ per million tokens, the shape of Inspect's --model-cost-config "
    "file; prices the tokens of models Inspect has no price for (vllm/..., openai-api/...) "
    "(docs/numbers.md#tokens-and-cost)"
)
LOGS_HELP = "log files or folders (local, or any URI Inspect reads: s3://bucket/logs)"
DATA_DIR_HELP = "local data directory (default $MED_EVALS_DATA_DIR)"
TABLE_HELP = "wide (<model>_<condition>_response_raw) or long CSV"


# --- each command: its arguments, and the call of its function -------------------------------

def _compare(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument(
        "--model", default=compare.DEFAULT_MODEL,
        help=f"model to run (default {compare.DEFAULT_MODEL}; any Inspect model; none: recorded "
        "only)",
    )
    p.add_argument(
        "-M", dest="model_args", action="append", metavar="NAME=VALUE",
        help="model arg (repeatable); default for embedded models: "
        f"choices={compare.DEFAULT_CHOICES}; -M choices= gives the study's free reply (then pass "
        "--max-tokens)",
    )
    p.add_argument(
        "--recorded", default=",".join(compare.DEFAULT_RECORDED),
        help="recorded models to replay, comma-separated, or 'none' "
        f"(default {','.join(compare.DEFAULT_RECORDED)}; also gpt35turbo_temp100)",
    )
    p.add_argument("--condition", default=compare.DEFAULT_CONDITION, help="oncology condition")
    p.add_argument("--subset", default=compare.DEFAULT_SUBSET,
                   help="stored subset; 'all': 250 trials")
    p.add_argument("--max-tokens", type=int, help="output tokens per reply (default: the task's)")
    p.add_argument(
        "--timeout", type=int, default=compare.DEFAULT_TIMEOUT, metavar="SECONDS",
        help="a served model's request gives up after SECONDS, its retries included (default "
        f"{compare.DEFAULT_TIMEOUT}; Inspect's --timeout and --attempt-timeout; none for "
        "embedded/)",
    )
    p.add_argument(
        "--max-retries", type=int, default=compare.DEFAULT_MAX_RETRIES, metavar="N",
        help=f"times a failed request to a served model is retried (default "
        f"{compare.DEFAULT_MAX_RETRIES}; Inspect's --max-retries)",
    )
    p.add_argument("--log-dir", help="folder for the logs (default logs/compare-<time>)")
    p.add_argument("--out", help="folder for the report (default <log dir>/report)")
    p.add_argument("--data-dir", help=DATA_DIR_HELP)
    p.add_argument("--reference", help="folder of the published tables (see med-evals report)")
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)

    def call(a: Args) -> int:
        from med_evals.commands.compare import compare_command

        return compare_command(
            model=a.model, model_args=a.model_args, recorded=a.recorded,
            condition=a.condition, subset=a.subset, max_tokens=a.max_tokens,
            timeout=a.timeout, max_retries=a.max_retries, log_dir=a.log_dir, out=a.out,
            data_dir=a.data_dir, reference=a.reference, prices=a.prices)

    return call


def _run(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help=f"processes, one shard each (default: this machine's cores, "
                   f"{default_processes()}, at most the run's items; at most "
                   f"{max_processes()})")
    p.add_argument("--log-dir", default=None,
                   help="folder for the shards' logs (default $INSPECT_LOG_DIR, else ./logs); "
                   "one med-evals run at a time writes into it")
    p.add_argument("task", help="the task: healthfc, med_evals/healthfc, ...")
    p.add_argument("inspect_flags", nargs=argparse.REMAINDER,
                   help="inspect eval flags, given to every process")

    def call(a: Args) -> int:
        from med_evals.commands.run import run_command

        processes, log_dir, flags = run_options(a)
        return run_command(a.task, flags, processes=processes, log_dir=log_dir)

    return call


def run_options(a: Args) -> tuple[int | None, str, list[str]]:
    """``med-evals run``'s ``--processes`` and ``--log-dir`` (given before the task, or after
    it among the flags for Inspect; after wins) and the flags for ``inspect eval``."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    own.add_argument("--processes", type=int)
    own.add_argument("--log-dir")
    after, flags = own.parse_known_args(list(a.inspect_flags))
    processes = after.processes if after.processes is not None else a.processes
    log_dir = after.log_dir or a.log_dir or os.environ.get("INSPECT_LOG_DIR") or "logs"
    return processes, log_dir, flags


def _merge_shards(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("shards", help="the <name>.shards folder (local or s3://)")
    p.add_argument("--count", type=int, default=None, metavar="N",
                   help="the run's number of shards: folders 1 to N must each hold a log")

    def call(a: Args) -> int:
        from med_evals.commands.merge_shards import merge_shards_command

        return merge_shards_command(a.shards, a.count)

    return call


def _report(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("logs", nargs="+",
                   help="log files or folders (local or s3://...), any number of models")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--allow-mixed", action="store_true",
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

    def call(a: Args) -> int:
        from med_evals.commands.report import report_command

        return report_command(a.logs, a.out, allow_mixed=a.allow_mixed, reference=a.reference,
                              prices=a.prices)

    return call


def _flip_rate(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("logs", nargs="+", help=LOGS_HELP)
    p.add_argument(
        "--pair", action="append",
        help="condition pair a:b (repeatable); default: title_abstract:counterfactual and "
        "counterfactual:counterfactual_doi",
    )
    p.add_argument("--out", help="also write the table as CSV")

    def call(a: Args) -> int:
        from med_evals.commands.flip_rate import flip_rate_command

        return flip_rate_command(a.logs, pairs=a.pair, out=a.out)

    return call


def _studies(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("tasks", nargs="*", help="studies to show (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON list instead")
    p.add_argument(
        "--fingerprints", action="store_true",
        help="print each study's version and the fingerprint of what its code does now, beside "
        "the recorded one (record it with a bumped version: CONTRIBUTING.md)",
    )

    def call(a: Args) -> int:
        from med_evals.commands.studies import studies_command

        return studies_command(a.tasks, as_json=a.json, fingerprints=a.fingerprints)

    return call


def _diff(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("log_a", metavar="LOG_A", help="a log file (local or s3://...)")
    p.add_argument("log_b", metavar="LOG_B", help="another run's log, of the same study")
    p.add_argument("--condition", help="compare this condition only (default: every shared one)")
    p.add_argument("--limit", type=int, default=diff.LIMIT, metavar="N",
                   help=f"samples listed per list (default {diff.LIMIT})")
    p.add_argument("--n-boot", type=int, default=diff.N_BOOT, metavar="N",
                   help=f"paired bootstrap resamples (default {diff.N_BOOT}, the report's; "
                   "seed 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")

    def call(a: Args) -> int:
        from med_evals.commands.diff import diff_command

        return diff_command(a.log_a, a.log_b, condition=a.condition, limit=a.limit,
                            n_boot=a.n_boot, as_json=a.json)

    return call


def _baseline(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("logs", nargs="+", help=LOGS_HELP)
    p.add_argument("-o", "--output", required=True, help="baseline JSON to write")
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)

    def call(a: Args) -> int:
        from med_evals.commands.baseline import baseline_command

        return baseline_command(a.logs, a.output, prices=a.prices)

    return call


def _regress(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("logs", nargs="+", help="log files or folders (local or s3://...) of the new "
                   "runs")
    p.add_argument("--baseline", required=True, help="baseline JSON from `med-evals baseline`")
    p.add_argument(
        "--allow-untested", action="store_true",
        help="accept gated metrics that could not be tested (listed, with the reason) instead "
        "of exiting 3, as long as at least one metric was tested",
    )
    p.add_argument(
        "--allow-absent", action="store_true",
        help="accept baseline runs that no new run was compared with (a job gating part of "
        "what its baseline records) instead of exiting 3; they are listed",
    )
    p.add_argument(
        "--n-boot", type=int, default=1000, metavar="N",
        help="resamples of the paired bootstrap (default 1000, seeded; at least 100): more "
        "make the interval's ends steadier and cost time (about 9 ms each per run and "
        "condition for the oncology headline)",
    )
    p.add_argument(
        "--all-metrics", action="store_true",
        help="also print every other number of each study's full metric set, old and new "
        "(information, never gated)",
    )
    p.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    p.add_argument(
        "--margin", type=float, metavar="DROP",
        help="pass only what is shown no worse than the baseline by more than DROP (a share: "
        "0.02 is 2 points): each gated metric's one-sided 95%% paired bootstrap lower bound "
        "of new - old above -DROP; undecided (3) where the samples cannot rule such a drop "
        "out (`med-evals power --margin DROP` sizes a subset that can); a regression (1) as "
        "without it (docs/numbers.md)",
    )

    def call(a: Args) -> int:
        from med_evals.commands.regress import regress_command

        return regress_command(a.logs, a.baseline, allow_untested=a.allow_untested,
                               allow_absent=a.allow_absent, n_boot=a.n_boot,
                               all_metrics=a.all_metrics, prices=a.prices, margin=a.margin)

    return call


def _power(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("--baseline", required=True, help="baseline JSON from `med-evals baseline`")
    goal = p.add_mutually_exclusive_group(required=True)
    goal.add_argument("--detect", type=float, metavar="DROP",
                      help="the drop to detect, a share in (0, 1): 0.05 is 5 points")
    goal.add_argument("--margin", type=float, metavar="DROP",
                      help="the margin of an equivalence gate (`med-evals regress --margin`): "
                      "items to show a run as good as its baseline no worse by more than DROP")
    p.add_argument("--n-boot", type=int, default=power.N_BOOT, metavar="N",
                   help=f"bootstrap resamples for macro-F1's standard error (default "
                   f"{power.N_BOOT}, seeded; at least 100)")

    def call(a: Args) -> int:
        from med_evals.commands.power import power_command

        return power_command(a.baseline, a.detect, n_boot=a.n_boot, margin=a.margin)

    return call


def _subset_make(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("task", choices=sorted(STUDIES))
    p.add_argument("name", help="subset name, e.g. nightly (not a stored subset's: smoke, ci)")
    p.add_argument("--size", type=int, required=True, help="items, at most the data's")
    p.add_argument(
        "--out",
        help="folder to write the subset into instead (a task reads it with "
        "MED_EVALS_SUBSET_DIR=<folder>)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--version", type=int, default=1)
    p.add_argument("--data-dir", help=DATA_DIR_HELP)

    def call(a: Args) -> int:
        from med_evals.commands.subset import subset_make_command

        return subset_make_command(a.task, a.name, a.size, out=a.out, seed=a.seed,
                                   version=a.version, data_dir=a.data_dir)

    return call


def _fetch_cochrane(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("--from", dest="start", required=True, help="first publication date, ISO")
    p.add_argument("--to", dest="end", required=True, help="last publication date, ISO")
    p.add_argument("--out", required=True, help="directory for the XML batches (resumable)")
    p.add_argument("--base-url", default=None, help="E-utilities base URL (default: NCBI's)")
    p.add_argument("--api-key", help="NCBI API key (default $NCBI_API_KEY): 10 requests/s, not 3")
    p.add_argument("--email", help="contact address sent to NCBI with each request")
    p.add_argument("--batch-size", type=int, default=200, help="PMIDs per efetch (default 200)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for each reply (default 30)")
    p.add_argument("--retries", type=int, default=None,
                   help="retries of a failed request (default 5)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    def call(a: Args) -> int:
        from med_evals.commands.fetch import fetch_cochrane_command

        return fetch_cochrane_command(
            a.start, a.end, a.out, base_url=a.base_url, api_key=a.api_key, email=a.email,
            batch_size=a.batch_size, progress=not a.no_progress, timeout=a.timeout,
            retries=a.retries)

    return call


def _build_medreqal(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("--source", action="append", required=True,
                   help="efetch XML / PubMed page, or a folder")
    p.add_argument("--model", required=True, help="Inspect model, PROVIDER/MODEL")
    p.add_argument("-M", action="append", help="model argument key=value (repeatable)")
    p.add_argument("--out", required=True, help="CSV to write")
    p.add_argument("--published-after", help="only reviews published after this ISO date")
    p.add_argument("--log-dir", help="Inspect log directory (default: Inspect's)")
    p.add_argument("--validation-sheet", type=int, default=0, metavar="N",
                   help="N random rows to check")
    p.add_argument("--seed", type=int, default=0, help="seed of the validation sample")
    p.add_argument("--limit", type=int, help="at most this many reviews (a trial run)")

    def call(a: Args) -> int:
        from med_evals.commands.build import build_medreqal_command

        return build_medreqal_command(
            a.source, a.model, a.out, published_after=a.published_after, log_dir=a.log_dir,
            validation_sheet=a.validation_sheet, seed=a.seed, limit=a.limit, model_arg=a.M)

    return call


def _score_recorded(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("table", help=TABLE_HELP)
    p.add_argument(
        "--with-trials", action="store_true",
        help="take ground truth from the trials dataset (long tables without ground_truth)",
    )
    p.add_argument("--data-dir", help=DATA_DIR_HELP)
    p.add_argument("--out", help="also write the table as CSV")

    def call(a: Args) -> int:
        from med_evals.commands.score_recorded import score_recorded_command

        return score_recorded_command(a.table, with_trials=a.with_trials, data_dir=a.data_dir,
                                      out=a.out)

    return call


def _recorded_to_replay(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("table", help=TABLE_HELP)
    p.add_argument("--out", required=True, help="directory for <model>.jsonl files")
    p.add_argument("--data-dir", help=DATA_DIR_HELP)
    p.add_argument("--by-row", action="store_true",
                   help="table rows are trials 0..n-1 (no DOI match)")

    def call(a: Args) -> int:
        from med_evals.commands.recorded_to_replay import recorded_to_replay_command

        return recorded_to_replay_command(a.table, a.out, data_dir=a.data_dir, by_row=a.by_row)

    return call


def _export_counterfactuals(p: argparse.ArgumentParser) -> Callable[[Args], int]:
    p.add_argument("logs", nargs="+",
                   help="counterfactual_build log files or folders (local or s3://...)")
    p.add_argument("--out", required=True, help="CSV to write (rows already in it are kept)")

    def call(a: Args) -> int:
        from med_evals.commands.export_counterfactuals import export_counterfactuals_command

        return export_counterfactuals_command(a.logs, a.out)

    return call


# --- the table of commands --------------------------------------------------------------------

#: a command's arguments declared on its parser, returning the call of its function
Declare = Callable[[argparse.ArgumentParser], Callable[[Args], int]]


@dataclass(frozen=True)
class Command:
    """A command: its group in ``med-evals --help``, its one-line help, and either its
    arguments (:data:`Declare`) or its sub-commands (``subset make``, ``fetch cochrane``)."""

    group: str
    name: str
    help: str
    declare: Declare | None = None
    subcommands: tuple[Command, ...] = ()
    description: str | None = None
    epilog: str | None = None


def _first_paragraph(doc: str | None) -> str | None:
    return doc.split("\n\n")[0] if doc else None


#: every command, in the order ``med-evals --help`` lists them in its groups
COMMANDS: tuple[Command, ...] = (
    Command("evaluation", "compare",
            "the main job: a model run here and recorded replies, beside the published table",
            _compare, description=_first_paragraph(compare.__doc__)),
    Command("evaluation", "run",
            "run a task in N processes, one shard each, into one log folder; run again to "
            "resume", _run,
            description="Run a task in N `inspect eval` processes on this machine, one shard "
            "each (-T shard=i/N), into one log folder, with the fastest settings "
            "(--no-log-realtime, --no-score-display, --display none); one progress line; the "
            "merged run's headline at the end. What can be checked is checked before any "
            "process starts (the flags, the model, the task's arguments and items). One run "
            "writes into a log folder at a time (a lock its processes hold; a dead owner's is "
            "released), and the processes end with the command. Run the same command again to "
            "resume: finished shards are kept, unfinished ones resumed (inspect eval-retry).",
            epilog="Flags after the task go to every `inspect eval` process (--model, -T, "
            "--max-connections, ...). Exit 0 when every shard finished, 1 when one did not "
            "(named, with its log, and whether running again resumes it), 2 for a bad "
            "argument or a log folder another run is writing into. docs/scale.md"),
    Command("evaluation", "merge-shards",
            "write the merged log of a <name>.shards/ folder (Inspect's shard layout), so "
            "inspect view shows the run once", _merge_shards,
            description="Write <name>.eval beside a <name>.shards/ folder whose <k>/ folders "
            "each hold a finished log of shard k of one run (-T shard=k/N, e.g. a Slurm array "
            "with --log-dir logs/<name>.shards/$k): one Inspect log of every shard's samples, "
            "its metrics recomputed over all of them, eval.shards naming each shard's log. "
            "inspect view then lists the merged log and hides the shards. med-evals run "
            "--processes N writes it itself.",
            epilog="Exit 0 when written, 1 when a shard folder has no finished log or the logs "
            "are not one whole run (nothing written), 2 for a folder not named <name>.shards. "
            "docs/scale.md"),
    Command("evaluation", "report", "paper-style report (Markdown, HTML, PNG) from logs",
            _report),
    Command("evaluation", "flip-rate", "flip rates between conditions, from oncology logs",
            _flip_rate),
    Command("evaluation", "studies",
            "each study's conditions, headline numbers and metric sets (from the registry)",
            _studies),
    Command("comparison and gating", "diff",
            "where two runs of a study differ: McNemar's test, paired bootstrap differences "
            "and the samples right in one run only, or wrong in both", _diff,
            description=_first_paragraph(diff.__doc__)),
    Command("comparison and gating", "baseline",
            "record runs' metrics and per-sample results", _baseline),
    Command("comparison and gating", "regress",
            "compare new runs with a baseline; exit 1 on regression, 3 when it cannot decide",
            _regress,
            description="Gate each study's headline metrics on a 95% paired bootstrap of new - "
            "old\n(docs/reports.md#regression-gate). Of each eval's logs the finished one is "
            "read\n(after a kill and `inspect eval-retry`, the killed log is named as ignored).",
            epilog=table_text()
            + "\n\n3 (undecided) when: a run did not finish (no finished log of its eval given);\n"
            "a study log has no scores; a new run has no baseline run of its task; the setup\n"
            "changed (data, prompt, task version, task argument, scorer or generation setting);\n"
            "nothing was compared; or a gated metric is untested: its old or new value or its\n"
            "bootstrap interval is undefined (no shared samples, no valid reply on one side).\n"
            "A regression (1) outranks them. All commands' codes: docs/exit_codes.md"),
    Command("comparison and gating", "power",
            "items a gate needs to detect a chosen drop (or to rule out a drop larger than a "
            "margin), per run, condition and gated metric of a baseline", _power,
            description=_first_paragraph(power.__doc__)),
    Command("data tools", "subset", "named, versioned, stratified subsets of a task's data",
            subcommands=(Command(
                "", "make", "draw a stratified subset and store its ids in your subsets folder "
                "($MED_EVALS_SUBSET_DIR, else the user data folder's med_evals/subsets)",
                _subset_make),)),
    Command("data tools", "fetch", "download source records for a dataset builder",
            subcommands=(Command(
                "", "cochrane",
                "PubMed XML of Cochrane reviews published in a date range (E-utilities)",
                _fetch_cochrane),)),
    Command("data tools", "build", "build a dataset with a model (runs Inspect tasks)",
            subcommands=(Command(
                "", "medreqal", "MedREQAL-style CSV from Cochrane reviews (Table 6 prompts)",
                _build_medreqal),)),
    Command("data tools", "score-recorded",
            "score a table of recorded oncology replies (no model is called)", _score_recorded),
    Command("data tools", "recorded-to-replay",
            "write recorded oncology replies as replay files (one JSONL per model)",
            _recorded_to_replay),
    Command("data tools", "export-counterfactuals",
            "write the accepted rewrites of counterfactual_build logs as a trials.csv",
            _export_counterfactuals),
)

#: ``med-evals --help``'s groups, in order, and the commands of each
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {}
for _c in COMMANDS:
    COMMAND_GROUPS[_c.group] = (*COMMAND_GROUPS.get(_c.group, ()), _c.name)
del _c


def grouped_help() -> str:
    """The epilog of ``med-evals --help``: each group's commands with their help."""
    width = max(len(c.name) for c in COMMANDS) + 2
    lines = []
    for group, names in COMMAND_GROUPS.items():
        lines.append(f"{group}:")
        lines += [f"  {c.name:<{width}}{c.help}" for c in COMMANDS if c.name in names]
        lines.append("")
    lines.append("med-evals COMMAND --help for a command's options; exit codes: "
                 "docs/exit_codes.md")
    return "\n".join(lines)


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


def _add(sub: Any, command: Command, prefix: str = "") -> None:
    """``command``'s parser on ``sub``: its arguments and its call, or its sub-commands. A
    top-level command is given no ``help=`` (the grouped epilog lists it); a sub-command is
    (``med-evals subset --help`` lists its ``{make}``)."""
    kwargs: dict[str, Any] = {"help": command.help} if prefix else {}
    description = command.description or command.help
    if "\n" in description + (command.epilog or ""):  # laid out as written
        kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(command.name, description=description, epilog=command.epilog, **kwargs)
    name = f"{prefix}{command.name}"
    if command.subcommands:
        inner = p.add_subparsers(dest=f"{command.name}_command", required=True)
        for c in command.subcommands:
            _add(inner, c, f"{name} ")
    else:
        assert command.declare is not None
        p.set_defaults(func=command.declare(p), command_name=name)


def parser() -> argparse.ArgumentParser:
    """The ``med-evals`` parser: every command of :data:`COMMANDS`."""
    top = argparse.ArgumentParser(
        prog="med-evals",
        usage="%(prog)s [-h] [--version] COMMAND ...",
        description="Medical LLM evaluations on Inspect: the main job (compare), reports and "
        "comparisons of runs from their logs, and a CI gate against a baseline. The studies "
        "themselves run with `inspect eval med_evals/<task>`.",
        epilog=grouped_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=version_text())
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND",
                             help=argparse.SUPPRESS)
    for command in COMMANDS:
        _add(sub, command)
    return top


#: the arguments (argparse dests) that name what a command reads, and what they are; and those
#: that name what it writes, with their flag: an output that is an input is refused before any
#: work (:func:`med_evals.outputs.files.check_not_input`)
INPUTS = {"logs": "log", "log_a": "log", "log_b": "log", "table": "table",
          "source": "source file", "baseline": "baseline"}
OUTPUTS = {"out": "--out", "output": "-o"}


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before the command runs, an output path that names one of its inputs (a log,
    given or in a log folder given; the table it reads): writing it would overwrite it."""
    from med_evals.outputs.files import check_not_input

    inputs: dict[str, list[str]] = {}
    for dest, what in INPUTS.items():
        value = getattr(args, dest, None)
        if value:
            inputs.setdefault(what, []).extend(value if isinstance(value, list) else [value])
    if not inputs:
        return
    for dest, flag in OUTPUTS.items():
        value = getattr(args, dest, None)
        if isinstance(value, str) and value:
            check_not_input(value, inputs, flag)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's) and run its command: a :class:`CommandError`
    or bad input is one line on stderr, ``med-evals <command>: error: <what>``, with its exit
    code (:mod:`med_evals.outputs.exit_codes`), never a traceback."""
    from med_evals.inspect_internals.compat import InputError
    from med_evals.outputs.exit_codes import USAGE, CommandError

    args = parser().parse_args(argv)
    try:
        _check_outputs(args)
        return int(args.func(args))
    except CommandError as ex:
        print(f"med-evals {args.command_name}: error: {terminal(str(ex), one_line=True)}",
              file=sys.stderr)
        return ex.code
    except InputError as ex:
        print(f"med-evals {args.command_name}: error: {terminal(str(ex), one_line=True)}",
              file=sys.stderr)
        return USAGE


if __name__ == "__main__":
    sys.exit(main())
