"""The one place that reaches Inspect's private API (``inspect_ai._...``).

What Inspect makes public is imported from its public modules wherever it is used
(``RegistryInfo`` and ``registry_info`` from ``inspect_ai.util``, ``compute_model_cost`` from
``inspect_ai.model``: :func:`med_evals.logs.usage.priced`). What inspect_ai 0.3.285 has no
public home for is reached here only, each import suppressed for the field's lint on its line
with the reason (``inspect-evals-lint``'s ``private_api_imports``); if a release moves one, only
this module changes, and ``tests/inspect_internals/test_compat.py`` fails first: one test per
name, each checking the behaviour relied on here.

- ``PrerequisiteError``: Inspect's error for a problem the user must fix before a run. Raised
  while ``inspect eval`` builds its tasks or models, the CLI prints its message alone, without a
  traceback, and exits 1 (but through its console, which ``--display none`` silences: see
  :class:`InputError`). Raised during a run, Inspect ends the task with status ``error`` and
  shows its usual error panel (with a traceback). Inspect raises it too (a required model role
  not bound): the solvers and judges let it through rather than record it as a provider failure.
- ``TerminateSampleError``: Inspect's control flow that ends one sample (an operator limit), let
  through by the solvers that record provider failures as ERROR
  (:data:`med_evals.solvers.generate.CONTROL_FLOW`).
- ``registry_unqualified_name``: a metric's or scorer's name as Inspect logs it (without the
  package): the study's scorer name in a log, a metric's name in the report.
- :func:`with_metrics`: give one scorer other metrics, as ``Task(metrics=...)`` does for all of a
  task's scorers. It sets the ``metrics`` entry of the scorer's registry metadata (public
  ``registry_info``), the entry Inspect's own ``scorer_metrics`` reads: the entry's name is
  Inspect's, not public.
- ``active_model``: the model under evaluation while Inspect builds a task (None outside a run;
  unlike ``get_model()``, it never creates one).
- ``active_generate_config``: the run's generate settings (the task's, then the eval's:
  ``--attempt-timeout``, ``--max-retries``, ...), which Inspect gives the model under evaluation
  in full but a role's model only in part (:func:`med_evals.scorers.judges.grader_config`).
- ``registry_find``: the model providers and tasks Inspect knows, to name the closest to a
  misspelt one (:func:`unknown_provider_message`, :func:`unknown_task_message`).
- :func:`vllm_url_given`, :func:`vllm_given_url`: whether a ``vllm/`` model was given a server
  URL, and which (an attribute of Inspect's provider, read before it connects).
- ``sample_active``: the sample running now (the replay provider serves the record of its id).
- ``scorer_metrics``, ``registry_params``: a scorer's declared metrics, and the arguments a
  metric was created with as Inspect records them (the tests check ours).
- :func:`local_server`: Inspect's module that starts ``vllm serve`` (the GPU bench's test
  checks how it passes ``-M tensor_parallel_size``).
- :func:`openai_batcher`: Inspect's OpenAI Batch-API client (tests/test_batch.py pins how it
  reads a failed request's line).
- :func:`inspect_command`, :func:`parse_cli_config`, :func:`parse_model_role_cli_args`:
  Inspect's command line (a click group) and its parsing of ``-T`` and ``--model-role``
  values, for the tests that run Inspect's own command line in process (imported when called:
  the command line imports every command's module); :func:`inspect_eval_command`, ``inspect
  eval``'s command alone, with which ``med-evals run`` parses the flags it hands ``inspect
  eval`` before it starts any process.
- :func:`inspect_main`: what ``python -m inspect_ai`` runs, for ``med-evals run``'s shard
  processes (:mod:`med_evals.commands.shard_process`).
- :func:`database_model_info`: Inspect's model information (prices included) looked up without
  creating the provider (:mod:`med_evals.logs.usage`).
- :func:`without_merged_shards`: ``inspect view``'s listing rule for shard logs a merged log
  covers (the tests of the shard layout: :mod:`med_evals.commands.merge_shards`).

Nothing outside this module imports a private name of Inspect (``inspect_ai._...``, or a
module of it whose name starts with ``_``): ``tests/test_layers.py`` fails otherwise, for the
package, its tests and its benchmarks.

The exception hook (:func:`install_excepthook`) reads the traceback of the error it receives
(the frames of Inspect's own functions: their names and locals) to say which flag a value came
from: the functions named there (``parse_cli_args``, ``_resolve_role_model``, ``eval_set``) are
Inspect's private code too, so they are named here only (``tests/test_errors.py`` runs
Inspect's command line into each of them).
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Sequence
from pathlib import Path, PurePath
from types import FrameType, TracebackType
from typing import Any

from inspect_ai._util.error import (
    PrerequisiteError,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the error for a problem a user must fix, whose message Inspect's command line prints without a traceback  # noqa: E501
)
from inspect_ai._util.exception import (
    TerminateSampleError,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the control flow that ends one sample, let through by the solvers that record provider failures  # noqa: E501
)
from inspect_ai._util.registry import (  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the registered providers and tasks (closest name to a misspelt one), a metric's creation arguments, the names a log gives  # noqa: E501
    registry_find,
    registry_params,
    registry_unqualified_name,
)
from inspect_ai.log._samples import (
    sample_active,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the sample running now, whose id and epoch the replay provider serves  # noqa: E501
)
from inspect_ai.model._generate_config import (
    active_generate_config,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the run's generate settings, which a role's model gets only in part  # noqa: E501
)
from inspect_ai.model._model import (
    active_model,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the model under evaluation while a task is built, None outside a run, never created  # noqa: E501
)
from inspect_ai.scorer import Metric, Scorer
from inspect_ai.scorer._scorer import (
    scorer_metrics,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: a scorer's declared metrics, read back by the tests of the metric sets  # noqa: E501
)
from inspect_ai.util import registry_info
from rich.markup import escape

__all__ = [
    "InputError",
    "active_generate_config",
    "active_model",
    "PrerequisiteError",
    "TerminateSampleError",
    "inspect_command",
    "parse_cli_config",
    "parse_model_role_cli_args",
    "registry_params",
    "registry_unqualified_name",
    "sample_active",
    "scorer_metrics",
    "with_metrics",
]


#: the entry of a scorer's registry metadata that holds its metrics (Inspect's ``SCORER_METRICS``)
_SCORER_METRICS = "metrics"


def with_metrics(scorer: Scorer, metrics: list[Metric | dict[str, list[Metric]]]) -> Scorer:
    """``scorer`` with ``metrics`` instead of the ones its decorator declares (this scorer
    only: ``Task(metrics=...)`` would override every scorer of the task, the judge's too)."""
    info = registry_info(scorer)
    # a new dict: the old one may be shared (Inspect builds one per scorer, but a caller's
    # metadata passed to it is not copied); "metrics" is the entry scorer_metrics reads
    info.metadata = {**info.metadata, _SCORER_METRICS: metrics}
    return scorer


class InputError(ValueError, PrerequisiteError):
    """Bad input a user can fix (a data file, a task parameter, a replay recording).

    A ``ValueError`` for Python callers; for ``inspect eval`` a ``PrerequisiteError``, so the
    command prints ``med_evals: <message>`` without a traceback and exits 1.

    Inspect prints an uncaught ``PrerequisiteError`` from its exception hook through its rich
    console, to stdout, and ``--display none`` makes that console quiet: the run exited 1 and
    printed nothing. So creating an InputError puts our hook (:func:`install_excepthook`) in
    front of whatever ``sys.excepthook`` is then (Inspect's, once ``inspect eval`` has started):
    an InputError that ends the process is printed by us, one line on stderr, whatever the
    display, and Inspect's hook is not called for it (so it is printed once); every other
    exception goes to the hook as before. A Python caller that catches the error sees nothing.
    """

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        # Inspect prints the message with rich markup: escape brackets such as "[methods]"
        self.message = escape(f"med_evals: {message}")
        install_excepthook()


def install_excepthook() -> None:
    """Put our hook in front of the current ``sys.excepthook`` (once: a hook already ours is
    left alone): an uncaught error that :func:`uncaught_message` knows is printed as one line,
    ``med_evals: <message>``, on stderr (the interpreter then exits 1, as Inspect's hook would);
    any other goes to the hook that was there. Called when an InputError is made, and when
    Inspect loads this package's entry point (which it does when a name it looks up, a task or
    a provider, is not among its own: a misspelt ``--model`` or task name).

    Not in place when Inspect parses ``-T``, ``-M`` and ``-S`` values: ``inspect eval`` reads
    them before it looks any name up, so nothing of this package has run yet
    (:func:`cli_value_message` is ready for when it is)."""
    current = sys.excepthook
    if getattr(current, "_med_evals_input_errors", False):
        return

    def hook(kind: type[BaseException], ex: BaseException, tb: TracebackType | None) -> None:
        message = uncaught_message(ex)
        if message is None:
            current(kind, ex, tb)
        else:
            print(f"med_evals: {message}", file=sys.stderr, flush=True)

    setattr(hook, "_med_evals_input_errors", True)  # noqa: B010 - an attribute of a function
    sys.excepthook = hook


def uncaught_message(ex: BaseException) -> str | None:
    """The one line our exception hook prints (after ``med_evals: ``) for an error that ends
    ``inspect eval``; None for an error that keeps Inspect's own report (a traceback, or a
    ``PrerequisiteError``'s message): an :class:`InputError`, an unknown model provider
    (:func:`unknown_provider_message`), a misspelt med_evals task (:func:`unknown_task_message`),
    a command-line value Inspect cannot read (:func:`cli_value_message`)."""
    if isinstance(ex, InputError):
        return str(ex)
    for message in (unknown_provider_message, unknown_task_message, cli_value_message,
                    log_dir_message):
        found = message(ex)
        if found is not None:
            return found
    return None


def _frames(ex: BaseException) -> list[FrameType]:
    """The frames of ``ex``'s traceback, from where it was caught (outermost) to where it was
    raised (innermost)."""
    frames, tb = [], ex.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _is_inspect(frame: FrameType, function: str, *path: str) -> bool:
    """Whether ``frame`` runs Inspect's ``function`` of the file ``inspect_ai/<path>``."""
    parts = ("inspect_ai", *path)
    return (
        frame.f_code.co_name == function
        and PurePath(frame.f_code.co_filename).parts[-len(parts) :] == parts
    )


#: Inspect's message for a provider it does not know (``get_model``)
_UNKNOWN_PROVIDER = re.compile(r"Model API (\S+) of model '(.+)' not recognized\.")


def _leaves(ex: BaseException) -> list[BaseException]:
    if isinstance(ex, BaseExceptionGroup):
        return [leaf for inner in ex.exceptions for leaf in _leaves(inner)]
    return [ex]


def unknown_provider_message(ex: BaseException) -> str | None:
    """One line for Inspect's error on an unknown ``--model`` provider (raised inside a task
    group, so Python would print it as an exception group: 213 lines), naming the closest
    provider Inspect knows; None for any other exception, which keeps its traceback.

    The model of a role (``--model-role grader=opnai/gpt-4o``) is named with its flag: Inspect
    makes each role's model in ``_resolve_role_model(role, model)``, a frame of the error's
    traceback."""
    leaves = _leaves(ex)
    if len(leaves) != 1 or not isinstance(leaves[0], ValueError):
        return None
    match = _UNKNOWN_PROVIDER.fullmatch(str(leaves[0]))
    if match is None:
        return None
    api, model = match.groups()
    roles = [
        f.f_locals.get("role")
        for f in _frames(leaves[0])
        if _is_inspect(f, "_resolve_role_model", "model", "_util.py")
    ]
    role = roles[-1] if roles else None
    flag = f"--model-role {role}={model}" if isinstance(role, str) else f"--model {model}"
    known = {
        registry_unqualified_name(registry_info(o))
        for o in registry_find(lambda info: info.type == "modelapi")
    }
    close = difflib.get_close_matches(api, sorted(known), n=1)
    hint = f"; did you mean {close[0]}/{model.split('/', 1)[1]}?" if close else ""
    return (
        f"{flag}: unknown model provider '{api}'{hint} (providers: Inspect's "
        "documentation of models, and embedded and replay from med_evals: docs/models.md)"
    )


#: Inspect's message when no task matches the names given (``eval``, ``eval_set``)
_NO_TASKS = "No inspect tasks were found"
#: the registry prefix of this package's tasks
_PACKAGE = "med_evals/"


def _requested_tasks(ex: BaseException) -> list[str]:
    """The task names the run was asked for: the ``tasks`` argument of the innermost frame of
    Inspect's that has one as names (``eval`` and ``eval_set`` pass it down as given)."""
    for frame in reversed(_frames(ex)):
        tasks = frame.f_locals.get("tasks")
        if isinstance(tasks, str):
            return [tasks]
        if isinstance(tasks, list | tuple) and tasks and all(isinstance(t, str) for t in tasks):
            return list(tasks)
    return []


def unknown_task_message(ex: BaseException) -> str | None:
    """One line for Inspect's "No inspect tasks were found at the specified paths." when a
    ``med_evals/<name>`` asked for is not a task of this package: the closest task's name, or
    the list of them; None for any other error, or a name outside this package."""
    leaves = _leaves(ex)
    if len(leaves) != 1 or not isinstance(leaves[0], PrerequisiteError):
        return None
    if _NO_TASKS not in str(leaves[0].message):
        return None
    ours = sorted(
        name
        for name in (registry_info(o).name for o in registry_find(lambda i: i.type == "task"))
        if name.startswith(_PACKAGE)
    )
    missing = [t for t in _requested_tasks(leaves[0]) if t.startswith(_PACKAGE) and t not in ours]
    if not missing:
        return None
    parts = []
    short = [name.removeprefix(_PACKAGE) for name in ours]
    for name in missing:
        close = difflib.get_close_matches(name.removeprefix(_PACKAGE), short, n=1)
        hint = (
            f"; did you mean {_PACKAGE}{close[0]}?"
            if close
            else f" (med_evals's tasks: {', '.join(ours)})"
        )
        parts.append(f"no task {name}{hint}")
    return "; ".join(parts)


def _flag_of(args: object, outer: Sequence[FrameType]) -> str | None:
    """The flag of the values ``args`` Inspect's ``parse_cli_args`` was given: the name its
    caller (the first frame outside the parsing functions, e.g. ``eval_exec``) holds them under
    (``t``: ``-T``, ``m``: ``-M``, ``s``: ``-S``, ``metadata``: ``--metadata``)."""
    for frame in reversed(outer):
        if frame.f_code.co_name in ("parse_cli_config", "parse_cli_args"):
            continue
        names = [name for name, value in frame.f_locals.items() if value is args]
        if not names:
            return None
        name = names[0]
        return f"-{name.upper()}" if len(name) == 1 else "--" + name.replace("_", "-")
    return None


def cli_value_message(ex: BaseException) -> str | None:
    """One line for a ``-T``/``-M``/``-S`` value Inspect's command line cannot read: it reads
    each value as YAML (``parse_cli_args``), before any task is loaded, and YAML's error was a
    traceback of 69 lines. ``2020-13-45`` has a YAML date's shape and YAML's date constructor
    rejects it (``month must be in 1..12``): "not a date"; any other YAML error is named, with
    the quoted form that passes the value as text. None for any other error."""
    frames = _frames(ex)
    at = next(
        (i for i in reversed(range(len(frames)))
         if _is_inspect(frames[i], "parse_cli_args", "_util", "config.py")),
        None,
    )  # fmt: skip
    if at is None:
        return None
    arg = frames[at].f_locals.get("arg")
    if not isinstance(arg, str) or "=" not in arg:
        return None
    flag = _flag_of(frames[at].f_locals.get("args"), frames[:at])
    shown = f"{flag} {arg}" if flag else arg
    if any(f.f_code.co_name == "construct_yaml_timestamp" for f in frames[at:]):
        return f"{shown}: not a date (YYYY-MM-DD)"
    problem = getattr(ex, "problem", None) or (str(ex).splitlines() or [type(ex).__name__])[0]
    name, _, value = arg.partition("=")
    quoted = ""
    if '"' not in value and "'" not in value:
        prefix = f"{flag} " if flag else ""
        quoted = f"; to pass it as text, quote it: {prefix}'{name}=\"{value}\"'"
    return f"{shown}: Inspect reads the value as YAML and cannot read it ({problem}){quoted}"


def log_dir_message(ex: BaseException) -> str | None:
    """One line for ``inspect eval-set --log-dir README.md`` when that is a file (or a file is
    in its way, ``README.md/logs``): eval-set makes its log folder before it builds any task, so
    no task's check can speak first (``inspect eval``'s: :func:`med_evals.study.checks.
    log_dir_problem`), and Inspect's ``FileExistsError`` was a traceback of 51 lines. None for
    any other error."""
    from med_evals.outputs.files import not_a_folder

    leaves = _leaves(ex)
    if len(leaves) != 1 or not isinstance(leaves[0], FileExistsError | NotADirectoryError):
        return None
    frame = next(
        (f for f in _frames(leaves[0]) if _is_inspect(f, "eval_set", "_eval", "evalset.py")), None
    )
    log_dir = frame.f_locals.get("log_dir") if frame is not None else None
    if not isinstance(log_dir, str) or "://" in log_dir:
        return None
    problem = not_a_folder(Path(log_dir))
    return None if problem is None else (
        f"--log-dir {log_dir}: {problem}; give the folder for the run's logs"
    )


def vllm_url_given(api: object) -> bool | None:
    """Whether Inspect's ``vllm/`` provider ``api`` was given a server URL (``--model-base-url``,
    ``-M base_url=``, ``-M port=``: it keeps it in ``_init_base_url`` until it connects, then
    in ``base_url``); None when this Inspect keeps it elsewhere (we cannot tell)."""
    if not hasattr(api, "_init_base_url"):
        return None
    return bool(getattr(api, "_init_base_url", None) or getattr(api, "base_url", None))


def vllm_given_url(api: object) -> str | None:
    """The server URL Inspect's ``vllm/`` provider ``api`` was given (``--model-base-url``,
    ``-M base_url=``, ``-M port=``), or None: none given (``VLLM_BASE_URL`` is read when it
    connects), another provider, or an Inspect that keeps it elsewhere."""
    url = getattr(api, "_init_base_url", None) if hasattr(api, "_init_base_url") else None
    return url if isinstance(url, str) and url else None


def inspect_command() -> Any:
    """Inspect's command line, the click group ``inspect`` runs (for in-process tests)."""
    from inspect_ai._cli.main import (
        inspect,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: Inspect's command line, run in process by the tests  # noqa: E501
    )

    return inspect


def parse_cli_config(args: Any, config: Any) -> dict[str, Any]:
    """What ``-T name=value`` (and a config file) hand a task: Inspect's own parsing."""
    from inspect_ai._cli.util import (
        parse_cli_config as parse,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: what -T values hand a task, for the tests  # noqa: E501
    )

    return dict(parse(args, config))


def parse_model_role_cli_args(args: Any) -> dict[str, Any]:
    """What ``--model-role role=model`` values become: Inspect's own parsing."""
    from inspect_ai._cli.util import (
        parse_model_role_cli_args as parse,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: what --model-role values become, for the tests  # noqa: E501
    )

    return dict(parse(args))


def openai_batcher() -> Any:
    """Inspect's ``OpenAIBatcher`` class (for the tests of ``--batch``)."""
    from inspect_ai.model._providers._openai_batch import (
        OpenAIBatcher,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the Batch-API client, whose reading of a failed request the tests pin  # noqa: E501
    )

    return OpenAIBatcher


def local_server() -> Any:
    """Inspect's ``inspect_ai._util.local_server`` module (starts local model servers)."""
    from inspect_ai._util import (
        local_server as module,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the module that starts vllm serve, for the GPU bench's test  # noqa: E501
    )

    return module


def database_model_info(model: str) -> Any:
    """Inspect's model information for a model name (``ModelInfo``, whose ``cost`` holds its
    prices where Inspect has them; None for a model it does not know): the custom entries of
    ``set_model_cost``/``set_model_info``, then its model database, looked up as Inspect does
    when it prices a call during a run, without creating the provider. The public
    ``get_model_info`` creates the provider for a name the database does not know: a replay
    model would read its recording, an embedded one its weights, an OpenAI-compatible one
    import its SDK (5 s here)."""
    from inspect_ai.model._model_info import (
        _get_model_info_direct,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: model information without creating the provider (get_model_info creates it)  # noqa: E501
    )

    return _get_model_info_direct(model)


def inspect_eval_command() -> Any:
    """``inspect eval``'s click command alone (its module only: :func:`inspect_command` imports
    every command's module, ``inspect info``'s among them, seconds more), for ``med-evals run``'s
    parse of the flags it hands ``inspect eval``."""
    from inspect_ai._cli.eval import (
        eval_command,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: inspect eval's click command, to parse med-evals run's flags before any process  # noqa: E501
    )

    return eval_command


def inspect_main() -> Any:
    """Inspect's command-line entry point, ``main`` of ``inspect_ai._cli.main`` (what ``python
    -m inspect_ai`` runs: its exception hook, its ``.env`` file, then its click group), for the
    shard processes of ``med-evals run`` (:mod:`med_evals.commands.shard_process`)."""
    from inspect_ai._cli.main import (
        main,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: Inspect's CLI entry point, run in med-evals run's shard processes  # noqa: E501
    )

    return main


def without_merged_shards(logs: list[Any]) -> list[Any]:
    """Inspect's listing rule of ``inspect view`` (``without_merged_shards``): a listing with
    the shard logs (``<name>.shards/<k>/``) that a finished, newer merged log (``<name>.eval``)
    covers left out; for the tests of the shard layout (:mod:`med_evals.commands.merge_shards`)."""
    from inspect_ai.log._file import (
        without_merged_shards as rule,  # inspect-evals-lint: ignore[private_api_imports] -- no public API in inspect_ai 0.3.285: the viewer's rule for hiding merged shard logs, which the tests of our merged log check  # noqa: E501
    )

    return rule(logs)
