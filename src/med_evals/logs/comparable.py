"""What produced a run's numbers, and the one answer to "are these two runs comparable?".

A run's **setup** (:func:`setup_of`, from the provenance :func:`med_evals.logs.runs.provenance`
reads out of its log) is everything that may change its replies or its scores, but not *which*
samples it ran nor *which model* answered:

- the data pin (``dataset_revision``, ``data_checksum``), the prompt variant (``prompt``), what
  the gated numbers depend on in the study's code (``behaviour``, recorded in the log by the
  task: :meth:`med_evals.study.spec.Study.behaviour`: labels, parser, value function, the
  compute of each gated number; a log without it: the task's version, ``task_version``), its
  task arguments but those that change no per-sample value
  (:data:`~med_evals.study.spec.NON_SETUP_ARGS`), only select samples (:data:`SELECTION_ARGS`)
  or are a per-sample dimension compared condition by condition (``condition``), and the
  scorers' settings (``scorer_settings``);
- **every** generation setting the run was given (``generation``: Inspect's
  ``GenerateConfig``, task defaults and command-line flags alike: temperature, top_p, seed,
  the system message, max_tokens, reasoning settings, ...) except those that only say *how* a
  call is made (:data:`CALL_SETTINGS`: retries, timeouts, connections, cache, batch);
- the evaluation settings that change a sample's score (``eval``: epochs and their reducer,
  message, token and turn limits);
- every model role bound to the run, by the model bound to it (``model_roles``: a grader
  ``openai/gpt-4o`` and one ``anthropic/claude...`` are two setups).

Unknown settings are compared by default: a generation setting Inspect adds later is part of
the setup until it is named in :data:`CALL_SETTINGS`.

**What a gated number depends on** (:func:`gated_view`, :func:`gate_changes`): the gate
compares a setup less what only its ungated numbers depend on: the task arguments and the
options of the study's scorer that change only the generation scores (ROUGE-L, BERTScore:
:data:`GENERATION_ONLY_ARGS`, :data:`GENERATION_ONLY_OPTIONS`; Table 5's mentions), and the
settings of any other scorer (the agreement judge's): a baseline of the default run gates a
``-T bertscore=false`` run, the difference named in a note. Everything else above is compared,
the model roles too (a role the solver reads would change the replies; the log does not say
which roles a solver reads).

:func:`setup_changes` says what differs between two setups (``generation.temperature 0.0 ->
0.5``); an empty list means the same setup. Every reader of runs asks it: the shards of one run
must share a setup (:func:`med_evals.logs.runs.merge_shards`), the report never shows two
setups in one row (:func:`med_evals.logs.labels.run_labels` names every setting that differs),
and the gate compares a new run with a baseline run only under the same setup of what its gated
numbers depend on (:mod:`med_evals.commands.regress`). A baseline recorded before this module
(format 2) holds 8 of these fields; :func:`legacy_view` gives a new setup's view of those 8, and
the rest is reported as not recorded rather than as a change. Such a baseline names the task's
version, not its behaviour: a new run whose behaviour is that of the last version to write
format 2 (:data:`LEGACY_BEHAVIOUR`) is compared with it as of that version, so that adding a
metric (a version bump) leaves a stored format-2 baseline gating.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from med_evals.study.spec import NON_SETUP_ARGS, digest

#: Task arguments that choose which samples run, not how they are answered or scored: a run of
#: the ``ci`` subset and one of ``smoke`` share a setup (the gate compares their shared samples);
#: a run's conditions are a per-sample dimension (the gate compares each condition both runs
#: have, and gates none a baseline does not have); the shards of one run (``-T shard=i/N``:
#: :mod:`med_evals.study.shards`) share its setup, so that they merge into one run
SELECTION_ARGS = ("subset", "condition", "shard")
#: Generation settings that say how a call is made, not what is asked: never part of a setup
CALL_SETTINGS = frozenset({
    "max_retries", "timeout", "attempt_timeout", "stream_idle_timeout", "max_connections",
    "adaptive_connections", "cache", "batch", "cache_prompt", "extra_headers",
})
#: Inspect's evaluation settings that change what a sample's score is
EVAL_SETTINGS = (
    "epochs", "epochs_reducer", "message_limit", "token_limit", "token_limit_type", "turn_limit",
)
#: Model arguments (``-M``) that change no reply, only what is shown while a run runs: never a
#: difference between two runs (the embedded model's ``progress``: how often it prints)
DISPLAY_ONLY_MODEL_ARGS = frozenset({"progress"})
#: Task arguments that change only the generation scores (ROUGE-L and BERTScore of the reply
#: against the reference: MedREQAL, HealthFC), never a gated number: the prediction, target and
#: validity of every sample, and so every headline number, are the same with any of them
#: (tests/test_regress.py runs both ways); compared for the report, not by the gate
GENERATION_ONLY_ARGS = frozenset({
    "generation_scoring", "bertscore", "bertscore_model", "bertscore_layers",
    "bertscore_rescale",
})
#: Options of a study's scorer (Inspect's record of its arguments, ``scorer_settings``) that
#: change only the generation scores and Table 5's mention flags of its value (the verdict
#: scorer's ``reference_key``, BERTScore's encoder, ``mentions``), never a gated number
GENERATION_ONLY_OPTIONS = frozenset({
    "reference_key", "bertscore", "bertscore_model", "bertscore_layers", "bertscore_rescale",
    "bertscore_batch_size", "mentions",
})
#: the fields a baseline of format 2 recorded (:func:`legacy_view`)
LEGACY_FIELDS = (
    "dataset_revision", "data_checksum", "prompt", "task_version", "task_args",
    "scorer_settings", "temperature", "max_tokens",
)


#: The behaviour (:meth:`med_evals.study.spec.Study.behaviour`, by its :func:`digest`, one per label
#: set) of each task's last version to write baselines of format 2, computed by that version's
#: code (git b1a9ecb^, the last commit at these versions). Frozen: no later version writes
#: format 2. A format-2 baseline of such a version is compared with a new run whose logged
#: behaviour digests to one of these as if of that version (:func:`legacy_view`); a baseline of
#: an older version, or a new run whose behaviour differs, is a changed setup.
LEGACY_BEHAVIOUR: Mapping[str, tuple[str, frozenset[str]]] = {
    "medreqal": ("2.0.0", frozenset({"bde4bd6c4efa271f"})),
    "healthfc": ("2.0.0", frozenset({"bde4bd6c4efa271f"})),
    "medevidence": ("2.1.0", frozenset({"ff539ad90082c7ba", "84f68d1799cf9241"})),
    "oncology_rct": ("2.1.0", frozenset({"6be01c0e2101155e"})),
}


def legacy_version(provenance: Mapping[str, Any]) -> str | None:
    """The task version a format-2 baseline would have recorded for a new run of this
    provenance: the last version to write format 2 where the run's behaviour is that
    version's (:data:`LEGACY_BEHAVIOUR`), else the run's own version."""
    p = provenance
    version, behaviours = LEGACY_BEHAVIOUR.get(str(p.get("task")), (None, frozenset()))
    if version is not None and p.get("behaviour") and digest(p["behaviour"]) in behaviours:
        return version
    return p.get("task_version")


def reads_as_recorded(provenance: Mapping[str, Any], recorded: str | None) -> bool:
    """Whether a run of another task version than the one a format-2 baseline ``recorded``
    reads as of that version: it has the behaviour of that version (:func:`legacy_version`)."""
    return (recorded is not None and recorded != provenance.get("task_version")
            and legacy_version(provenance) == recorded)


def generation_of(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The reply-changing generation settings of a ``GenerateConfig`` dump (only those set)."""
    return {k: _plain(v) for k, v in sorted((config or {}).items())
            if v is not None and k not in CALL_SETTINGS}


