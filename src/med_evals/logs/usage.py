"""Tokens and cost of a run, per role, from its log: one function per number, for
``med-evals report``, ``med-evals compare`` and ``med-evals baseline``/``regress`` alike.

**Roles.** ``model`` is the model under test (``log.eval.model``); ``grader``, ``grader_2``, ...
are the roles bound to the run (``log.eval.model_roles``; a judge's graders are also its task
metadata's ``graders``); ``other`` is any other model the log counted. The tokens of each come
from the log: Inspect counts every model call's usage by model name (``log.stats.model_usage``)
and by role (``log.stats.role_usage``). A role's tokens are its ``role_usage``; the model under
test's are its model name's ``model_usage`` less those of the roles bound to the same model. A
count the log does not hold (a provider that reports no usage, replies from Inspect's cache,
a replay file without ``usage``, two roles of one model that Inspect did not count apart) is
``None``: shown as missing, never as 0.

**Tokens** are Inspect's :class:`~inspect_ai.model.ModelUsage` fields as the provider reported
them: ``input_tokens`` (input at the full rate: cached input not included), ``output_tokens``
(reasoning included, as OpenAI and Anthropic count it), ``reasoning_tokens``, and, where the
provider reports them, ``input_tokens_cache_read`` and ``input_tokens_cache_write``.

**Cost** (:func:`role_cost`), in dollars, the first of: the prices given with ``--prices FILE``
for the model's name as the log names it (:func:`read_prices`: the shape of Inspect's
``--model-cost-config`` file); the ``total_cost`` Inspect put in the log (it prices each call
when it has the model's prices: ``--model-cost-config``, ``set_model_cost``); Inspect's own
model information (:func:`~med_evals.inspect_internals.compat.database_model_info`). The price of
a usage is Inspect's own formula (:func:`priced`: ``inspect_ai.model.compute_model_cost``). A
model served by ``replay/`` costs
nothing here: its cost is the recording's (``none (replayed)``). A run's cost
(:func:`run_cost`) is the sum of its roles' costs, unknown when one role's is; **cost per
answer** (:func:`cost_per_answer`) divides it by :func:`answer_count`: the correct answers, or
for the oncology study the valid replies (:data:`PER_VALID_REPLY`; docs/numbers.md, "Tokens and
cost").
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from inspect_ai.event import ModelEvent
from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import ModelCost, ModelUsage, compute_model_cost
from pydantic import ValidationError

from med_evals.inspect_internals.compat import database_model_info
from med_evals.logs.files import read_header
from med_evals.outputs.exit_codes import USAGE, CommandError
from med_evals.tasks import ONCOLOGY_RCT, Study

MODEL_ROLE = "model"
OTHER_ROLE = "other"
REPLAY_PREFIX = "replay/"
MISSING = "—"
#: the cost of a model served by ``replay/``: the recording's, not ours
REPLAYED = "none (replayed)"
#: price sources, in the order :func:`role_cost` tries them
FROM_PRICES, FROM_LOG, FROM_INSPECT = "--prices", "Inspect (in the log)", "Inspect's model data"
#: the studies whose cost is divided by the valid replies instead of the correct answers: the
#: oncology study's numbers are over valid replies (accuracy and F1 among them, the valid rate
#: beside), so a run pays for each valid reply it gets
PER_VALID_REPLY = frozenset({ONCOLOGY_RCT.task})
#: the token fields shown, with their names in tables
TOKEN_FIELDS = {
    "input_tokens": "input tokens",
    "input_tokens_cache_read": "cached input tokens",
    "input_tokens_cache_write": "cache write tokens",
    "output_tokens": "output tokens",
    "reasoning_tokens": "reasoning tokens",
}
#: the fields a log holds only when the provider reports them: a column only where one has them
CACHE_FIELDS = ("input_tokens_cache_read", "input_tokens_cache_write")

Prices = Mapping[str, ModelCost]


@dataclass(frozen=True)
class RoleUsage:
    """One role of a run: its model (as the log names it) and its tokens (``None``: the log
    does not hold them); ``calls``: the role's calls in the log's samples, ``reported``: how
    many of them came with their usage (``None``: not counted, a log read without samples)."""

    role: str
    model: str
    usage: ModelUsage | None
    calls: int | None = None
    reported: int | None = None

    @property
    def partial(self) -> bool:
        """Tokens summed over only some of the role's calls (the others reported none)."""
        return (self.usage is not None and self.calls is not None
                and self.reported is not None and self.reported < self.calls)

    def partial_text(self) -> str:
        """``usage reported on 9 of 20 calls`` (empty when not partial)."""
        return f"usage reported on {self.reported} of {self.calls} calls" if self.partial else ""


