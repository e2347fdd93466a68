"""Score values as columns, kept across Inspect's live metric refreshes.

While a run is in progress Inspect recomputes every metric over all scores so far, about once a
second (and at most a tenth of the time), so a metric that reads every score value in Python
costs more the longer the run. Between two refreshes the scores are the same ``Score`` objects
in the same order, followed by the new ones (the epoch reducer returns a single epoch's score
unchanged). A :class:`Table` therefore reads each value once: the next refresh finds the table
whose scores are a prefix of its own (by object identity) and reads only the new ones. Every
column derived from the values (a label's integer code, a group, a float) is extended the same
way, and every metric of the scorer reads the same table.

The numbers do not depend on this: a metric computes the same thing from a table's columns as
from the values themselves (same arrays, same scikit-learn and numpy calls; tests compare both
paths on random values, and a replayed run's logged metrics before and after to the last
digit). A list with anything other than dict values gets no table (``None``): the callers then
take the plain path, with its own errors.
"""

from __future__ import annotations

import math
import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from inspect_ai.scorer import SampleScore, Score

Value = Mapping[str, Any]

#: tables kept (each holds its scores): one per scorer of the runs in progress is enough
MAX_TABLES = 8


class Rows(list[Value]):
    """A list of score values that knows the :class:`Table` it came from."""

    table: Table


class Table:
    """Columns derived from a growing list of dict score values."""

    def __init__(self) -> None:
        self.scores: list[Score] = []  # held, so identities stay valid while cached
        self.values: list[Value] = []
        self._columns: dict[Hashable, tuple[Callable[[Value], Any], list[Any]]] = {}
        self._codes: dict[tuple[tuple[str, ...], bool], dict[Any, int]] = {}
        self._groups: dict[str, dict[str, Table]] = {}
        self._names: dict[str, dict[str, int]] = {}
        self._memo: dict[Hashable, tuple[int, Any]] = {}

    def __len__(self) -> int:
        return len(self.values)

    def extend(self, scores: Sequence[Score]) -> None:
        """Add scores: every column gets their values, or (if one raises) nothing changes."""
        values: list[Value] = [s.value for s in scores]  # type: ignore[misc]
        added = [(column, list(map(fn, values))) for fn, column in self._columns.values()]
        placed = [
            (children, [str(v.get(key, "")) for v in values])
            for key, children in self._groups.items()
        ]
        self.scores.extend(scores)
        self.values.extend(values)
        for column, part in added:
            column.extend(part)
        for children, names in placed:
            for score, name in zip(scores, names, strict=True):
                children.setdefault(name, Table()).extend([score])

    def rows(self) -> Rows:
        rows = Rows(self.values)
        rows.table = self
        return rows

    def column(self, key: Hashable, fn: Callable[[Value], Any]) -> list[Any]:
        """``[fn(v) for v in values]``, computed once per value; ``key`` names ``fn``."""
        if key not in self._columns:
            self._columns[key] = (fn, [fn(v) for v in self.values])
        return self._columns[key][1]

    def memo(self, key: Hashable, fn: Callable[[], Any]) -> Any:
        """``fn()`` once per length of the table (for arrays built from columns)."""
        hit = self._memo.get(key)
        if hit is None or hit[0] != len(self.values):
            hit = (len(self.values), fn())
            self._memo[key] = hit
        return hit[1]

    def codes(self, field: str, labels: Sequence[str] = (), as_str: bool = False) -> np.ndarray:
        """The field's values (``str()`` of them with ``as_str``) as integer codes: ``labels``
        are 0..k-1, any other value gets its own code from k on; one code table for every
        field coded with the same ``labels`` and ``as_str``, as ``encode`` codes gold and
        predictions together."""
        key = (tuple(labels), as_str)
        table = self._codes.setdefault(key, {x: i for i, x in enumerate(labels)})

        def code(v: Value) -> int:
            x = str(v[field]) if as_str else v[field]
            return table.setdefault(x, len(table))

        column = self.column(("code", field, key), code)
        return self.memo(  # type: ignore[no-any-return]
            ("codes", field, key), lambda: np.fromiter(column, np.int64, len(column))
        )

    def mask(self, field: str) -> np.ndarray:
        """``bool(v[field])`` of every value."""
        column = self.column(("bool", field), lambda v: bool(v[field]))
        return self.memo(  # type: ignore[no-any-return]
            ("mask", field), lambda: np.fromiter(column, bool, len(column))
        )

    def group_codes(self, field: str) -> tuple[list[str], np.ndarray]:
        """Names of the values of ``str(v[field])`` where ``v.get(field)`` is true, in order of
        first appearance, and each value's index into them (-1: left out)."""
        names = self._names.setdefault(field, {})

        def code(v: Value) -> int:
            return names.setdefault(str(v[field]), len(names)) if v.get(field) else -1

        column = self.column(("group", field), code)
        codes = self.memo(("groups", field), lambda: np.fromiter(column, np.int64, len(column)))
        return list(names), codes

    def groups(self, key: str) -> dict[str, Table]:
        """One table per value of ``str(v.get(key, ""))``, in order of first appearance."""
        if key not in self._groups:
            children: dict[str, Table] = {}
            for score, value in zip(self.scores, self.values, strict=True):
                children.setdefault(str(value.get(key, "")), Table()).extend([score])
            self._groups[key] = children
        return self._groups[key]


_TABLES: OrderedDict[int, Table] = OrderedDict()
#: the list of the last call and its table: Inspect passes one list to every metric of a scorer
_LAST: list[Any] = [None, None, 0]


def table_of(scores: Sequence[SampleScore]) -> Table | None:
    """The table of these scores' values, reusing (and extending) the one of an earlier call
    whose scores are a prefix of these; None if there are none or a value is not a dict."""
    last, last_table, last_len = _LAST
    if scores is last and len(scores) == last_len and last_table is not None:
        return last_table  # type: ignore[no-any-return]
    objs = list(map(_score, scores))
    if not objs:
        return None
    key = id(objs[0])
    table = _TABLES.get(key)
    if (
        table is None
        or len(table.scores) > len(objs)
        or not all(map(operator.is_, table.scores, objs))
    ):
        table = None
    new = objs[len(table.scores) :] if table is not None else objs
    if not all(type(s.value) is dict for s in new):
        return None
    try:
        if table is None:
            table = Table()
        table.extend(new)
    except Exception:  # noqa: BLE001 - a value a column cannot read: the plain path decides
        _TABLES.pop(key, None)
        return None
    _TABLES[key] = table
    _TABLES.move_to_end(key)
    while len(_TABLES) > MAX_TABLES:
        _TABLES.popitem(last=False)
    _LAST[:] = [scores, table, len(scores)]
    return table


_score = operator.attrgetter("score")


def table_rows(values: Sequence[Value]) -> Table | None:
    """The table behind ``values`` when they came from :meth:`Table.rows`, else None."""
    return getattr(values, "table", None) if isinstance(values, Rows) else None


def present_mean(table: Table, key: str) -> float:
    """``float(np.mean(xs))`` over the values whose ``key`` is present (not None); NaN for none.

    The same list, in the same order, as the plain path's
    (:func:`med_evals.scorers.generation.mean_present`), so the same mean.
    """
    column = table.column(("get", key), lambda v: v.get(key))

    def mean() -> float:
        xs = [float(x) for x in column if x is not None]
        return float(np.mean(xs)) if xs else math.nan

    return table.memo(("mean", key), mean)  # type: ignore[no-any-return]
