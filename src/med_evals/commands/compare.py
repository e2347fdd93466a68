"""``med-evals compare``: the main job. One model run here and the study group's recorded replies,
replayed, on the same trials and condition of the oncology study, in one Inspect ``eval``; then
a short table that puts them beside the study's published Table 1 rows, the HTML report and the
log folder for ``inspect view``.

Defaults: ``embedded/smollm2-135m`` (in process, offline) with ``-M choices=POSITIVE,NEGATIVE``
(the reply is the more probable of the study's two labels: our decoding choice, logged with each
reply and named in the table), and the recorded GPT-4o and o1 replies of the group's earlier
paper (``trials_with_predictions.csv``, turned into replay files in the run's folder at run time:
the table has no licence and is never copied into the repository), on ``title_abstract`` (the
study's baseline, the one condition both the recorded replies and Table 1 have) for the 12 trials
of the ``compare`` subset (drawn as every stored subset is, stratified by outcome: 7 positive, 5
negative; 12 rather than the ``smoke`` subset's 20 keeps the embedded model's evaluation under a
minute on two cores: its time is the prompts, about 720 tokens each).

A served model (any provider that sends requests to a server) is first asked whether its
server answers at all (:mod:`med_evals.models.reach`: a refused connection, an unknown host is one
line within seconds, exit 1), and each of its requests gives up after ``--timeout`` seconds,
retried at most ``--max-retries`` times: Inspect's own defaults retry without end, and a run on a
server that never answered printed nothing until it was killed. A request that still fails is
scored ERROR, as the study scored a failed call, and named beside the table; a run none of whose
requests got a reply stops with one line naming its log (exit 1). A SIGTERM stops the runs as
Ctrl-C does: each log is closed as ``cancelled`` and named.

Beside the runs: the trivial rows of their trials (the same headline function, each reply a
constant or a uniform random answer), whether each run beats the best of them beyond sampling
noise, and, for three runs or more, which can be told apart (:mod:`med_evals.stats.standing`, with
the
report's resamples: the report's numbers).

Every number printed for a run is :meth:`Study.headline_values` over the run's per-sample values,
read back from its log: the function behind the logged metrics (the tests check they are equal),
the report and the regression gate. The published rows are the study's Table 1 as released
(:mod:`med_evals.data.published`), printed as published.
"""

from __future__ import annotations

import difflib
import math
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from med_evals.commands.interrupts import sigterm_as_ctrl_c
from med_evals.outputs.exit_codes import FAILED, USAGE, CommandError

DEFAULT_MODEL = "embedded/smollm2-135m"
#: ``--model none``: the recorded replies only
NO_MODEL = "none"
#: the study's two labels: the default reply set of an embedded model here
DEFAULT_CHOICES = "POSITIVE,NEGATIVE"
DEFAULT_RECORDED = ("gpt4o_temp100", "o1_temp100")
DEFAULT_CONDITION = "title_abstract"
#: 12 trials: the embedded model's time is its prompts (``--subset smoke``: 20, ``all``: 250)
DEFAULT_SUBSET = "compare"
RECORDED_DATASET = "oncology-rct-250"
RECORDED_FILE = "trials_with_predictions.csv"
RECORDED_SOURCE = (
    "recorded by the study group for its earlier paper (Windisch et al., JMIR 2026), with that "
    "paper's prompt; replayed here and scored with this study's rules"
)
PUBLISHED_SOURCE = (
    "Windisch et al. 2026, Table 1 as published: other models (GPT-5.2, Gemini 3 Flash, Claude "
    "Opus 4.5), the study's prompt, all 250 trials"
)
#: the published Table 1 column of each headline number
PUBLISHED_COLUMNS = {
    "macro_f1_valid": "F1 Score (95% CI)",
    "accuracy_valid": "Accuracy (95% CI)",
    "valid_rate": "Valid predictions (%)",
}
#: seconds between progress updates: in place on a terminal, else one line now and then
PROGRESS_TTY, PROGRESS_PIPE = 1.0, 30.0
#: a served model's limits (``--timeout``, ``--max-retries``): Inspect's own are none (it
#: retries a failed request without end, waiting up to 30 minutes between tries)
DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES = 120, 2
#: providers that run in this process: no server to wait for, no limits set
IN_PROCESS = ("embedded", "hf", "mockllm", "transformer_lens", "nnterp", "none")