@dataclass(frozen=True)
class Cost:
    """Dollars (``None``: not known here) and where the price came from, or why there is none;
    ``partial``: the dollars are of only some calls (a lower bound)."""

    dollars: float | None
    source: str
    partial: bool = False


@dataclass(frozen=True)
class RunUsage:
    """Every token and cost figure of one run: per role, its total, and per answer."""

    roles: list[RoleUsage]
    costs: list[Cost]  # one per role, in the same order
    total: Cost
    #: what the cost is divided by: "correct answer" or "valid reply"
    answer: str
    answers: int
    per_answer: Cost
    #: the logs the figures are summed over (1: one attempt; more: a resumed eval's attempts,
    #: or a sharded run's, each shard one attempt or more)
    attempts: int = 1
    #: what no log could show (calls a killed attempt made after its last flush, in flight at
    #: the kill): the figures are a lower bound when set
    unknown: str | None = None
    #: the shards the attempts are of (1: one eval; a shard is not an attempt)
    shards: int = 1


# --- prices ----------------------------------------------------------------------------------


def read_prices(path: str | Path | None) -> dict[str, ModelCost]:
    """A prices file: model name -> ``{input, output, input_cache_write, input_cache_read}`` in
    dollars per million tokens (Inspect's :class:`~inspect_ai.model.ModelCost`), YAML or JSON,
    read as Inspect reads its ``--model-cost-config`` file (JSON when it starts with ``{``, else
    YAML; every field required). ``None``: no prices. A file that cannot be read or is not of
    this shape is a :class:`CommandError` (exit 2) naming it."""
    if path is None:
        return {}
    where = f"--prices {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as ex:
        raise CommandError(f"{where}: cannot read it ({getattr(ex, 'strerror', None) or ex})",
                           USAGE) from None
    try:
        data = json.loads(text) if text.strip().startswith("{") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as ex:
        raise CommandError(f"{where}: not JSON or YAML ({' '.join(str(ex).split())[:200]})",
                           USAGE) from None
    if not isinstance(data, dict) or not data:
        raise CommandError(f"{where}: expected model name -> {{input, output, "
                           "input_cache_write, input_cache_read}} ($ per million tokens)", USAGE)
    out: dict[str, ModelCost] = {}
    for name, cost in data.items():
        bad = _bad_price(cost)
        if bad:
            raise CommandError(f"{where}: model {name!r}: {bad}: expected a price from 0 to "
                               f"{MAX_PRICE:,.0f} ($ per million tokens) for each of input, "
                               "output, input_cache_write, input_cache_read", USAGE)
        try:
            out[str(name)] = ModelCost.model_validate(cost)
        except ValidationError as ex:
            fields = ", ".join(".".join(map(str, e["loc"])) or "value" for e in ex.errors())
            raise CommandError(f"{where}: model {name!r}: {fields}: expected a number for each of "
                               "input, output, input_cache_write, input_cache_read ($ per "
                               "million tokens)", USAGE) from None
    return out


#: the dearest price taken, in $ per million tokens ($1 a token): over a thousand times the
#: dearest listed price today (hundreds of dollars per million output tokens). Above it a price
#: is a unit mistake (dollars per token written as per million) or a placeholder (``1e308``,
#: whose cost of any run overflows to ``$inf``); refused, naming the model and the field
MAX_PRICE = 1_000_000.0


