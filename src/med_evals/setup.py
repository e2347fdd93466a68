"""What produced a run's numbers, and the one answer to "are these two runs comparable?".

A run's **setup** (:func:`setup_of`, from the provenance :func:`med_evals.logs.provenance` reads
out of its log) is everything that may change its replies or its scores, but not *which*
samples it ran nor *which model* answered:

- the data pin (``dataset_revision``, ``data_checksum``), the prompt variant (``prompt``), the
  task's version (``task_version``), its task arguments but those that change no per-sample
  value (:data:`~med_evals.study.NON_SETUP_ARGS`) or only select samples
  (:data:`SELECTION_ARGS`), and the scorers' settings (``scorer_settings``);
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

:func:`setup_changes` says what differs between two setups (``generation.temperature 0.0 ->
0.5``); an empty list means the same setup. Every reader of runs asks it: the shards of one run
must share a setup (:func:`med_evals.logs.merge_shards`), the report never shows two setups in
one row (:func:`med_evals.report.runs.run_labels` names every setting that differs), and the
gate compares a new run with a baseline run only under the same setup
(:mod:`med_evals.regress`). A baseline recorded before this module (format 2) holds 8 of these
fields; :func:`legacy_view` gives a new setup's view of those 8, and the rest is reported as not
recorded rather than as a change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from med_evals.study import NON_SETUP_ARGS

#: Task arguments that choose which samples run, not how they are answered or scored: a run of
#: the ``ci`` subset and one of ``smoke`` share a setup (the gate compares their shared samples)
SELECTION_ARGS = ("subset",)
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
#: the fields a baseline of format 2 recorded (:func:`legacy_view`)
LEGACY_FIELDS = (
    "dataset_revision", "data_checksum", "prompt", "task_version", "task_args",
    "scorer_settings", "temperature", "max_tokens",
)


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
    return {
        "dataset_revision": p.get("revision"),
        "data_checksum": p.get("data_checksum"),
        "prompt": p.get("prompt"),
        "task_version": p.get("task_version"),
        "task_args": args,
        "scorer_settings": p.get("scorer_settings"),
        "generation": generation,
        "eval": evaluation,
        "model_roles": dict(p.get("model_roles") or {}),
    }


def legacy_view(setup: Mapping[str, Any]) -> dict[str, Any]:
    """A setup as a format-2 baseline recorded it (its 8 fields: temperature and max_tokens
    at the top level), to compare a new run with such a baseline."""
    generation = setup.get("generation") or {}
    out = {k: setup.get(k) for k in LEGACY_FIELDS[:6]}
    out["temperature"] = generation.get("temperature")
    out["max_tokens"] = generation.get("max_tokens")
    return out


def is_legacy(setup: Mapping[str, Any]) -> bool:
    """Whether a recorded setup is of a format-2 baseline (no ``generation`` field)."""
    return "generation" not in setup


def not_recorded(old: Mapping[str, Any]) -> list[str]:
    """The fields of today's setup that a legacy setup ``old`` did not record."""
    if not is_legacy(old):
        return []
    return [k for k in setup_of({}) if k not in LEGACY_FIELDS]


def setup_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two setups, one ``field old -> new`` each (a nested field by its
    path: ``generation.temperature 0.0 -> 0.5``, ``task_args.condition evidence ->
    closed_book``, ``model_roles.grader openai/gpt-4o -> openai/gpt-4.1``); empty: the same
    setup. ``old`` may be a legacy (format-2) setup: compared on its fields
    (:func:`legacy_view`); :func:`not_recorded` names the others."""
    if is_legacy(old) and not is_legacy(new):
        new = legacy_view(new)
    out: list[str] = []
    for key in dict.fromkeys([*old, *new]):
        a, b = old.get(key), new.get(key)
        if _same(a, b):
            continue
        if isinstance(a, Mapping) or isinstance(b, Mapping):
            a, b = dict(a or {}), dict(b or {})
            out += [f"{key}.{sub} {_short(a.get(sub))} -> {_short(b.get(sub))}"
                    for sub in dict.fromkeys([*a, *b]) if not _same(a.get(sub), b.get(sub))]
        else:
            out.append(f"{key} {_short(a)} -> {_short(b)}")
    return out


def same_setup(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return not setup_changes(a, b)


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
    out["task version"] = _text(setup.get("task_version"))
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