@dataclass
class RunRow:
    """One evaluated run: its label, where its replies come from, its headline numbers, and
    its tokens and cost (:mod:`med_evals.logs.usage`)."""

    label: str
    source: str
    n: int
    values: dict[str, float]
    log: str
    seconds: float
    usage: Any = None  # med_evals.logs.usage.RunUsage (imported when a run is read)
    #: the condition's per-sample values (sample id -> score value) and the run's task
    #: arguments: the trivial rows, the standing against them and the ranks are computed on them
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Comparison:
    condition: str
    subset: str | None
    runs: list[RunRow]
    #: the published Table 1 rows of the condition, as published (strings)
    published: list[dict[str, str]]
    published_note: str
    log_dir: Path
    report: Path | None
    notes: list[str] = field(default_factory=list)
    #: what the numbers can say (:func:`stand`): the trivial rows of the runs' trials
    #: (:class:`med_evals.stats.standing.TrivialBlock`), each run's standing against the best of
    #: them (label -> :func:`med_evals.stats.trivial.beats_trivial`), the ranks of three runs or
    # more
    #: (:class:`med_evals.stats.standing.Ranking`)
    trivial: list[Any] = field(default_factory=list)
    standing: dict[str, Any] = field(default_factory=dict)
    ranking: list[Any] = field(default_factory=list)
    #: the bootstrap resamples (and random draws) behind ``standing`` and ``trivial``
    n_boot: int = 0


def model_label(model: str, args: dict[str, Any]) -> str:
    """The run's model and every model arg it was given a value, e.g. ``embedded/smollm2-135m,
    choices=POSITIVE,NEGATIVE`` (``-M choices=`` is the model's default: free replies)."""
    extra = ", ".join(f"{k}={_text(v)}" for k, v in args.items() if v not in ("", None))
    return f"{model}, {extra}" if extra else model


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _model_args(pairs: Sequence[str] | None, model: str) -> dict[str, Any]:
    if pairs is None:
        return {"choices": DEFAULT_CHOICES} if model.startswith("embedded/") else {}
    out: dict[str, Any] = {}
    for p in pairs:
        name, sep, value = p.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"-M {p!r}: expected NAME=VALUE", USAGE)
        out[name.strip()] = _model_arg_value(value.strip(), p)
    return out


def _model_arg_value(text: str, given: str) -> Any:
    """A ``-M`` value read as ``inspect eval`` reads it (YAML: ``max_retries=0`` is the number
    0), but an empty value stays empty (``-M choices=``: the model's free reply)."""
    import yaml

    if not text:
        return ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise CommandError(f"-M {given!r}: the value is not valid YAML (as inspect eval reads "
                           "it)", USAGE) from None