def _bad_price(cost: Any) -> str | None:
    """What is wrong with one model's prices beyond what :class:`ModelCost` checks: a field
    that is ``true``/``false``, NaN, infinite, negative or above :data:`MAX_PRICE` (pydantic
    takes them all as prices); None otherwise (text that is no number and missing fields are
    :class:`ModelCost`'s to name)."""
    if not isinstance(cost, Mapping):
        return None
    for field_name, value in cost.items():
        if isinstance(value, bool):
            return f"{field_name} {str(value).lower()} is not a number"
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if not math.isfinite(number):
            return f"{field_name} {value!r} is not a finite number"
        if number < 0:
            return f"{field_name} {value!r} is negative"
        if number > MAX_PRICE:
            return f"{field_name} {value} is above {MAX_PRICE:,.0f} ($1 a token)"
    return None


def _closest_entry(model: str, prices: Prices | None) -> str:
    """``; the --prices entry 'openai/gpt4o' is not its name (its closest)`` when an entry of
    the prices file looks like ``model`` (a typo), else empty."""
    close = difflib.get_close_matches(model, list(prices or {}), n=1, cutoff=0.6)
    return f"; --prices has '{close[0]}', not '{model}'" if close else ""


def unmatched_prices(prices: Prices | None, models: Iterable[str]) -> list[str]:
    """One line per ``--prices`` entry that names no model of the runs (a typo, or a model the
    logs do not hold), with the closest model where one is close."""
    names = sorted(set(models))
    out = []
    for entry in prices or {}:
        if entry in names:
            continue
        close = difflib.get_close_matches(entry, names, n=1, cutoff=0.6)
        hint = f" (closest model: {close[0]})" if close else ""
        out.append(f"--prices entry '{entry}' matches no model in the logs{hint}")
    return out


# --- tokens per role ----------------------------------------------------------------------


def _models_of(binding: Any) -> list[str]:
    configs = binding if isinstance(binding, list) else [binding]
    return [str(getattr(c, "model", c)) for c in configs]


def _less(total: ModelUsage, part: ModelUsage) -> ModelUsage:
    """``total`` without ``part`` (field by field; an optional field both lack stays absent)."""

    def sub(a: Any, b: Any) -> Any:
        if a is None:
            return None
        return a - (b or 0)

    return ModelUsage(**{
        name: sub(getattr(total, name), getattr(part, name)) for name in ModelUsage.model_fields
    })


def role_usages(log: EvalLog) -> list[RoleUsage]:
    """The run's roles and their tokens, from the log's header (``log.stats``): the model under
    test first, then each bound role in the log's order, then any other model the log counted
    (see the module's docstring)."""
    stats = log.stats
    return _attributed(log, dict(stats.model_usage or {}), dict(stats.role_usage or {}))


def _attributed(
    log: EvalLog, by_model: dict[str, ModelUsage], by_role: dict[str, ModelUsage],
    calls: Mapping[tuple[str, str | None], tuple[int, int]] | None = None,
) -> list[RoleUsage]:
    """Tokens by model name and by role, attributed to the run's roles (the module's
    docstring); ``calls``: (model, role or None) -> (calls, calls that reported usage)."""
    model = log.eval.model
    bound = {role: _models_of(b) for role, b in (log.eval.model_roles or {}).items()}
    graders = (log.eval.metadata or {}).get("graders") or {}
    for role, name in graders.items() if isinstance(graders, dict) else ():
        bound.setdefault(str(role), [str(name)])
    for role in by_role:
        bound.setdefault(role, [])
    names = [model, *(n for ns in bound.values() for n in ns)]

    def counted(match: Any) -> tuple[int | None, int | None]:
        if calls is None:
            return None, None
        hits = [v for k, v in calls.items() if match(*k)]
        return sum(c for c, _ in hits), sum(r for _, r in hits)

    roles: list[RoleUsage] = []
    for role, models in bound.items():
        usage = by_role.get(role)
        if usage is None and len(models) == 1 and names.count(models[0]) == 1:
            usage = by_model.get(models[0])  # the role's model serves it alone
        roles.append(RoleUsage(role, ", ".join(models) or "(not named in the log)", usage,
                               *counted(lambda m, r, role=role: r == role)))
    own: ModelUsage | None = by_model.get(model)
    for r, models in zip(roles, bound.values(), strict=True):
        if own is not None and model in models:
            own = None if r.usage is None or len(models) > 1 else _less(own, r.usage)
    others = [RoleUsage(OTHER_ROLE, name, usage,
                        *counted(lambda m, r, name=name: r is None and m == name))
              for name, usage in by_model.items() if name not in names]
    return [RoleUsage(MODEL_ROLE, model, own,
                      *counted(lambda m, r: r is None and m == model)), *roles, *others]