def setup_of(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """A run's setup (see the module's docstring) from its provenance."""
    p = provenance
    args = {k: _plain(v) for k, v in (p.get("task_args") or {}).items()
            if k not in (*NON_SETUP_ARGS, *SELECTION_ARGS)}
    if "generation" in p:
        generation = generation_of(p.get("generation"))
    else:  # a run built by hand, or read before generation settings were kept
        generation = generation_of({"temperature": p.get("temperature"),
                                    "max_tokens": p.get("max_tokens")})
    evaluation = {k: _plain(v) for k, v in (p.get("eval_config") or {}).items()
                  if k in EVAL_SETTINGS and v is not None}
    if p.get("epochs") is not None:
        evaluation.setdefault("epochs", p.get("epochs"))
    code: dict[str, Any] = (
        {"behaviour": _plain(p["behaviour"])} if p.get("behaviour")
        else {"task_version": p.get("task_version")}
    )
    return {
        "dataset_revision": p.get("revision"),
        "data_checksum": p.get("data_checksum"),
        "prompt": p.get("prompt"),
        **code,
        "task_args": args,
        "scorer_settings": p.get("scorer_settings"),
        "generation": generation,
        "eval": evaluation,
        "model_roles": dict(p.get("model_roles") or {}),
    }


def legacy_view(provenance: Mapping[str, Any], recorded: str | None = None) -> dict[str, Any]:
    """A run's setup as a format-2 baseline recorded it (its 8 fields: the task version,
    temperature and max_tokens at the top level, every task argument but ``subset``,
    ``data_dir`` and ``metrics``; nor a shard's ``shard``), to compare a new run with such a
    baseline. The task version is :func:`legacy_version`'s: a run with the behaviour of the
    last version to write format 2 reads as of that version; against a baseline that
    ``recorded`` another version, as of its own (the change names the run's version)."""
    p = provenance
    generation = p.get("generation") or {}
    version = (legacy_version(p) if recorded is None
               else recorded if reads_as_recorded(p, recorded) else p.get("task_version"))
    return {
        "dataset_revision": p.get("revision"),
        "data_checksum": p.get("data_checksum"),
        "prompt": p.get("prompt"),
        "task_version": version,
        "task_args": {k: _plain(v) for k, v in (p.get("task_args") or {}).items()
                      if k not in (*NON_SETUP_ARGS, "subset", "shard")},
        "scorer_settings": p.get("scorer_settings"),
        "temperature": generation.get("temperature", p.get("temperature")),
        "max_tokens": generation.get("max_tokens", p.get("max_tokens")),
    }


def is_legacy(setup: Mapping[str, Any]) -> bool:
    """Whether a recorded setup is of a format-2 baseline (no ``generation`` field)."""
    return "generation" not in setup


def not_recorded(old: Mapping[str, Any], new: Mapping[str, Any] | None = None) -> list[str]:
    """The fields of ``new`` (default: today's setup) that the recorded setup ``old`` does not
    hold, and so were not compared: a format-2 baseline's missing fields, or ``behaviour``
    against a baseline recorded from logs older than it (which holds ``task_version``)."""
    if is_legacy(old):
        return [k for k in (new or setup_of({})) if k not in LEGACY_FIELDS]
    return [k for k in (new or setup_of({})) if k not in old]


def setup_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two setups, one ``field old -> new`` each (a nested field by its
    path: ``generation.temperature 0.0 -> 0.5``, ``task_args.labels five -> three``,
    ``model_roles.grader openai/gpt-4o -> openai/gpt-4.1``, ``behaviour.parser ... -> ...``);
    empty: the same setup. A field only one of them holds is not compared
    (:func:`not_recorded` names it): a baseline recorded from an older log holds the task's
    version where a new log records its ``behaviour``. A format-2 ``old`` is compared with
    :func:`legacy_view` of the new run's provenance instead (:mod:`med_evals.commands.regress`)."""
    out: list[str] = []
    for key in dict.fromkeys([*old, *new]):
        if key not in old or key not in new:
            continue
        a, b = old.get(key), new.get(key)
        if _same(a, b):
            continue
        if isinstance(a, Mapping) or isinstance(b, Mapping):
            out += [f"{key}.{sub} {_short(x)} -> {_short(y)}" for sub, x, y in _diff(a, b)]
        else:
            out.append(f"{key} {_short(a)} -> {_short(b)}")
    return out


def gated_view(setup: Mapping[str, Any], scorer: str | None) -> dict[str, Any]:
    """What the gated numbers depend on of a (new or recorded, format 2 or 3) setup: the setup
    less the task arguments in :data:`GENERATION_ONLY_ARGS`, and of its scorers' settings only
    those of the study's ``scorer`` (the gated numbers' scorer), less the options in
    :data:`GENERATION_ONLY_OPTIONS`. ``scorer`` None: every scorer's settings kept."""
    out = dict(setup)
    if isinstance(out.get("task_args"), Mapping):
        out["task_args"] = {k: v for k, v in out["task_args"].items()
                            if k not in GENERATION_ONLY_ARGS}
    settings = out.get("scorer_settings")
    if scorer is not None and isinstance(settings, Mapping):
        mine = settings.get(scorer)
        out["scorer_settings"] = (
            {scorer: {k: v for k, v in mine.items() if k not in GENERATION_ONLY_OPTIONS}}
            if isinstance(mine, Mapping) else {scorer: mine} if scorer in settings else {})
    return out


def gate_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], scorer: str | None
) -> tuple[list[str], list[str]]:
    """(what differs in what the gated numbers depend on: :func:`gated_view`, a changed setup
    for the gate; what else differs: information, the ungated numbers beside it are not
    comparable), each as :func:`setup_changes` names them."""
    gated = setup_changes(gated_view(old, scorer), gated_view(new, scorer))
    rest = [c for c in setup_changes(old, new) if c not in gated]
    return gated, rest


