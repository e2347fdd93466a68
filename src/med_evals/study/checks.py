"""What every task checks once its samples are built, before Inspect runs any of them.

- Inspect's run options a task can see that would run something else than asked, or nothing:
  ``--epochs 0`` (Inspect's command line reads 0 as not given and runs the task's own epochs)
  and ``--max-connections 0`` (no request is ever sent: the run waits forever) stop the run
  with one line (:func:`run_option_problem`). The command line's values are read from its
  click context (the flag as given, or its environment variable), a Python caller's
  ``max_connections`` from the model under evaluation; Inspect itself refuses ``epochs=0``
  from Python.
- ``--epochs-reducer`` (or ``--no-epochs-reducer``) other than the task's own reducer (the
  studies': the majority label) stops the run with one line (:func:`epochs_reducer_problem`):
  Inspect's reducers would reduce a study's label scores wrongly, silently.
- ``--model vllm/<name>`` with no server URL and no vLLM installed to start one stops with one
  line saying how to give either (:func:`med_evals.models.providers.vllm_server_problem`).
- A served model whose server does not answer stops the run within seconds, one line
  (:func:`reach_problem`): ``inspect eval`` on a server not there (a refused connection, an
  unknown host) printed its header and then nothing for minutes, Inspect retrying without end.
  The model under evaluation is probed (when the task calls it) and each bound role the task
  reads (its graders), each server once (:mod:`med_evals.models.reach`: only a URL the user
  gave; never ``mockllm/``, ``replay/``, ``embedded/``); ``MED_EVALS_SKIP_PROBE=1`` skips it.
- A model role that no scorer or solver of the task reads (``--model-role gradr_2=...``) stops
  the run with one line naming the closest role the task reads (:func:`role_problem`): Inspect
  binds any role name and says nothing when no code asks for it, so a misspelt grader ran a
  one-grader "jury" and a grader bound to MedREQAL without ``-T judge=true`` judged nothing.
  Each task says which roles it reads (:class:`Roles`; none by default).
- A replayed model (``--model replay/<file>``) must have a record for at least one sample of
  the task (:func:`med_evals.models.replay.check_covers`): a recording of another task, or with
  other sample ids, stops the run with one line instead of failing every sample.
- A run of no sample says so. ``--limit 0`` (or a selection that keeps nothing) reaches no code
  of the task: Inspect slices the dataset after building it, runs nothing, writes a log with
  status ``success`` and no results, and exits 0; its ``(0 samples)`` header is the only sign,
  and ``--display none`` hides it. Nothing of ours can stop that run: the task never sees
  ``--limit``, and Inspect catches every exception a hook raises. So the task registers an
  Inspect hook (:class:`NoSampleNotice`) that prints, at the end of the run, one line on stderr
  for each med_evals log that ran no sample. It is registered when a task is first built, not
  when the package is imported: Inspect announces the registered hooks ("hooks enabled") when
  it starts, and this one should not be announced on every run of every Inspect task.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import click
from click.core import ParameterSource
from inspect_ai.dataset import Sample
from inspect_ai.hooks import Hooks, RunEnd, hooks
from inspect_ai.log import EvalLog
from inspect_ai.model import Model, ModelName, model_roles

from med_evals.inspect_internals.compat import InputError, active_model
from med_evals.logs.files import scheme
from med_evals.models.providers import vllm_server_problem
from med_evals.models.reach import SKIP_PROBE, probe_skipped, served_url, unreachable
from med_evals.models.replay import check_covers
from med_evals.outputs.files import not_a_folder
from med_evals.scorers.judges import GRADER_ROLE, grader_number

PREFIX = "med_evals/"


def _reads_none(role: str) -> bool:
    return False


@dataclass(frozen=True)
class Roles:
    """The model roles a task's scorers and solvers read: ``reads(role)`` says whether one is;
    ``names`` are offered as the closest to a role it does not read, ``shown`` lists them for a
    user, ``hint`` says what else to know (how to make the task read one)."""

    reads: Callable[[str], bool] = _reads_none
    names: tuple[str, ...] = ()
    shown: str = ""
    hint: str = ""


#: a task that reads no role
NO_ROLES = Roles()
#: the judges' roles: ``grader``, ``grader_2``, ``grader_3``, ... (:mod:`med_evals.scorers.judges`)
JURY = Roles(
    reads=lambda role: grader_number(role) is not None,
    names=(GRADER_ROLE, *(f"{GRADER_ROLE}_{n}" for n in range(2, 10))),
    shown="grader, grader_2, grader_3, ...",
)


def before_run(
    task: str, samples: Sequence[Sample], model_called: bool = True, roles: Roles = NO_ROLES,
    reducer: str = "majority_label",
) -> None:
    """The checks every task makes on its samples (see the module's docstring);
    ``model_called=False`` for a task whose solver never calls the model under evaluation;
    ``roles``: the model roles its scorers and solvers read; ``reducer``: the registered name
    of the task's own epoch reducer."""
    problem = (run_option_problem(task) or log_dir_problem(task)
               or epochs_reducer_problem(task, reducer) or role_problem(task, roles))
    if problem is None and model_called:
        problem = vllm_server_problem(active_model())
    if problem is None:
        problem = reach_problem(task, model_called, roles)
    if problem is not None:
        raise InputError(problem)
    if model_called:
        check_covers(task, [str(s.id) for s in samples])
    _register_no_sample_notice()


def _served(model_called: bool, roles: Roles) -> list[tuple[str, Model]]:
    """The models a run will send requests to, each with the flag that named it: the model under
    evaluation (when the task calls it), then each bound role the task reads."""
    out = []
    model = active_model()
    if model_called and model is not None:
        out.append((f"--model {model}", model))
    for role, bound in model_roles().items():
        if roles.reads(role):
            out += [(f"--model-role {role}={m}", m)
                    for m in (bound if isinstance(bound, list) else [bound])]
    return out


def reach_problem(task: str, model_called: bool = True, roles: Roles = NO_ROLES) -> str | None:
    """``<task>: --model <model>: cannot reach <url> (connection refused); nothing was run ...``
    for the first served model of the run whose server does not answer
    (:func:`med_evals.models.reach.unreachable`), or None. Each server is probed once; none with
    ``MED_EVALS_SKIP_PROBE=1``."""
    urls: dict[str, str] = {}  # url -> the flag of its first model
    for shown, model in _served(model_called, roles):
        url = served_url(model.api, ModelName(model).api)
        if url is not None:
            urls.setdefault(url, shown)
    if not urls or probe_skipped():
        return None
    for url, shown in urls.items():
        why = unreachable(url)
        if why:
            return (f"{task}: {shown}: cannot reach {url} ({why}); nothing was run "
                    f"({SKIP_PROBE}=1 runs without this check)")
    return None


def _bound(model: Model | list[Model]) -> str:
    return ", ".join(str(m) for m in model) if isinstance(model, list) else str(model)


def role_problem(task: str, roles: Roles) -> str | None:
    """``<task>: --model-role <role>=<model>: ...`` for the first role bound to the run that the
    task does not read (its closest role named, where one is close), or None."""
    for role, model in model_roles().items():
        if roles.reads(role):
            continue
        given = f"{task}: --model-role {role}={_bound(model)}"
        if not roles.names:
            return f"{given}: this task reads no model role" + (
                f" ({roles.hint})" if roles.hint else ""
            )
        close = difflib.get_close_matches(role, roles.names, n=1)
        closest = f"; did you mean {close[0]}?" if close else ""
        hint = f"; {roles.hint}" if roles.hint else ""
        return (
            f"{given}: no scorer or solver of this task reads the role {role!r}{closest} "
            f"(its roles: {roles.shown}{hint})"
        )
    return None


#: Inspect's run options that must be at least 1, and what 0 does
AT_LEAST_ONE = {
    "epochs": "Inspect reads 0 as not given and would run the task's own number of epochs",
    "max_connections": "with 0 no request is ever sent: the run waits forever",
}


def _command_line_options() -> dict[str, tuple[str, int]]:
    """The options of :data:`AT_LEAST_ONE` that Inspect's command line (``inspect eval``,
    ``eval-set``, ``eval-retry``), running now, was given: name -> (as given, value)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or not getattr(ctx.command.callback, "__module__", "").startswith("inspect_ai"):
        return {}
    given = {}
    for name in AT_LEAST_ONE:
        value = ctx.params.get(name)
        if not isinstance(value, int):
            continue
        shown = f"--{name.replace('_', '-')} {value}"
        if ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT:
            param = next((p for p in ctx.command.params if p.name == name), None)
            envvar = param.envvar if param is not None else None
            names = [envvar] if isinstance(envvar, str) else list(envvar or [])
            shown = f"{names[0]}={value}" if names else shown
        given[name] = (shown, value)
    return given


def run_option_problem(task: str) -> str | None:
    """``<task>: --epochs 0: must be at least 1 (...)`` for a run option below 1 (see the
    module's docstring), or None."""
    given = _command_line_options()
    model = active_model()
    if "max_connections" not in given and model is not None:
        n = model.config.max_connections
        if n is not None:
            given["max_connections"] = (f"max_connections={n}", n)
    for name, (shown, value) in given.items():
        if value < 1:
            why = f" ({AT_LEAST_ONE[name]})" if value == 0 else ""
            return f"{task}: {shown}: must be at least 1{why}"
    return None


def epochs_reducer_problem(task: str, reducer: str) -> str | None:
    """``<task>: --epochs-reducer mean: ...`` when Inspect's command line was given an epoch
    reducer other than the task's own ``reducer`` (or ``--no-epochs-reducer``); else None.

    A study's scores are labels (a dict of them per sample), which only its own reducer
    combines across epochs (the majority label); Inspect's ``mean``, ``mode``, ``max``, ...
    would reduce each entry of the dict apart and silently give numbers of another
    definition. Only the command line's flag can be seen here: Inspect replaces the task's
    reducer after the task is built (``inspect_ai._eval.run.eval_run``) and gives the task no
    public view of the run's ``Epochs``, so a Python caller's ``eval(..., epochs=Epochs(3,
    "mean"))`` is not caught."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or not getattr(ctx.command.callback, "__module__", "").startswith("inspect_ai"):
        return None
    ours = f"this task reduces its epochs with its own {reducer} (the study's definition)"
    if ctx.params.get("no_epochs_reducer"):
        return f"{task}: --no-epochs-reducer: {ours}; drop the flag"
    value = ctx.params.get("epochs_reducer")
    if not isinstance(value, str) or not value.strip():
        return None
    given = [n.strip() for n in value.split(",") if n.strip()]
    if given and all(n in (reducer, f"med_evals/{reducer}") for n in given):
        return None
    source = ctx.get_parameter_source("epochs_reducer")
    shown = (f"INSPECT_EVAL_EPOCHS_REDUCER={value}" if source is ParameterSource.ENVIRONMENT
             else f"--epochs-reducer {value}")
    return (f"{task}: {shown}: {ours}; Inspect's reducers would reduce each label score "
            "apart, giving numbers of another definition; drop the flag")


def log_dir_problem(task: str) -> str | None:
    """``<task>: --log-dir README.md: is a file, not a folder (...)``, when the local log folder
    Inspect's command line was given (``--log-dir``, ``INSPECT_LOG_DIR``, or its default
    ``./logs``) is a file, or has a file in its way (``README.md/logs``); else None.

    ``inspect eval`` builds the tasks before it makes the log folder, so this line comes first;
    it was Inspect's ``FileExistsError`` when it made the folder, a traceback of 209 lines.
    ``inspect eval-set`` makes the folder before it builds any task: its error is shortened by
    the package's exception hook (:func:`med_evals.inspect_internals.compat.log_dir_message`). A URI
    (``s3://...``) is left to Inspect."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or not getattr(ctx.command.callback, "__module__", "").startswith("inspect_ai"):
        return None
    value = ctx.params.get("log_dir")
    if not isinstance(value, str) or not value or scheme(value) not in ("", "file"):
        return None
    path = Path(url2pathname(urlparse(value).path)) if scheme(value) else Path(value)
    problem = not_a_folder(path)
    if problem is None:
        return None
    source = ctx.get_parameter_source("log_dir")
    shown = (
        f"INSPECT_LOG_DIR={value}" if source is ParameterSource.ENVIRONMENT
        else f"--log-dir {value} (Inspect's default)" if source is ParameterSource.DEFAULT
        else f"--log-dir {value}"
    )
    return f"{task}: {shown}: {problem}; give the folder for the run's logs"


def no_sample_message(log: EvalLog) -> str | None:
    """The line for a finished med_evals log that ran no sample (None for any other log)."""
    spec = log.eval
    if not spec.task.startswith(PREFIX) or log.status != "success":
        return None
    if spec.dataset.sample_ids or (log.results and log.results.total_samples):
        return None
    limit = spec.config.limit
    empty_range = isinstance(limit, list | tuple) and len(limit) == 2 and limit[0] >= limit[1]
    why = f"--limit {limit}" if limit == 0 or empty_range else "no sample selected"
    task = spec.task.removeprefix(PREFIX)
    return f"med_evals: {task}: 0 samples ({why}): nothing was evaluated; log {log.location}"


class NoSampleNotice(Hooks):
    """Prints :func:`no_sample_message` on stderr at the end of a run, whatever the display."""

    async def on_run_end(self, data: RunEnd) -> None:
        for log in data.logs:
            message = no_sample_message(log)
            if message:
                print(message, file=sys.stderr, flush=True)


_registered = False


def _register_no_sample_notice() -> None:
    global _registered
    if not _registered:
        hooks(name="no_sample_notice", description="says when a med_evals run ran no sample")(
            NoSampleNotice
        )
        _registered = True