def _sum_into(total: dict[str, ModelUsage], part: Mapping[str, ModelUsage]) -> None:
    for name, usage in part.items():
        total[name] = total[name] + usage if name in total else usage


@dataclass(frozen=True)
class RecordUsage:
    """What one sample record adds to a run's tokens: its ``model_usage`` and ``role_usage``
    as Inspect counted them (whichever attempt of the eval made it: a sample an ``eval-retry``
    reused keeps its usage), and each of its model calls as (model, role, reported usage). A
    reply served from Inspect's cache is not a call (not paid), nor is a call that failed."""

    by_model: Mapping[str, ModelUsage]
    by_role: Mapping[str, ModelUsage]
    calls: tuple[tuple[str, str | None, bool], ...]

    @classmethod
    def of(cls, sample: EvalSample) -> RecordUsage:
        return cls(
            dict(sample.model_usage or {}), dict(sample.role_usage or {}),
            tuple((e.model, e.role, e.output.usage is not None) for e in sample.events or []
                  if isinstance(e, ModelEvent) and not e.pending and not e.error
                  and e.cache != "read"),
        )


class UsageSums:
    """Sample records' tokens summed as the records are read, one at a time
    (:meth:`add`), by model and by role, with each (model, role)'s calls and those that reported
    usage (:attr:`RoleUsage.partial`): a reader never holds the records themselves."""

    def __init__(self) -> None:
        self.by_model: dict[str, ModelUsage] = {}
        self.by_role: dict[str, ModelUsage] = {}
        #: (model, role or None) -> (calls, calls that reported usage)
        self.calls: dict[tuple[str, str | None], tuple[int, int]] = {}
        self.records = 0

    def add(self, record: RecordUsage) -> None:
        _sum_into(self.by_model, record.by_model)
        _sum_into(self.by_role, record.by_role)
        for model, role, reported in record.calls:
            calls, with_usage = self.calls.get((model, role), (0, 0))
            self.calls[(model, role)] = (calls + 1, with_usage + reported)
        self.records += 1

    def copy(self) -> UsageSums:
        out = UsageSums()
        out.by_model, out.by_role = dict(self.by_model), dict(self.by_role)
        out.calls, out.records = dict(self.calls), self.records
        return out

    def roles(self, log: EvalLog) -> list[RoleUsage]:
        """The run's roles and their tokens over the records added, attributed with ``log``'s
        header (the module's docstring); none added (a log read without samples): its header's
        figures (:func:`role_usages`)."""
        if not self.records:
            return role_usages(log)
        return _attributed(log, self.by_model, self.by_role, self.calls)


# --- every attempt of an eval -------------------------------------------------------------

#: what no log shows of an attempt that stopped before the end (killed, or stopped by an error)
KILLED = ("calls an earlier attempt made after its last flush to the log, and calls in flight "
          "when it stopped (killed or failed), are in no log")
#: what no log shows when a resumed run's earlier attempt is not among the logs given
EARLIER_MISSING = ("an earlier attempt's log was not given (eval-set removes it after a "
                   "successful retry): only the samples this log reused from it are counted")


@dataclass(frozen=True)
class Paid:
    """What an eval paid for, over every attempt of it whose log was given: each role's tokens
    over every sample record of every attempt, each record once (a sample an ``eval-retry``
    reused is the same record in both logs); ``attempts``: the logs read; ``unknown``: what no
    log could show (``None``: nothing); ``shards``: the shards of a sharded run the attempts are
    of (each shard one attempt or more: it paid more than it used only where ``attempts``
    exceeds ``shards``)."""

    roles: list[RoleUsage]
    attempts: int = 1
    unknown: str | None = None
    shards: int = 1

    def once(self) -> bool:
        """Whether it paid what it used: each shard (or the eval) one attempt, nothing
        unknown."""
        return self.attempts <= self.shards and not self.unknown


