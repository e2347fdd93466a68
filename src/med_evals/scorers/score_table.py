"""Score values as columns, kept across Inspect's live metric refreshes.

While a run is in progress Inspect recomputes every metric over all scores so far, about once a
second (and at most a tenth of the time), so a metric that reads every score value in Python
costs more the longer the run. Between two refreshes the scores are the same ``Score`` objects
in the same order, followed by the new ones (the epoch reducer returns a single epoch's score
unchanged). A :class:`Table` therefore reads each value once: the next refresh finds the table
whose scores are a prefix of its own (by object identity) and reads only the new ones. Every
column derived from the values (a label's integer code, a group, a float) is extended the same
way, and every metric of the scorer reads the same table.

There is one path: every number is computed from a table. During a run it is the scores'
cached table (:func:`table_of`); over values read back from a log (the report, the gate) it is a
table built for them (:func:`rows_of`). The numbers do not depend on which: tests compare a
table extended at every live refresh with one built from scratch, on random values, and a
replayed run's logged metrics with recorded ones to the last digit. Score values must be dicts:
anything else is a ``ValueError`` naming the value.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from inspect_ai.scorer import SampleScore, Score

Value = Mapping[str, Any]

#: tables kept (each holds its scores): one per scorer of the runs in progress is enough
MAX_TABLES = 8


def code_table(labels: Sequence[Any] = ()) -> dict[Any, int]:
    """A label code table: ``labels`` are 0..k-1 (:func:`code_of` adds any other value)."""
    return {x: i for i, x in enumerate(labels)}


def code_of(table: dict[Any, int], value: Any) -> int:
    """``value``'s integer code in ``table``: a label's own, any other value its own code from
    k on (added on first sight). The one label encoder: the cached columns' codes
    (:meth:`Table.codes`) and :func:`med_evals.scorers.classification.encode` both code through
    it, so scikit-learn sees the same integers either way."""
    return table.setdefault(value, len(table))


class Rows(list[Value]):
    """A list of score values that knows the :class:`Table` it came from."""

    table: Table

    def take(self, positions: Sequence[int] | np.ndarray) -> Rows:
        """The values at ``positions`` (a bootstrap resample: repeats allowed), as the rows of
        a table whose columns are this table's at those positions (:meth:`Table.take`)."""
        return self.table.take(positions).rows()


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
        #: a table of a parent's values at some positions (:meth:`take`): its columns are read
        #: from the parent's at those positions, each value's code the parent's
        self._parent: tuple[Table, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.values)

    @classmethod
    def of_values(cls, values: Sequence[Value]) -> Table:
        """A table of score values read back from a log (no scores to keep)."""
        table = cls()
        table.extend_values(values)
        return table

    def extend(self, scores: Sequence[Score]) -> None:
        """Add scores: every column gets their values, or (if one raises) nothing changes."""
        self.extend_values([s.value for s in scores], scores)  # type: ignore[misc]

    def extend_values(self, values: Sequence[Value], scores: Sequence[Score] = ()) -> None:
        """Add values (and their scores, when they have some): every column gets them, or (if
        one raises) nothing changes."""
        for v in values:
            if not isinstance(v, Mapping):
                raise ValueError(f"these metrics need dict score values, got {v!r}")
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
            for i, name in enumerate(names):
                child = children.setdefault(name, Table())
                child.extend_values(values[i : i + 1], scores[i : i + 1])

    def take(self, positions: Sequence[int] | np.ndarray) -> Table:
        """A table of the values at ``positions`` (repeats allowed), whose columns, codes and
        masks are this table's at those positions: a bootstrap resample reads each value's
        fields once, in the table it was drawn from, not once per resample. The numbers are
        those of a table built for the same values (:func:`rows_of`): a label's code is the
        same in both, and any other value's code (from k on) is only ever compared for
        equality with another's, never with a label's."""
        idx = np.asarray(positions, dtype=np.int64)
        child = Table()
        child.values = [self.values[i] for i in idx]
        child._parent = (self, idx)
        return child

    def rows(self) -> Rows:
        rows = Rows(self.values)
        rows.table = self
        return rows

    def column(self, key: Hashable, fn: Callable[[Value], Any]) -> list[Any]:
        """``[fn(v) for v in values]``, computed once per value; ``key`` names ``fn``."""
        if key not in self._columns:
            if self._parent is not None:
                parent, idx = self._parent
                whole = parent.column(key, fn)
                self._columns[key] = (fn, [whole[i] for i in idx])
            else:
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
        if self._parent is not None:
            parent, idx = self._parent
            return self.memo(  # type: ignore[no-any-return]
                ("codes", field, key), lambda: parent.codes(field, labels, as_str)[idx])
        table = self._codes.setdefault(key, code_table(labels))

        def code(v: Value) -> int:
            return code_of(table, str(v[field]) if as_str else v[field])

        column = self.column(("code", field, key), code)
        return self.memo(  # type: ignore[no-any-return]
            ("codes", field, key), lambda: np.fromiter(column, np.int64, len(column))
        )

    def mask(self, field: str) -> np.ndarray:
        """``bool(v[field])`` of every value."""
        if self._parent is not None:
            parent, idx = self._parent
            return self.memo(  # type: ignore[no-any-return]
                ("mask", field), lambda: parent.mask(field)[idx])
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
            for i, value in enumerate(self.values):
                child = children.setdefault(str(value.get(key, "")), Table())
                child.extend_values([value], self.scores[i : i + 1])
            self._groups[key] = children
        return self._groups[key]


_TABLES: OrderedDict[int, Table] = OrderedDict()
#: the list of the last call and its table: Inspect passes one list to every metric of a scorer
_LAST: list[Any] = [None, None, 0]


def table_of(scores: Sequence[SampleScore]) -> Table:
    """The table of these scores' values, reusing (and extending) the one of an earlier call
    whose scores are a prefix of these. A value that is not a dict, or that a column cannot
    read, raises (and leaves no table behind)."""
    last, last_table, last_len = _LAST
    if scores is last and len(scores) == last_len and last_table is not None:
        return last_table  # type: ignore[no-any-return]
    objs = list(map(_score, scores))
    if not objs:
        return Table()
    key = id(objs[0])
    table = _TABLES.get(key)
    if (
        table is None
        or len(table.scores) > len(objs)
        or not all(map(operator.is_, table.scores, objs))
    ):
        table = None
    new = objs[len(table.scores) :] if table is not None else objs
    try:
        if table is None:
            table = Table()
        table.extend(new)
    except Exception:
        _TABLES.pop(key, None)
        raise
    _TABLES[key] = table
    _TABLES.move_to_end(key)
    while len(_TABLES) > MAX_TABLES:
        _TABLES.popitem(last=False)
    _LAST[:] = [scores, table, len(scores)]
    return table


_score = operator.attrgetter("score")


def rows_of(values: Sequence[Value]) -> Rows:
    """``values`` as rows of a table: the same rows when they came from :meth:`Table.rows`
    (during a run), else the rows of a table built for them (values read back from a log)."""
    if isinstance(values, Rows):
        return values
    return Table.of_values(values).rows()


def resampling_rows(values: Sequence[Any]) -> Sequence[Any]:
    """``values`` ready to be resampled by :mod:`med_evals.stats.intervals`' bootstraps: the
    rows of a table (:func:`rows_of`, whose :meth:`Rows.take` reads each value's fields once
    for all resamples) when every value is a dict, else the values as they are."""
    if all(isinstance(v, Mapping) for v in values):
        return rows_of(values)
    return values
