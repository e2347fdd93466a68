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
model information (:func:`~med_evals._compat.database_model_info`). The price of a usage is
Inspect's own formula (:func:`~med_evals._compat.priced`). A model served by ``replay/`` costs
nothing here: its cost is the recording's (``none (replayed)``). A run's cost
(:func:`run_cost`) is the sum of its roles' costs, unknown when one role's is; **cost per
answer** (:func:`cost_per_answer`) divides it by :func:`answer_count`: the correct answers, or
for the oncology study the valid replies (:data:`PER_VALID_REPLY`; docs/numbers.md, "Tokens and
cost").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import ModelCost, ModelUsage
from pydantic import ValidationError

from med_evals._compat import database_model_info, priced
from med_evals.exit_codes import USAGE, CommandError
from med_evals.studies import ONCOLOGY_RCT, Study

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
    does not hold them)."""

    role: str
    model: str
    usage: ModelUsage | None


@dataclass(frozen=True)
class Cost:
    """Dollars (``None``: not known here) and where the price came from, or why there is none."""

    dollars: float | None
    source: str


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
        try:
            out[str(name)] = ModelCost.model_validate(cost)
        except ValidationError as ex:
            fields = ", ".join(".".join(map(str, e["loc"])) or "value" for e in ex.errors())
            raise CommandError(f"{where}: model {name!r}: {fields}: expected a number for each of "
                               "input, output, input_cache_write, input_cache_read ($ per "
                               "million tokens)", USAGE) from None
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
    """The run's roles and their tokens: the model under test first, then each bound role in
    the log's order, then any other model the log counted (see the module's docstring)."""
    model = log.eval.model
    stats = log.stats
    by_model: dict[str, ModelUsage] = dict(stats.model_usage or {})
    by_role: dict[str, ModelUsage] = dict(stats.role_usage or {})
    bound = {role: _models_of(b) for role, b in (log.eval.model_roles or {}).items()}
    graders = (log.eval.metadata or {}).get("graders") or {}
    for role, name in graders.items() if isinstance(graders, dict) else ():
        bound.setdefault(str(role), [str(name)])
    for role in by_role:
        bound.setdefault(role, [])
    names = [model, *(n for ns in bound.values() for n in ns)]
    roles: list[RoleUsage] = []
    for role, models in bound.items():
        usage = by_role.get(role)
        if usage is None and len(models) == 1 and names.count(models[0]) == 1:
            usage = by_model.get(models[0])  # the role's model serves it alone
        roles.append(RoleUsage(role, ", ".join(models) or "(not named in the log)", usage))
    own: ModelUsage | None = by_model.get(model)
    for r, models in zip(roles, bound.values(), strict=True):
        if own is not None and model in models:
            own = None if r.usage is None or len(models) > 1 else _less(own, r.usage)
    others = [RoleUsage(OTHER_ROLE, name, usage) for name, usage in by_model.items()
              if name not in names]
    return [RoleUsage(MODEL_ROLE, model, own), *roles, *others]


def read_role_usages(path: str) -> list[RoleUsage]:
    """:func:`role_usages` of the log at ``path`` (its header only: local or any URI Inspect
    reads)."""
    return role_usages(read_eval_log(path, header_only=True))


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


def role_cost(role: RoleUsage, prices: Prices | None = None) -> Cost:
    """What a role's calls cost, in dollars, and whose price it is (the module's docstring:
    ``--prices``, then Inspect's price in the log, then Inspect's model information)."""
    if replayed(role.model):
        return Cost(None, REPLAYED)
    if role.usage is None:
        return Cost(None, "no token counts in the log")
    price = (prices or {}).get(role.model)
    if price is not None:
        return Cost(priced(price, role.usage), FROM_PRICES)
    if role.usage.total_cost is not None:
        return Cost(float(role.usage.total_cost), FROM_LOG)
    info = database_model_info(role.model)
    if info is not None and info.cost is not None:
        return Cost(priced(info.cost, role.usage), FROM_INSPECT)
    return Cost(None, f"no price for {role.model} (--prices FILE)")


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
                ", ".join(dict.fromkeys(c.source for _, c in ours)))


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
    return Cost(total.dollars / answers, total.source)


def merged_roles(per_log: Sequence[Sequence[RoleUsage]]) -> list[RoleUsage]:
    """The roles of one run written as several logs (the shards of a run split by sample
    ranges: :func:`med_evals.logs.merge_shards`): each role's tokens summed over the logs
    (``None`` when one log lacks them), in the first log's order."""
    out: dict[tuple[str, str], ModelUsage | None] = {}
    seen: dict[tuple[str, str], int] = {}
    for roles in per_log:
        for r in roles:
            key = (r.role, r.model)
            seen[key] = seen.get(key, 0) + 1
            if key not in out:
                out[key] = r.usage
            else:
                prev = out[key]
                out[key] = None if prev is None or r.usage is None else prev + r.usage
    n = len(per_log)
    return [RoleUsage(role, model, usage if seen[(role, model)] == n else None)
            for (role, model), usage in out.items()]