def when(text: str | None) -> datetime | None:
    """An ISO time of a log (``None`` when missing or unreadable)."""
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def is_reused(sample: EvalSample, started: datetime | None) -> bool:
    """Whether a resumed run took ``sample`` over from an earlier attempt: it completed before
    the log's own run ``started`` (``inspect eval-retry``, or ``eval-set`` run again, keeps such
    samples as they were)."""
    done = when(sample.completed_at)
    return started is not None and done is not None and done < started


def record_key(sample: EvalSample) -> tuple[str, int, str] | None:
    """What makes two attempts' sample records one record (sample, epoch, completion time: an
    ``eval-retry`` copies a reused record as it was); ``None`` for a record without a
    completion time, never the same as another."""
    return (str(sample.id), sample.epoch, sample.completed_at) if sample.completed_at else None


def paid_usage(finished: EvalLog, used: UsageSums,
               earlier: Sequence[Sequence[RecordUsage]] = (), unreadable: Sequence[str] = (),
               reused: int = 0) -> Paid:
    """What the eval of ``finished`` paid for: its own records (``used``) and, after them, the
    records of its ``earlier`` attempts' logs (killed, recovered, errored) that are not already
    counted (each record once: :func:`record_key`), attributed to the finished run's roles.
    ``unknown`` names what no log shows: calls after a killed attempt's last flush
    (:data:`KILLED`), an earlier attempt whose log was not given while the finished log
    ``reused`` samples of it (:data:`EARLIER_MISSING`), earlier logs that could not be read
    (``unreadable``)."""
    total = used.copy()
    for records in earlier:
        for record in records:
            total.add(record)
    unknown = []
    if earlier:
        unknown.append(KILLED)
    elif reused:
        unknown.append(EARLIER_MISSING)
    if unreadable:
        unknown.append("earlier logs that could not be read: " + ", ".join(unreadable))
    return Paid(total.roles(finished), 1 + len(earlier) + len(unreadable),
                "; ".join(unknown) or None)


def merged_paid(paid: Sequence[Paid | None]) -> Paid | None:
    """The shards of one run: their attempts' figures summed (:func:`merged_roles`), and
    their number (shards are not attempts)."""
    if not paid or any(p is None for p in paid):
        return None
    shown = [p for p in paid if p is not None]
    unknown = "; ".join(dict.fromkeys(p.unknown for p in shown if p.unknown)) or None
    return Paid(merged_roles([p.roles for p in shown]), sum(p.attempts for p in shown), unknown,
                sum(p.shards for p in shown))


def read_role_usages(path: str) -> list[RoleUsage]:
    """:func:`role_usages` of the log at ``path`` (its header only, within the read limit:
    :func:`med_evals.logs.files.read_header`; local or any URI Inspect reads)."""
    return role_usages(read_header(path))


def total_usage(roles: Sequence[RoleUsage]) -> ModelUsage | None:
    """The tokens of all roles together; ``None`` when a role's are not in the log."""
    if any(r.usage is None for r in roles):
        return None
    out = ModelUsage()
    for r in roles:
        assert r.usage is not None
        out = out + r.usage
    return out


def token_count(usage: ModelUsage | None, name: str) -> int | None:
    """One token field of a usage (:data:`TOKEN_FIELDS`); ``None``: not in the log."""
    return None if usage is None else getattr(usage, name)


# --- cost ---------------------------------------------------------------------------------


def replayed(model: str) -> bool:
    return model.startswith(REPLAY_PREFIX)


def priced(cost: ModelCost, usage: ModelUsage) -> float:
    """Inspect's price in dollars of ``usage`` at ``cost`` ($ per million tokens):
    ``compute_model_cost``, the function that sets ``ModelUsage.total_cost`` during a run (cache
    writes at the default TTL's rate: a log does not say which TTL a call used)."""
    return float(compute_model_cost(cost, usage))