def _diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(sub-field path, old, new) for each leaf that differs between two mappings."""
    a, b = dict(a or {}), dict(b or {})
    out = []
    for sub in dict.fromkeys([*a, *b]):
        x, y = a.get(sub), b.get(sub)
        if _same(x, y):
            continue
        name = f"{path}{sub}"
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out += _diff(x, y, f"{name}.")
        else:
            out.append((name, x, y))
    return out


def setup_key(setup: Mapping[str, Any]) -> str:
    """A setup as one string (equal strings: the same setup)."""
    return json.dumps(setup, sort_keys=True, default=str)


def described(setup: Mapping[str, Any]) -> dict[str, str]:
    """A setup as short names and values, for labels: task arguments by their names, each
    generation and evaluation setting as the command-line flag that sets it (``--temperature``,
    ``--seed``, ``--system-message``, ``--epochs``; a task argument ``seed`` and Inspect's
    ``--seed`` are two things), each model role as ``--model-role <role>``, and ``prompt``,
    ``task version`` and ``data``."""
    out: dict[str, str] = {}
    for k, v in (setup.get("task_args") or {}).items():
        out[k] = _text(v)
    for group in ("generation", "eval"):
        for k, v in (setup.get(group) or {}).items():
            out[f"--{k.replace('_', '-')}"] = _text(v)
    for role, model in (setup.get("model_roles") or {}).items():
        out[f"--model-role {role}"] = _text(model)
    if setup.get("prompt") is not None:
        out.setdefault("prompt", _text(setup["prompt"]))
    if "task_version" in setup:
        out["task version"] = _text(setup.get("task_version"))
    if setup.get("behaviour"):
        out["code"] = digest(setup["behaviour"])[:8]
    out["data"] = _text(setup.get("data_checksum") or setup.get("dataset_revision"))[:12]
    return out


def _same(a: Any, b: Any) -> bool:
    return bool(_plain(a) == _plain(b))


def _plain(value: Any) -> Any:
    """Tuples as lists (a log read back gives lists where Inspect was given tuples)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    return str(value)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