def _check_condition(condition: str) -> None:
    """An unknown ``--condition`` is named as such, with the closest known one (before any
    work: the recorded replies were read first, and the recording blamed)."""
    from med_evals.tasks.oncology_conditions import CONDITIONS

    if condition in CONDITIONS:
        return
    close = difflib.get_close_matches(condition, list(CONDITIONS), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise CommandError(
        f"--condition {condition}: unknown condition{hint} (conditions: {', '.join(CONDITIONS)})",
        USAGE,
    )


def _check_local(log_dir: str | Path | None, report_dir: str | Path | None) -> None:
    """``--log-dir`` and ``--out`` are local folders (one line, exit 2, for ``s3://...``): the
    replay files are written beside the logs, and the report, as every output, is local. Its
    reading side is Inspect's: each run is read back from ``log.location``, local or not."""
    from med_evals.logs.files import is_remote

    if log_dir is not None and is_remote(log_dir):
        raise CommandError(
            f"--log-dir {log_dir}: med-evals compare writes its logs, replay files and report "
            "to a local folder; copy them to S3 after (or run `inspect eval-set` into S3 and "
            "`med-evals report` over it: docs/scale.md)", USAGE,
        )
    if report_dir is not None:
        from med_evals.outputs.files import check_local

        check_local(report_dir, "--out")


def _replays(
    recorded: Sequence[str], condition: str, data_dir: str | None, out: Path
) -> dict[str, Path]:
    """Replay files of the recorded models asked for, derived from the study group's table."""
    from med_evals.commands.recorded_to_replay import recorded_conditions, write_replays
    from med_evals.data.datasets import fetch
    from med_evals.tasks.oncology_rct import load_trials

    if not recorded:
        return {}
    trials, _ = load_trials(data_dir)
    table = fetch(RECORDED_DATASET, RECORDED_FILE, data_dir)
    written = write_replays(table.path, out, trials)
    missing = [m for m in recorded if m not in written]
    if missing:
        raise CommandError(
            f"--recorded {','.join(missing)}: not in {table.path.name} "
            f"(recorded models: {', '.join(written)})",
            USAGE,
        )
    chosen = {m: written[m] for m in recorded}
    for m, path in chosen.items():
        if condition not in recorded_conditions(path):
            raise CommandError(
                f"--condition {condition}: {m} has no recorded replies for it (recorded: "
                f"{', '.join(recorded_conditions(path))})",
                USAGE,
            )
    return chosen


def replay_model(path: Path) -> Any:
    """The replay model of a recorded model's replay file: ``replay/<name> -M file=<path>``,
    named for the recorded model (the file's name without ``.jsonl``), so Inspect's log and its
    viewer's list name each replayed run by its model (the file's path is in the log's model
    args, its sha256 in each replayed call). A command's model, made before the run as
    ``inspect eval --model`` makes it, not a task's (the lint's get_model_location)."""
    from inspect_ai.model import get_model

    return get_model(  # inspect-evals-lint: ignore[get_model_location] -- a recording's replay
        f"replay/{path.stem}", file=str(path)
    )


def run_compare(
    *,
    model: str = DEFAULT_MODEL,
    model_args: dict[str, Any] | None = None,
    recorded: Sequence[str] = DEFAULT_RECORDED,
    condition: str = DEFAULT_CONDITION,
    subset: str | None = DEFAULT_SUBSET,
    data_dir: str | None = None,
    log_dir: str | Path | None = None,
    report_dir: str | Path | None = None,
    reference: str | None = None,
    max_tokens: int | None = None,
    progress: bool = True,
    prices: Any = None,
    timeout: int = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> Comparison:
    """Evaluate ``model`` and the ``recorded`` replies on one condition and subset; read the
    headline numbers, tokens and cost back from the logs; write the report. See the module's
    docstring. ``prices``: model name -> Inspect ``ModelCost``
    (:func:`med_evals.logs.usage.read_prices`). ``timeout``, ``max_retries``: the limits of each
    request to a served model (:func:`served_limits`)."""
    from inspect_ai import eval as inspect_eval

    from med_evals.models.reach import served_url, unreachable
    from med_evals.outputs.files import check_folder, make_folder
    from med_evals.tasks.oncology_rct import oncology_rct

    _check_condition(condition)
    _check_local(log_dir, report_dir)
    config = served_limits(model, timeout, max_retries)
    args = dict(model_args if model_args is not None else _model_args(None, model))
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = check_folder(log_dir or Path("logs") / f"compare-{stamp}", "--log-dir")
    make_folder(folder, "--log-dir")
    label_args = dict(args)
    if model.startswith("embedded/"):
        interval = PROGRESS_TTY if sys.stderr.isatty() else PROGRESS_PIPE
        args.setdefault("progress", interval if progress else 0)
        label_args.pop("progress", None)
    # the model first: a bad --model is a bad argument, found before the recording is read
    models = [_make_model(model, args, config)] if model != NO_MODEL else []
    replays = _replays(recorded, condition, data_dir, folder / "replays")
    if model == NO_MODEL and not replays:
        raise CommandError("nothing to compare: --model none and --recorded none", USAGE)
    models += [replay_model(path) for path in replays.values()]
    # built after the models, as `inspect eval` does: Inspect announces the hooks registered
    # when the first model is made (a multi-line banner), and the task registers one
    task = oncology_rct(condition=condition, subset=subset, data_dir=data_dir)
    url = served_url(models[0].api) if model != NO_MODEL else None
    problem = unreachable(url) if url else None
    if problem:  # Inspect would retry it for minutes, saying nothing
        raise CommandError(f"--model {model}: cannot reach {url} ({problem}); nothing was run",
                           FAILED)
    bar = getattr(models[0].api, "progress", None) if model != NO_MODEL else None
    if model != NO_MODEL and hasattr(models[0].api, "preload"):
        models[0].api.preload()  # the embedded model loads while Inspect sets the runs up
    print(
        f"med-evals compare: oncology_rct, condition {condition}, subset {subset or 'all'}: "
        f"{model_label(model, label_args)}; recorded {', '.join(recorded) or 'none'}",
        file=sys.stderr,
        flush=True,
    )
    if config is not None:
        print(f"med-evals compare: {_waiting_for(model, url, config)}; logs in "
              f"{os.path.abspath(folder)}", file=sys.stderr, flush=True)
    started, begun = time.monotonic(), time.time()
    try:
        with sigterm_as_ctrl_c():
            logs = inspect_eval(
                task,
                model=models,
                log_dir=str(folder),
                display="none",
                max_tasks=len(models),
                max_tokens=max_tokens,
            )
    finally:
        if bar is not None:
            bar.close()
    _check_completed(logs, len(models), folder, begun)
    wall = time.monotonic() - started

    sources = {model: "run here, with the study's prompt"}
    labels = {model: model_label(model, label_args)}  # a replayed run: the report's label
    for path in replays.values():
        sources[f"replay/{path.stem}"] = RECORDED_SOURCE
    rows = [_row(lg, labels, sources, condition, prices) for lg in logs]
    published, note = _published(condition, reference)
    report, notes = _report([str(lg.location) for lg in logs], report_dir or folder / "report",
                            reference, prices)
    timing = f"evaluation: {wall:.0f} s for all runs (Inspect's eval, model load included)"
    own = [r for r, lg in zip(rows, logs, strict=True) if lg.eval.model == model]
    if own:
        timing += f"; {model}: {own[0].seconds:.0f} s from its log's start to end"
    notes.insert(0, timing)
    notes[1:1] = [n for lg in logs if (n := failed_requests_note(lg)) is not None]
    return stand(Comparison(condition, subset, rows, published, note, folder, report, notes))


def stand(c: Comparison, n_boot: int | None = None) -> Comparison:
    """``c`` with what its numbers can say, as the report computes it
    (:mod:`med_evals.stats.standing`; ``n_boot``: the report's resamples unless given, seed 0): the
    trivial rows of the runs' trials, each run against the best of them, and the ranks of three
    runs or more."""
    from med_evals.commands.report.build import N_BOOT
    from med_evals.stats.standing import Entry, block_of, ranking, standing, trivial_blocks
    from med_evals.tasks import ONCOLOGY_RCT

    n = N_BOOT if n_boot is None else n_boot
    runs = [Entry(r.label, r.samples, r.task_args) for r in c.runs if r.samples]
    c.trivial = trivial_blocks(ONCOLOGY_RCT, c.condition, runs, draws=n)
    c.standing = {e.label: standing(ONCOLOGY_RCT, e, block_of(c.trivial, e.label), n)
                  for e in runs}
    c.n_boot = n
    c.ranking = ranking(ONCOLOGY_RCT, c.condition, runs)
    return c


def served_limits(model: str, timeout: int, max_retries: int) -> Any:
    """The Inspect ``GenerateConfig`` of a served model's limits: each request gives up after
    ``timeout`` seconds, its retries included (Inspect's ``timeout``, and ``attempt_timeout``
    so that an attempt the server never answers ends too: Inspect checks ``timeout`` only
    between attempts), and is retried at most ``max_retries`` times. None for a model that runs
    in this process (:data:`IN_PROCESS`: its replies take what they take) and for ``none``.
    A limit below its minimum is a bad argument (exit 2)."""
    from inspect_ai.model import GenerateConfig, ModelName

    if timeout < 1:
        raise CommandError(f"--timeout {timeout}: must be at least 1 (seconds)", USAGE)
    if max_retries < 0:
        raise CommandError(f"--max-retries {max_retries}: must be at least 0", USAGE)
    if model == NO_MODEL or "/" not in model or ModelName(model).api in IN_PROCESS:
        return None
    return GenerateConfig(timeout=timeout, attempt_timeout=timeout, max_retries=max_retries)


def _make_model(model: str, args: dict[str, Any], config: Any) -> Any:
    """Inspect's model for ``--model`` (with ``config``, a served model's limits); a model
    Inspect cannot make is a bad argument, one line (exit 2). The command's model, made before
    the run as ``inspect eval --model`` makes it, not a task's (the lint's get_model_location)."""
    from inspect_ai.model import get_model
    from rich.text import Text

    from med_evals.inspect_internals.compat import PrerequisiteError, unknown_provider_message

    try:
        given = {"config": config} if config else {}
        return get_model(  # inspect-evals-lint: ignore[get_model_location] -- the user's --model
            model, **given, **args
        )
    except PrerequisiteError as ex:  # e.g. the embedded model's weights, a missing API key
        # Inspect's message is rich markup for its console, in lines: one plain line here
        text = " ".join(Text.from_markup(str(ex.message)).plain.split())
        raise CommandError(f"--model {model}: {text}", USAGE) from None
    except ValueError as ex:  # an unknown provider: "--model foo/bar: unknown model provider"
        message = unknown_provider_message(ex)
        if message is None:  # e.g. openai-api/x: "must include a service prefix"
            message = f"--model {model}: {' '.join(str(ex).split())}"
        raise CommandError(message, USAGE) from None


def _waiting_for(model: str, url: str | None, config: Any) -> str:
    """What the run waits for: ``waiting for openai/gpt-4o (http://...): each request gives
    up after 120 s, at most 2 retries (--timeout, --max-retries)``."""
    where = f" ({url})" if url else ""
    return (
        f"waiting for {model}{where}: each request gives up after {config.timeout} s, at most "
        f"{config.max_retries} {'retry' if config.max_retries == 1 else 'retries'} "
        "(--timeout, --max-retries)"
    )


def _check_completed(logs: Sequence[Any], runs: int, folder: Path, begun: float) -> None:
    """One line, exit 1, when a run did not complete: it stopped with an error (named with
    its log), or the runs were interrupted (Ctrl-C, SIGTERM: Inspect's ``eval`` then returns
    no log, so the logs written since ``begun`` are named, from the folder)."""
    from med_evals.logs.files import list_log_files

    if len(logs) < runs:
        written = [f.name for f in list_log_files([folder]) if f.mtime >= begun - 1]
        where = ", ".join(written) if written else str(os.path.abspath(folder))
        raise CommandError("interrupted: the runs were cancelled and nothing was compared; "
                           f"their logs (status cancelled): {where}", FAILED)
    failed = [lg for lg in logs if lg.status != "success"]
    if failed:
        lines = "; ".join(f"{lg.eval.model}: {lg.error.message if lg.error else lg.status} "
                          f"({lg.location})" for lg in failed)
        raise CommandError(f"a run did not complete: {lines}", FAILED)
    for lg in logs:
        failures = _failed_requests(lg)
        if failures and len(failures) == len(lg.samples or []):
            raise CommandError(
                f"{lg.eval.model}: no reply: all {len(failures)} requests failed after "
                f"Inspect's retries ({failures[0]}); nothing compared (log {lg.location})",
                FAILED,
            )


def _failed_requests(log: Any) -> list[str]:
    """The provider errors of a run's samples, as recorded (``generate_error``: a request that
    still failed after Inspect's retries, scored ERROR as the study scored a failed call)."""
    from med_evals.solvers.generate import GENERATE_ERROR

    found = [(s.metadata or {}).get(GENERATE_ERROR) for s in log.samples or []]
    return [" ".join(str(e).split()) for e in found if e]


def failed_requests_note(log: Any) -> str | None:
    """``openai/gpt-4o: 3 of 12 requests failed after Inspect's retries ...``, for a run some
    of whose requests failed (None when none did)."""
    failures = _failed_requests(log)
    if not failures:
        return None
    n = len(failures)
    return (
        f"{log.eval.model}: {n} of {len(log.samples)} requests failed after Inspect's retries, "
        "scored ERROR as the study scored a failed call "
        f"({'first: ' if n > 1 else ''}{failures[0]}); log {log.location}"
    )


def _row(
    log: Any, labels: dict[str, str], sources: dict[str, str], condition: str,
    prices: Any = None,
) -> RunRow:
    """A run's row, read back from its log: the report's label of a replayed run
    (:func:`med_evals.logs.labels.model_name`), its headline numbers, tokens and cost."""
    from med_evals.logs.labels import model_name
    from med_evals.logs.runs import run_of

    run = run_of(log, str(log.location))  # the log eval() returned: not read again
    samples = {sid: v for sid, v in run.values.items()
               if str(v.get("condition", "")) == condition}
    values = list(samples.values())
    numbers = run.headline_values(values)
    label = labels.get(log.eval.model) or model_name(run)
    stats = log.stats
    seconds = (
        (datetime.fromisoformat(stats.completed_at) - datetime.fromisoformat(stats.started_at))
        .total_seconds()
        if stats.started_at and stats.completed_at
        else math.nan
    )
    return RunRow(
        label, sources[log.eval.model], len(values), numbers, str(log.location), seconds,
        run.usage(prices, values), samples, run.task_args,
    )


def _published(condition: str, reference: str | None) -> tuple[list[dict[str, str]], str]:
    from med_evals.commands.report.oncology_rct import published_condition
    from med_evals.data import published
    from med_evals.tasks import ONCOLOGY_RCT

    name = next(n for n in ONCOLOGY_RCT.reference_tables if n.startswith("oncology-table1"))
    got = published.load(name, reference)
    if got.table is None:
        return [], got.note
    rows = [
        r for r in got.table.to_dict("records") if published_condition(r["Condition"]) == condition
    ]
    if not rows:
        return [], f"Table 1 has no row for {condition} (it has the study's five conditions)"
    return rows, ""


def _report(
    logs: list[str], out: str | Path, reference: str | None, prices: Any = None
) -> tuple[Path | None, list[str]]:
    from med_evals.commands.report import ReportError, build_report

    try:
        result = build_report(logs, out, reference=reference, prices=prices)
    except ReportError as ex:
        return None, [f"no report: {ex}"]
    return result.html, [f"report: {w}" for w in result.warnings]


def _num(value: float) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.3f}"


def format_table(c: Comparison) -> str:
    """The console table: our runs' headline numbers, then the published rows as published."""
    from med_evals.tasks import ONCOLOGY_RCT

    heads = ONCOLOGY_RCT.headline  # the study's order
    n_trials = {r.n for r in c.runs}
    lines = [
        f"oncology_rct (Windisch et al. 2026): condition {c.condition}, "
        f"subset {c.subset or 'all'} ({', '.join(map(str, sorted(n_trials)))} trials)",
        "",
    ]
    several = len(c.trivial) > 1
    trivial = [(trivial_name(b, t, several), b.n, t.numbers) for b in c.trivial for t in b.rows]
    width = max([len(r.label) for r in c.runs] + [len(str(p["Model"])) + 12 for p in c.published]
                + [len(name) for name, _, _ in trivial] + [20])
    header = f"{'run':<{width}}  {'n':>4}  " + "  ".join(f"{h.display:>17}" for h in heads)
    if c.standing:
        header += f"  {BEATS:>{len(BEATS)}}"
    lines += [header, "-" * len(header)]
    for r in c.runs:
        cells = "  ".join(f"{_num(r.values[h.name]):>17}" for h in heads)
        line = f"{r.label:<{width}}  {r.n:>4}  {cells}"
        if c.standing:
            line += f"  {_beats(c.standing.get(r.label)):>{len(BEATS)}}"
        lines.append(line)
    for name, n, numbers in trivial:
        cells = "  ".join(f"{_num(numbers[h.name]):>17}" for h in heads)
        lines.append(f"{name:<{width}}  {n:>4}  {cells}")
    for p in c.published:
        cells = "  ".join(
            f"{p[PUBLISHED_COLUMNS[h.name]] + ('%' if h.name == 'valid_rate' else ''):>17}"
            for h in heads
        )
        lines.append(f"{str(p['Model']) + ' (published)':<{width}}  {'250':>4}  {cells}")
    notes = [
        "Macro-F1 and accuracy: over the valid replies; valid rate: share of all trials whose "
        "reply is exactly POSITIVE or NEGATIVE after trimming, in any case (the study's "
        "definitions; published rows: as printed in the paper, valid rate in %, 95% Wald "
        "intervals).",
        *(f"- {r.label}: {r.source}" for r in c.runs),
    ]
    if c.published:
        notes.append(f"- published rows: {PUBLISHED_SOURCE}")
    elif c.published_note:
        notes.append(f"- published rows not shown: {c.published_note}")
    notes += trivial_notes(c)
    if any("choices=" in r.label for r in c.runs):
        notes.append(
            "- choices=...: the reply is the more probable of the listed replies (our decoding "
            "option, not the study's): valid by construction; the probabilities are in the log"
        )
    lines.append("")
    lines += [textwrap.fill(n, 100, subsequent_indent="  ") for n in notes]
    lines += ranking_lines(c)
    lines += usage_lines(c.runs)
    lines.append("")
    lines += c.notes
    if c.report:
        lines.append(f"report: {c.report}")
    # absolute, without "..": Inspect's viewer answers 403 for a folder named with ".."
    lines.append(f"logs:   inspect view --log-dir {os.path.abspath(c.log_dir)}")
    return "\n".join(lines)


#: the column saying whether a run beats the best trivial row beyond sampling noise
BEATS = "beats trivial"


def _beats(b: dict[str, Any] | None) -> str:
    return "—" if b is None or b["beats"] is None else "yes" if b["beats"] else "no"


def trivial_name(block: Any, row: Any, several: bool) -> str:
    """``trivial: always POSITIVE``; with runs on different trials, whose trials too."""
    whose = f" ({', '.join(block.labels)})" if several else ""
    return f"trivial{whose}: {row.name}"


def trivial_notes(c: Comparison) -> list[str]:
    """What the trivial rows and the beats-trivial column are, and each run that does not beat
    the best trivial row (its difference and interval)."""
    if not c.trivial:
        return []
    best = {b.best.name for b in c.trivial if b.best is not None}
    notes = [
        "- trivial: the study's headline function on the same trials, each reply replaced by "
        "a constant answer (the majority class, each label) or drawn uniformly (the mean of "
        f"its draws); beats trivial: the run's macro-F1 minus the best constant row's "
        f"({', '.join(sorted(best)) or 'none'}) has a 95% paired bootstrap interval above 0 "
        f"({c.n_boot} resamples, seed 0, as in the report; docs/numbers.md)."
    ]
    for label, b in c.standing.items():
        if b is not None and b["beats"] is False:
            notes.append(
                f"- {label}: NOT better than {b['trivial']} beyond sampling noise: macro-F1 "
                f"{b['run']:.3f} against {b['trivial_value']:.3f}, difference "
                f"{b['difference']:+.3f} (95% CI {b['lo']:+.3f} to {b['hi']:+.3f})."
            )
    return notes


def ranking_lines(c: Comparison) -> list[str]:
    """Which runs can be told apart (three runs or more): their ranks by macro-F1, the ranks
    each could hold, and the runs each cannot be told apart from."""
    lines: list[str] = []
    for r in c.ranking:
        head = textwrap.fill(
            f"Which runs can be told apart on these {r.n} trials: McNemar's exact test on "
            "correctness for every pair, Holm-corrected together (α = 0.05); ranked by "
            "macro-F1 (docs/numbers.md):", 100)
        width = max(len(x.run) for x in r.ranked)
        header = f"{'rank':>4}  {'possible':<8}  {'run':<{width}}  cannot be told apart from"
        lines += ["", head, "", header, "-" * len(header)]
        for x in r.ranked:
            span = (str(x.best_rank) if x.best_rank == x.worst_rank
                    else f"{x.best_rank}-{x.worst_rank}")
            lines.append(f"{x.rank:>4}  {span:<8}  {x.run:<{width}}  "
                         f"{'; '.join(x.inseparable) or 'none'}")
    return lines


def usage_lines(runs: Sequence[RunRow]) -> list[str]:
    """The runs' tokens and cost, per role (:mod:`med_evals.logs.usage`, the report's and the gate's
    figures): a blank line, a title, the table, and what a missing cost means."""
    from med_evals.logs.usage import (
        MODEL_ROLE,
        TOKEN_FIELDS,
        cost_text,
        count_text,
        token_count,
    )

    shown = [r for r in runs if r.usage is not None]
    if not shown:
        return []
    fields = ["input_tokens", "output_tokens", "reasoning_tokens"]
    if any(token_count(role.usage, "input_tokens_cache_read") is not None
           for r in shown for role in r.usage.roles):
        fields.insert(1, "input_tokens_cache_read")  # where the log has them
    answers = sorted({r.usage.answer for r in shown})
    heads = ["role", *(TOKEN_FIELDS[f].removesuffix(" tokens") for f in fields), "cost",
             f"cost per {'/'.join(answers)}"]
    table: list[list[str]] = []
    for r in shown:
        u = r.usage
        for i, (role, cost) in enumerate(zip(u.roles, u.costs, strict=True)):
            if role.role != MODEL_ROLE and role.usage is None and cost.dollars is None:
                continue
            table.append([r.label if i == 0 else "", role.role,
                          *(count_text(token_count(role.usage, f)) for f in fields),
                          cost_text(cost), cost_text(u.per_answer) if i == 0 else ""])
    width = max(len(row[0]) for row in table + [["run"]])
    widths = [max(len(h), *(len(row[k + 1]) for row in table)) for k, h in enumerate(heads)]

    def line(cells: Sequence[str]) -> str:
        rest = "  ".join(c.rjust(w) if k else c.ljust(w)
                         for k, (c, w) in enumerate(zip(cells[1:], widths, strict=True)))
        return f"{cells[0]:<{width}}  {rest}".rstrip()

    out = ["", "Tokens and cost, from each run's log (docs/numbers.md#tokens-and-cost):", "",
           line(["run", *heads])]
    out.append("-" * len(out[-1]))
    out += [line(row) for row in table]
    missing = sorted({c.source for r in shown for c in [*r.usage.costs, r.usage.total]
                      if c.dollars is None and cost_text(c) == "—"})
    out += [f"- cost —: {m}" for m in missing]
    return out


def compare_command(model: str = DEFAULT_MODEL, model_args: Sequence[str] | None = None,
                    recorded: str = ",".join(DEFAULT_RECORDED),
                    condition: str = DEFAULT_CONDITION, subset: str = DEFAULT_SUBSET,
                    max_tokens: int | None = None, timeout: int = DEFAULT_TIMEOUT,
                    max_retries: int = DEFAULT_MAX_RETRIES, log_dir: str | None = None,
                    out: str | None = None, data_dir: str | None = None,
                    reference: str | None = None, prices: str | None = None) -> int:
    """``med-evals compare``: run ``model`` and replay the ``recorded`` models (comma-separated,
    or ``none``) on ``condition`` of ``subset`` (``all``: every trial), then print the table
    (:func:`run_compare`, :func:`format_table`); ``model_args``: ``NAME=VALUE`` strings,
    ``prices``: a prices file (read first: a bad one is a bad argument)."""
    from med_evals.logs.usage import read_prices

    priced = read_prices(prices)  # before any work: a bad file is a bad argument
    names = [] if recorded.strip() == "none" else [
        r.strip() for r in recorded.split(",") if r.strip()
    ]
    comparison = run_compare(
        model=model,
        model_args=_model_args(model_args, model),
        recorded=names,
        condition=condition,
        subset=None if subset == "all" else subset,
        data_dir=data_dir,
        log_dir=log_dir,
        report_dir=out,
        reference=reference,
        max_tokens=max_tokens,
        prices=priced,
        timeout=timeout,
        max_retries=max_retries,
    )
    from med_evals.outputs.text import terminal

    print(terminal(format_table(comparison)))  # run labels are model names read back
    return 0