def role_cost(role: RoleUsage, prices: Prices | None = None) -> Cost:
    """What a role's calls cost, in dollars, and whose price it is (the module's docstring:
    ``--prices``, then Inspect's price in the log, then Inspect's model information)."""
    if replayed(role.model):
        return Cost(None, REPLAYED)
    if role.usage is None:
        return Cost(None, "no token counts in the log")
    partial = role.partial
    note = f" (partial: {role.partial_text()})" if partial else ""
    price = (prices or {}).get(role.model)
    if price is not None:
        return Cost(priced(price, role.usage), FROM_PRICES + note, partial)
    if role.usage.total_cost is not None:
        return Cost(float(role.usage.total_cost), FROM_LOG + note, partial)
    info = database_model_info(role.model)
    if info is not None and info.cost is not None:
        return Cost(priced(info.cost, role.usage), FROM_INSPECT + note, partial)
    typo = _closest_entry(role.model, prices)
    return Cost(None, f"no price for {role.model} (--prices FILE){typo}")


def run_cost(roles: Sequence[RoleUsage], costs: Sequence[Cost]) -> Cost:
    """The run's cost: the sum of its roles' costs but the replayed ones; unknown when one of
    them is unknown (never a partial sum); :data:`REPLAYED` when every role is replayed."""
    ours = [(r, c) for r, c in zip(roles, costs, strict=True) if c.source != REPLAYED]
    if not ours:
        return Cost(None, REPLAYED)
    unknown = [c.source for _, c in ours if c.dollars is None]
    if unknown:
        return Cost(None, "; ".join(dict.fromkeys(unknown)))
    return Cost(math.fsum(c.dollars or 0.0 for _, c in ours),
                ", ".join(dict.fromkeys(c.source for _, c in ours)),
                any(c.partial for _, c in ours))


def answer_kind(study: Study) -> str:
    """What a study's cost is divided by (:data:`PER_VALID_REPLY`)."""
    return "valid reply" if study.task in PER_VALID_REPLY else "correct answer"


def answers_name(kind: str) -> str:
    """``valid replies``, ``correct answers``: the plural of :func:`answer_kind`'s name."""
    return "valid replies" if kind == "valid reply" else f"{kind}s"


def answer_count(study: Study, values: Sequence[Mapping[str, Any]]) -> int:
    """The samples a run's cost is divided by, over its per-sample (epoch-reduced) values: its
    valid replies for the studies of :data:`PER_VALID_REPLY`, else its correct answers (a valid
    prediction equal to the target)."""
    if study.task in PER_VALID_REPLY:
        return sum(bool(v.get("valid")) for v in values)
    return sum(bool(v.get("valid")) and v.get("prediction") == v.get("target") for v in values)


def cost_per_answer(total: Cost, answers: int) -> Cost:
    """The run's cost divided by its answers (:func:`answer_count`); none without an answer."""
    if total.dollars is None:
        return total
    if answers == 0:
        return Cost(None, "no answer to divide by")
    return Cost(total.dollars / answers, total.source, total.partial)


def merged_roles(per_log: Sequence[Sequence[RoleUsage]]) -> list[RoleUsage]:
    """The roles of one run written as several logs (the shards of a run split by sample
    ranges: :func:`med_evals.logs.runs.merge_shards`): each role's tokens summed over the logs
    (``None`` when one log lacks them), in the first log's order; its calls likewise."""
    out: dict[tuple[str, str], list[RoleUsage]] = {}
    for roles in per_log:
        for r in roles:
            out.setdefault((r.role, r.model), []).append(r)
    n = len(per_log)
    merged = []
    for (role, model), parts in out.items():
        usage: ModelUsage | None = None
        if len(parts) == n and all(p.usage is not None for p in parts):
            usage = ModelUsage()
            for p in parts:
                assert p.usage is not None
                usage = usage + p.usage
        counted = all(p.calls is not None and p.reported is not None for p in parts)
        merged.append(RoleUsage(
            role, model, usage,
            sum(p.calls or 0 for p in parts) if counted else None,
            sum(p.reported or 0 for p in parts) if counted else None))
    return merged


