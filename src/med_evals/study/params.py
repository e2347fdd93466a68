"""One check for every task parameter, as Inspect passes it.

``inspect eval -T name=value`` reads each value as YAML, then splits a plain string at commas:
``-T published_after=2021-01-01`` arrives as a ``datetime.date``, ``-T seed=3`` as an ``int``,
``-T evidence=true`` as a ``bool``, ``-T condition=a,b`` as a list and ``-T condition=`` as
``None``; Python callers pass strings. Each ``@task`` function calls :func:`check_params` first,
with one check per parameter::

    @task
    def oncology_rct(condition: str = "title_abstract", seed: int = 0, ..., **unknown: Any):
        p = check_params("oncology_rct", locals(), seed=Integer(), published_after=IsoDate(), ...)

Every task ends its signature with ``**unknown``: Inspect's ``task_create`` passes a task only
the parameters its signature names, and warns about and drops any other (``-T conditon=...``
would run the default condition); a task that takes ``**unknown`` gets them all, and
:func:`check_params` refuses any it does not know, naming the closest parameter. Inspect records
the arguments passed through ``**unknown`` under their own names, so a valid run's ``task_args``
in the log are the same as without it (an empty ``unknown`` records nothing).

Each check accepts what Inspect's parsing and a Python caller produce, and nothing else:
booleans only true/false, integers only integers, enumerations only their values (the message
lists them), dates as ``datetime.date`` or ``YYYY-MM-DD``, paths that exist as what they should
be. A bad value is a :class:`ParamError` naming the task, the parameter, the value and what to
pass instead; ``inspect eval`` prints it as one line, without a traceback.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from med_evals.inspect_internals.compat import InputError


class ParamError(InputError):
    """A task parameter with a value the task cannot use."""


class _Bad(Exception):
    """What is wrong with one value (turned into a :class:`ParamError` by check_params, which
    puts the parameter's name for ``{name}``)."""


def _scalar(value: Any) -> str:
    if isinstance(value, list | tuple | dict | set):
        raise _Bad("must be a single value")
    return str(value).strip()


def _items(value: Any) -> list[str]:
    """A comma-separated string or a list (Inspect splits ``a,b``), as stripped strings."""
    raw = value.split(",") if isinstance(value, str) else value
    if not isinstance(raw, list | tuple):
        raw = [raw]
    if any(isinstance(v, list | tuple | dict | set) for v in raw):
        raise _Bad("must be a value or a comma-separated list of values")
    return [s for s in (str(v).strip() for v in raw if v is not None) if s]


@dataclass(frozen=True)
class Check:
    """Base of the checks: ``optional`` lets an empty value (``None`` or ``""``) through."""

    optional: bool = True

    def empty(self) -> str:
        return "is empty"

    def convert(self, value: Any) -> Any:
        return value

    def __call__(self, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            if self.optional:
                return None
            raise _Bad(self.empty())
        return self.convert(value)


@dataclass(frozen=True)
class Flag(Check):
    """``true`` or ``false`` (a bool, or the string in any case)."""

    optional: bool = False

    def empty(self) -> str:
        return "is empty; pass true or false"

    def convert(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise _Bad("must be true or false")


_INT = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class Integer(Check):
    """An integer (an int, or a string of digits), at least ``minimum`` when given."""

    optional: bool = False
    minimum: int | None = None

    def empty(self) -> str:
        return "is empty; pass an integer"

    def convert(self, value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif isinstance(value, str) and _INT.fullmatch(value.strip()):
            n = int(value)
        else:
            raise _Bad("must be an integer")
        if self.minimum is not None and n < self.minimum:
            raise _Bad(f"must be at least {self.minimum}")
        return n


@dataclass(frozen=True)
class Number(Check):
    """A number within [``minimum``, ``maximum``] where given."""

    optional: bool = False
    minimum: float | None = None
    maximum: float | None = None

    def convert(self, value: Any) -> float:
        if isinstance(value, bool):
            raise _Bad("must be a number")
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise _Bad("must be a number") from None
        lo = -float("inf") if self.minimum is None else self.minimum
        hi = float("inf") if self.maximum is None else self.maximum
        if not lo <= x <= hi:
            raise _Bad(f"must be between {self.minimum} and {self.maximum}")
        return x


@dataclass(frozen=True)
class IsoDate(Check):
    """A date: what Inspect parses from ``-T x=2021-01-01``, or an ISO string. Returns
    ``YYYY-MM-DD``."""

    def convert(self, value: Any) -> str:
        if isinstance(value, datetime):
            return value.date().isoformat()
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, str):
            try:
                return date.fromisoformat(value.strip()).isoformat()
            except ValueError:
                pass
        raise _Bad("must be a date as YYYY-MM-DD")


@dataclass(frozen=True)
class Text(Check):
    """Any single value, as a string."""

    def convert(self, value: Any) -> str:
        return _scalar(value)


@dataclass(frozen=True)
class Choice(Check):
    """One of ``values`` (or, with ``many``, a comma-separated list of them and of ``groups``).

    Returns the string, or the list of strings with ``many``.
    """

    values: Collection[str] = ()
    groups: Collection[str] = ()
    many: bool = False
    optional: bool = False

    def allowed(self) -> str:
        text = ", ".join(map(str, self.values))
        return text + (f" (or a group: {', '.join(self.groups)})" if self.groups else "")

    def empty(self) -> str:
        return f"is empty; choose from {self.allowed()}"

    def convert(self, value: Any) -> str | list[str]:
        items = _items(value) if self.many else [_scalar(value)]
        if not items:
            raise _Bad(self.empty())
        for item in items:
            if item not in self.values and item not in self.groups:
                raise _Bad(f"unknown {{name}} {item!r}; choose from {self.allowed()}")
        return items if self.many else items[0]


@dataclass(frozen=True)
class Pairs(Check):
    """``a:b`` pairs of ``values`` (comma-separated or a list). With ``within`` (another
    parameter, a :class:`Choice` with ``many``), both sides must be selected there too."""

    values: Collection[str] = ()
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)
    within: str | None = None

    def convert(self, value: Any) -> list[str]:
        pairs = []
        for item in _items(value):
            sides = [s.strip() for s in item.split(":")]
            if len(sides) != 2 or not all(sides):
                raise _Bad(f"{item!r} is not a pair a:b")
            for side in sides:
                if side not in self.values:
                    raise _Bad(
                        f"{item!r} names an unknown condition {side!r}; "
                        f"choose from {', '.join(self.values)}"
                    )
            pairs.append(":".join(sides))
        return pairs

    def relate(self, pairs: list[str] | None, selected: Any) -> None:
        if not pairs or self.within is None or selected is None:
            return
        chosen: set[str] = set()
        for item in selected if isinstance(selected, list) else [selected]:
            chosen.update(self.groups.get(item, (item,)))
        for pair in pairs:
            missing = [s for s in pair.split(":") if s not in chosen]
            if missing:
                raise _Bad(
                    f"{pair!r} compares {', '.join(missing)}, not in this run; "
                    f"add {', '.join(missing)} to -T {self.within}=..."
                )


@dataclass(frozen=True, order=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``: ``-T shard=2/8`` (:mod:`med_evals.study.shards`)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


_SHARD = re.compile(r"\s*([+-]?\d+)\s*/\s*([+-]?\d+)\s*")


def parse_shard(value: Any) -> Shard:
    """``"2/8"`` -> ``Shard(2, 8)``; anything else a ``ValueError`` saying what to pass."""
    match = _SHARD.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError("must be i/N, shard i of N counted from 1, e.g. 2/8")
    index, count = int(match[1]), int(match[2])
    if count < 1:
        raise ValueError("N must be at least 1 (i/N: shard i of N)")
    if not 1 <= index <= count:
        shards = "1/1" if count == 1 else f"1/{count} to {count}/{count}"
        raise ValueError(f"there is no shard {index} of {count}; i counts from 1 to N ({shards})")
    return Shard(index, count)


@dataclass(frozen=True)
class ShardOf(Check):
    """``i/N``: shard ``i`` of ``N`` (1 <= i <= N); returns a :class:`Shard` (empty: none)."""

    def convert(self, value: Any) -> Shard:
        try:
            return parse_shard(value)
        except ValueError as ex:
            raise _Bad(str(ex)) from None


@dataclass(frozen=True)
class Directory(Check):
    """An existing directory."""

    def convert(self, value: Any) -> str:
        path = Path(_scalar(value)).expanduser()
        if path.is_file():
            raise _Bad("is a file, not a directory")
        if not path.is_dir():
            raise _Bad("does not exist")
        return str(path)


@dataclass(frozen=True)
class File(Check):
    """An existing file (a directory is reported as one)."""

    def convert(self, value: Any) -> str:
        path = Path(_scalar(value)).expanduser()
        if path.is_dir():
            raise _Bad("is a directory, not a file")
        if not path.is_file():
            raise _Bad("does not exist")
        return str(path)


@dataclass(frozen=True)
class Paths(Check):
    """Existing files or directories (comma-separated or a list); returns the list."""

    def convert(self, value: Any) -> list[str]:
        paths = [Path(item).expanduser() for item in _items(value)]
        for path in paths:
            if not path.exists():
                raise _Bad(f"{str(path)!r} does not exist")
        return [str(path) for path in paths]


def _shown(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


#: The name of every task's catch-all ``**unknown`` parameter.
CATCH_ALL = "unknown"


def unknown_params(task: str, passed: Mapping[str, Any], known: Collection[str]) -> ParamError:
    """The error for parameters a task does not take: each named with the closest known one."""
    parts = []
    for name in sorted(passed):
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        hint = f"did you mean -T {close[0]}?" if close else f"the parameters are {', '.join(known)}"
        parts.append(f"-T {name}={_shown(passed[name])}: unknown parameter; {hint}")
    return ParamError(f"{task}: " + "; ".join(parts))


def check_params(task: str, values: Mapping[str, Any], **checks: Check) -> SimpleNamespace:
    """Check and normalise a task's parameters; returns them as attributes.

    Args:
        task: The task's name, for messages.
        values: The parameters as passed (``locals()`` at the top of the task function), with
            the task's catch-all ``unknown`` (:data:`CATCH_ALL`): the parameters its signature
            does not name.
        checks: One check per parameter: a parameter without one, or a check without a
            parameter, is a programming error (``TypeError``), so no parameter goes unchecked.

    Raises:
        ParamError: ``<task>: -T <name>=<value>: <what is wrong>``; for a parameter the task
            does not take, ``<task>: -T <name>=<value>: unknown parameter; did you mean -T
            <closest>?`` (checked before any value).
    """
    if not isinstance(values.get(CATCH_ALL), Mapping):
        raise TypeError(
            f"{task}: the task function must end with **{CATCH_ALL}, so that check_params "
            "sees the parameters it does not take (Inspect would drop them with a warning)"
        )
    passed = values[CATCH_ALL]
    values = {k: v for k, v in values.items() if k != CATCH_ALL}
    unchecked, unknown = sorted(set(values) - set(checks)), sorted(set(checks) - set(values))
    if unchecked or unknown:
        raise TypeError(
            f"{task}: check_params needs one check per parameter: no check for "
            f"{unchecked or 'none'}, a check but no parameter for {unknown or 'none'}"
        )
    if passed:
        raise unknown_params(task, passed, list(checks))
    out: dict[str, Any] = {}

    def error(name: str, ex: _Bad) -> ParamError:
        problem = str(ex).replace("{name}", name)
        return ParamError(f"{task}: -T {name}={_shown(values.get(name))}: {problem}")

    for name, check in checks.items():
        try:
            out[name] = check(values.get(name))
        except _Bad as ex:
            raise error(name, ex) from None
    for name, check in checks.items():
        if isinstance(check, Pairs) and check.within:
            try:
                check.relate(out[name], out.get(check.within))
            except _Bad as ex:
                raise error(name, ex) from None
    return SimpleNamespace(**out)