def run_usage(
    log: EvalLog | str | Sequence[str] | Sequence[RoleUsage], study: Study,
    values: Sequence[Mapping[str, Any]], prices: Prices | None = None,
) -> RunUsage:
    """Every figure of one run: each role's tokens and cost, the run's cost and its cost per
    answer, each by the function above. ``log``: a log, its path, the paths of the shards of
    one run (the headers are read), or the run's roles as read with its log
    (:meth:`med_evals.logs.Run.usage`)."""
    if isinstance(log, str):
        roles = read_role_usages(log)
    elif isinstance(log, EvalLog):
        roles = role_usages(log)
    elif all(isinstance(r, RoleUsage) for r in log):
        roles = [r for r in log if isinstance(r, RoleUsage)]
    else:
        roles = merged_roles([read_role_usages(str(p)) for p in log])
    costs = [role_cost(r, prices) for r in roles]
    total = run_cost(roles, costs)
    n = answer_count(study, values)
    return RunUsage(roles, costs, total, answer_kind(study), n, cost_per_answer(total, n))


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
    """A cost as printed: dollars, ``none (replayed)``, or :data:`MISSING`."""
    if cost.dollars is not None:
        return money(cost.dollars)
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
             "cost": c.dollars, "priced_by": c.source}
            for r, c in zip(u.roles, u.costs, strict=True)
        ],
        "cost": u.total.dollars,
        "priced_by": u.total.source,
        "answer": u.answer,
        "answers": u.answers,
        "cost_per_answer": u.per_answer.dollars,
    }


def from_record(record: Mapping[str, Any]) -> RunUsage:
    """A baseline's record back as a :class:`RunUsage` (:func:`usage_record`)."""
    roles, costs = [], []
    for r in record.get("roles") or []:
        tokens = r.get("tokens")
        usage = None if tokens is None else ModelUsage(**{
            k: v for k, v in tokens.items() if k in ModelUsage.model_fields})
        roles.append(RoleUsage(str(r.get("role")), str(r.get("model")), usage))
        costs.append(Cost(r.get("cost"), str(r.get("priced_by") or "")))
    source = str(record.get("priced_by") or "")
    return RunUsage(roles, costs, Cost(record.get("cost"), source), str(record.get("answer")),
                    int(record.get("answers") or 0), Cost(record.get("cost_per_answer"), source))


def _change(old: float | int | None, new: float | int | None, shown: Any, signed: Any) -> str:
    if old is None or new is None:
        return f"{shown(old)} -> {shown(new)}"
    return f"{shown(old)} -> {shown(new)} ({signed(new - old)})"


def _signed_count(n: int) -> str:
    return f"{'+' if n >= 0 else '-'}{abs(n):,}"


def _signed_money(dollars: float) -> str:
    return money(dollars, sign=True)


def change_line(old: RunUsage | None, new: RunUsage) -> str:
    """The change in a run's tokens (all roles together) and cost, baseline -> new, as
    ``regress`` prints it (information, never gated)."""
    total = total_usage(new.roles)
    if old is None:
        tokens = "; ".join(f"{TOKEN_FIELDS[k]} {count_text(token_count(total, k))}"
                           for k in ("input_tokens", "output_tokens", "reasoning_tokens"))
        return (f"{tokens}; cost {cost_text(new.total)}; cost per {new.answer} "
                f"{cost_text(new.per_answer)} (the baseline holds no token counts: recorded "
                "before med-evals recorded them)")
    before = total_usage(old.roles)
    parts = [f"{TOKEN_FIELDS[k]} " + _change(token_count(before, k), token_count(total, k),
                                             count_text, _signed_count)
             for k in ("input_tokens", "output_tokens", "reasoning_tokens")]
    for label, a, b in (("cost", old.total, new.total),
                        (f"cost per {new.answer}", old.per_answer, new.per_answer)):
        if a.dollars is None or b.dollars is None:
            parts.append(f"{label} {cost_text(a)} -> {cost_text(b)}")
        else:
            parts.append(f"{label} {_change(a.dollars, b.dollars, money, _signed_money)}")
    return "; ".join(parts)