def run_usage(
    log: str | Sequence[str] | Sequence[RoleUsage], study: Study,
    values: Sequence[Mapping[str, Any]], prices: Prices | None = None,
) -> RunUsage:
    """Every figure of one run: each role's tokens and cost, the run's cost and its cost per
    answer, each by the function above. ``log``: a log's path, the paths of the shards of one
    run (the headers are read), or the run's roles as read with its log
    (:meth:`med_evals.logs.runs.Run.usage`)."""
    if isinstance(log, str):
        roles = read_role_usages(log)
    elif all(isinstance(r, RoleUsage) for r in log):
        roles = [r for r in log if isinstance(r, RoleUsage)]
    else:
        roles = merged_roles([read_role_usages(str(p)) for p in log])
    costs = [role_cost(r, prices) for r in roles]
    total = run_cost(roles, costs)
    n = answer_count(study, values)
    return RunUsage(roles, costs, total, answer_kind(study), n, cost_per_answer(total, n))


def paid_run_usage(
    paid: Paid, study: Study, values: Sequence[Mapping[str, Any]], prices: Prices | None = None,
) -> RunUsage:
    """:func:`run_usage` of what an eval paid for over its attempts (:class:`Paid`), with the
    number of attempts and what no log shows."""
    u = run_usage(paid.roles, study, values, prices)
    return RunUsage(u.roles, u.costs, u.total, u.answer, u.answers, u.per_answer,
                    paid.attempts, paid.unknown, paid.shards)


# --- text and records -------------------------------------------------------------------------


def money(dollars: float | None, sign: bool = False) -> str:
    """``$0.000754``, ``$12.35``; :data:`MISSING` for none. Three significant digits below a
    dollar, cents above."""
    if dollars is None or math.isnan(dollars):
        return MISSING
    prefix = ("+" if dollars >= 0 else "-") if sign else ("-" if dollars < 0 else "")
    x = abs(dollars)
    if x == 0:
        return f"{prefix}$0"
    if x >= 1:
        return f"{prefix}${x:,.2f}"
    return f"{prefix}$" + np.format_float_positional(
        x, precision=3, unique=False, fractional=False, trim="-"
    )


def cost_text(cost: Cost) -> str:
    """A cost as printed: dollars (``≥ $0.0021`` when partial: a lower bound), ``none
    (replayed)``, or :data:`MISSING`."""
    if cost.dollars is not None:
        return ("≥ " if cost.partial else "") + money(cost.dollars)
    return REPLAYED if cost.source == REPLAYED else MISSING


def count_text(n: int | None) -> str:
    return MISSING if n is None else f"{n:,}"


def usage_record(u: RunUsage) -> dict[str, Any]:
    """A run's figures as a baseline records them (JSON; ``None`` for what is not known)."""
    return {
        "roles": [
            {"role": r.role, "model": r.model,
             "tokens": None if r.usage is None else {
                 k: getattr(r.usage, k) for k in TOKEN_FIELDS},
             "calls": r.calls, "calls_with_usage": r.reported,
             "cost": c.dollars, "priced_by": c.source, "partial": c.partial}
            for r, c in zip(u.roles, u.costs, strict=True)
        ],
        "cost": u.total.dollars,
        "priced_by": u.total.source,
        "partial": u.total.partial,
        "answer": u.answer,
        "answers": u.answers,
        "cost_per_answer": u.per_answer.dollars,
        "attempts": u.attempts,
        "unknown": u.unknown,
        "shards": u.shards,
    }


def from_record(record: Mapping[str, Any]) -> RunUsage:
    """A baseline's record back as a :class:`RunUsage` (:func:`usage_record`)."""
    roles, costs = [], []
    for r in record.get("roles") or []:
        tokens = r.get("tokens")
        usage = None if tokens is None else ModelUsage(**{
            k: v for k, v in tokens.items() if k in ModelUsage.model_fields})
        roles.append(RoleUsage(str(r.get("role")), str(r.get("model")), usage, r.get("calls"),
                               r.get("calls_with_usage")))
        costs.append(Cost(r.get("cost"), str(r.get("priced_by") or ""), bool(r.get("partial"))))
    source, partial = str(record.get("priced_by") or ""), bool(record.get("partial"))
    return RunUsage(roles, costs, Cost(record.get("cost"), source, partial),
                    str(record.get("answer")), int(record.get("answers") or 0),
                    Cost(record.get("cost_per_answer"), source, partial),
                    int(record.get("attempts") or 1), record.get("unknown"),
                    int(record.get("shards") or 1))


def _change(old: float | int | None, new: float | int | None, shown: Any, signed: Any) -> str:
    if old is None or new is None:
        return f"{shown(old)} -> {shown(new)}"
    return f"{shown(old)} -> {shown(new)} ({signed(new - old)})"


def _signed_count(n: int) -> str:
    return f"{'+' if n >= 0 else '-'}{abs(n):,}"


def _signed_money(dollars: float) -> str:
    return money(dollars, sign=True)


def partial_note(u: RunUsage) -> str:
    """`` (partial: usage reported on 9 of 20 calls of model)``: where some calls of a role
    reported no usage, the sums are of the others (a lower bound); empty otherwise."""
    parts = [f"{r.partial_text()} of {r.role}" for r in u.roles if r.partial]
    return f" (partial: {'; '.join(parts)})" if parts else ""


def paid_line(paid: RunUsage, used: RunUsage) -> str:
    """What an eval paid for over its attempts, beside what its finished run used: ``paid
    over 2 attempts of the eval: input tokens at least 370 (used by the finished run: 360),
    ...; calls ... are in no log``; a sharded run's ``paid over 4 shards in 5 attempts: ...``
    (shards are not attempts). Empty when the eval (each shard) ran once and nothing is
    unknown."""
    if paid.attempts <= paid.shards and not paid.unknown:
        return ""
    at_least = "at least " if paid.unknown else ""
    total, used_total = total_usage(paid.roles), total_usage(used.roles)
    parts = [f"{TOKEN_FIELDS[k]} {at_least}{count_text(token_count(total, k))} (used by the "
             f"finished run: {count_text(token_count(used_total, k))})"
             for k in ("input_tokens", "output_tokens")]
    cost = cost_text(paid.total)
    parts.append(f"cost {at_least if paid.total.dollars is not None else ''}{cost}")
    attempts = f"{paid.attempts} attempt{'s' if paid.attempts > 1 else ''}"
    what = (f"paid over {paid.shards} shards in {attempts}" if paid.shards > 1
            else f"paid over {attempts} of the eval")
    tail = f"; unknown: {paid.unknown}" if paid.unknown else ""
    return f"{what}: {', '.join(parts)}{tail}"


def change_line(old: RunUsage | None, new: RunUsage) -> str:
    """The change in a run's tokens (all roles together) and cost, baseline -> new, as
    ``regress`` prints it (information, never gated). Both sides are what the finished run
    used (every sample record of its log, reused ones included): a resumed run costs what an
    uninterrupted one does, never less (:func:`paid_line` says what its attempts paid)."""
    total = total_usage(new.roles)
    if old is None:
        tokens = "; ".join(f"{TOKEN_FIELDS[k]} {count_text(token_count(total, k))}"
                           for k in ("input_tokens", "output_tokens", "reasoning_tokens"))
        return (f"{tokens}; cost {cost_text(new.total)}; cost per {new.answer} "
                f"{cost_text(new.per_answer)}{partial_note(new)} (the baseline holds no token "
                "counts: recorded before med-evals recorded them)")
    before = total_usage(old.roles)
    parts = [f"{TOKEN_FIELDS[k]} " + _change(token_count(before, k), token_count(total, k),
                                             count_text, _signed_count)
             for k in ("input_tokens", "output_tokens", "reasoning_tokens")]
    for label, a, b in (("cost", old.total, new.total),
                        (f"cost per {new.answer}", old.per_answer, new.per_answer)):
        if a.dollars is None or b.dollars is None or a.partial or b.partial:
            parts.append(f"{label} {cost_text(a)} -> {cost_text(b)}")
        else:
            parts.append(f"{label} {_change(a.dollars, b.dollars, money, _signed_money)}")
    return "; ".join(parts) + partial_note(new)
