"""Classification metrics shared by every labelled task, computed with scikit-learn.

They read dict score values with ``prediction`` (a label, ``INVALID`` or ``ERROR``), ``target``
and ``valid``, plus an optional ``condition``: a run holding several conditions gets one value
per condition (keys ``<condition>/<metric>``), a run with one condition plain numbers. Names say
over which samples a metric is computed:

- ``*_all``: every sample; an invalid or errored reply counts as wrong (a miss for its gold
  label in macro-F1, a false positive for no label);
- ``*_valid``: only samples whose reply parsed to a label.

The study's **headline** metric lives here too (:func:`headline`): every study's chosen numbers
under plain names, computed by :meth:`med_evals.study.spec.Study.headline_values` (the spec's
``compute``: for the label studies :func:`label_headline`, below), the function the report
prints and ``med-evals regress`` gates; and :func:`metric_values`, a metric set over values
read back from a log (the report's and the gate's full metric set).
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, Score, metric

from med_evals.inspect_internals.compat import registry_unqualified_name
from med_evals.scorers.labels import ERROR, INVALID
from med_evals.scorers.score_table import code_of, code_table, rows_of, table_of
from med_evals.study.spec import Study

Value = Mapping[str, Any]


def per_condition(
    scores: Sequence[SampleScore], fn: Callable[[list[Value]], Any], name: str
) -> dict[str, Any]:
    """``fn`` per condition: plain names for one condition (a number as ``{name: value}``),
    keyed ``<condition>/<name|key>`` for several.

    ``fn`` gets each condition's values as rows of the scores' cached
    :class:`~med_evals.scorers.score_table.Table` (same values, same order), which the metric
    functions below read instead of the dicts.

    Not Inspect's ``grouped()``: it keys even one condition by its name, nests a dict-valued
    ``fn``'s numbers under the condition instead of ``<condition>/<key>``, and groups by sample
    metadata, which values read back from a log (:func:`metric_values`) do not carry
    (docs/numbers.md, "Inspect's own parts").
    """
    groups = {g: t.rows() for g, t in table_of(scores).groups("condition").items()}
    results = {g: fn(vals) for g, vals in groups.items()}
    if len(results) == 1:
        res = next(iter(results.values()))
        # a number is returned under its plain name, so the log and viewer show ``name``
        # rather than the registry name (``med_evals/name``)
        return dict(res) if isinstance(res, Mapping) else {name: res}
    flat: dict[str, Any] = {}
    for g, res in results.items():
        if isinstance(res, Mapping):
            flat.update({f"{g}/{k}": v for k, v in res.items()})
        else:
            flat[f"{g}/{name}"] = res
    return flat


def condition_metric(fn: Callable[[list[Value]], Any], name: str) -> Metric:
    """The metric function of :func:`per_condition` of ``fn``: what each ``@metric`` below
    returns."""

    def compute(scores: list[SampleScore]) -> dict[str, Any]:
        return per_condition(scores, fn, name)

    return compute


def each_condition(
    scores: Sequence[SampleScore], fn: Callable[[list[Value]], Any], name: str
) -> Any:
    """:func:`per_condition` for a metric that returns a number in a run of one condition and
    must keep doing so (Inspect logs a number under the metric's own name, ``rouge_l_mean``):
    ``fn`` of all the values when they hold one condition (or none), else one value per
    condition (``<condition>/<name|key>``)."""
    table = table_of(scores)
    if len(table.groups("condition")) <= 1:
        return fn(table.rows())
    return per_condition(scores, fn, name)


def encode(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Gold and predicted labels as integer codes: ``labels`` are 0..k-1, any other string
    (``INVALID``, ``ERROR``, an unexpected label) gets its own code from k on.

    scikit-learn gives the same metrics on codes as on strings, about five times faster (its
    target-type checks on string arrays dominate); Inspect recomputes metrics while a run is
    in progress, so this matters on large runs.
    """
    codes = code_table(labels)
    g = np.fromiter((code_of(codes, x) for x in gold), dtype=np.int64)
    p = np.fromiter((code_of(codes, x) for x in pred), dtype=np.int64)
    return g, p


def accuracy_codes(g: np.ndarray, p: np.ndarray) -> float:
    """Accuracy of integer codes (NaN for no samples): scikit-learn's ``accuracy_score`` as it
    computes it for one label per sample, the mean of ``g == p`` in float64, without its input
    checks (most of the time of a bootstrap's resample). The one accuracy computation of the
    package: every accuracy, of every study, per group or overall, logged, reported or gated,
    is this call; ``tests/scorers/test_classification.py`` checks it is scikit-learn's, bit for
    bit, on random codes."""
    return float(np.mean(g == p)) if len(g) else math.nan


def confusion_codes(g: np.ndarray, p: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` x ``k`` confusion counts of codes ``0 .. k-1`` (rows gold, columns predicted):
    scikit-learn's ``confusion_matrix(g, p, labels=range(k))``, which leaves out a sample whose
    gold or predicted code is not one of them, counted with ``np.bincount`` (checked against
    scikit-learn in ``tests/scorers/test_classification.py``)."""
    keep = (g >= 0) & (g < k) & (p >= 0) & (p < k)
    cells = np.bincount(g[keep] * k + p[keep], minlength=k * k)
    return cells.reshape(k, k)


def f1_of_codes(g: np.ndarray, p: np.ndarray, codes: Sequence[int]) -> np.ndarray:
    """The F1 of each of ``codes``: scikit-learn's ``precision_recall_fscore_support``
    (``average=None``, ``zero_division=0``) as it computes it, ``2 tp / (true + predicted)``
    in float64 from the confusion counts, 0 where a code is neither true nor predicted; the one
    F1 computation of the package. The counts come from ``np.bincount`` instead of scikit-learn's
    input checks and multilabel confusion matrix, which took nearly all of the time of the
    report's and the gate's bootstraps (hundreds of calls per run and condition);
    ``tests/scorers/test_classification.py`` checks the values are scikit-learn's, bit for bit,
    on random codes."""
    wanted = np.asarray(list(codes), dtype=np.int64)
    if not len(g) or not len(wanted):
        return np.zeros(len(wanted), dtype=float)
    width = int(max(g.max(), p.max(), wanted.max())) + 1
    tp = np.bincount(g[g == p], minlength=width)[wanted]
    true = np.bincount(g, minlength=width)[wanted]
    predicted = np.bincount(p, minlength=width)[wanted]
    denom = 1.0 * true.astype(np.float64) + predicted.astype(np.float64)
    out = np.zeros(len(wanted), dtype=np.float64)
    np.divide(2.0 * tp.astype(np.float64), denom, out=out, where=denom != 0)
    return out


def f1_per_label_codes(g: np.ndarray, p: np.ndarray, n_labels: int) -> np.ndarray:
    """The F1 of each label code ``0 .. n_labels - 1`` (:func:`f1_of_codes`)."""
    return f1_of_codes(g, p, range(n_labels))


def macro_of(f1_per_label: np.ndarray) -> float:
    """Macro-F1 from the F1 of each label: their mean, as scikit-learn's
    ``f1_score(average="macro")``. The one macro-F1 of the package."""
    return float(np.mean(f1_per_label))


def macro_f1_codes(g: np.ndarray, p: np.ndarray, n_labels: int) -> float:
    """Macro-F1 over label codes ``0 .. n_labels - 1`` (NaN for no samples)."""
    if not len(g):
        return math.nan
    return macro_of(f1_per_label_codes(g, p, n_labels))


def accuracy_by_group(
    groups: Sequence[str], gold: Sequence[str], pred: Sequence[str]
) -> dict[str, float]:
    """Accuracy within each group (:func:`accuracy_codes` of the group's samples)."""
    if not len(gold):
        return {}
    names, group_codes = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    return accuracy_by_codes(names, group_codes, *encode(gold, pred))


def accuracy_by_codes(
    names: Sequence[str] | np.ndarray, group_codes: np.ndarray, g: np.ndarray, p: np.ndarray
) -> dict[str, float]:
    """:func:`accuracy_by_group` of integer-coded groups (``names[code]``) and labels."""
    return {
        str(name): accuracy_codes(g[group_codes == i], p[group_codes == i])
        for i, name in enumerate(names)
    }


def macro_f1_by_group(
    groups: Sequence[str], gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]
) -> dict[str, float]:
    """Macro-F1 over ``labels`` within each group, from one scikit-learn call.

    Each gold and predicted label is paired with its sample's group, and
    ``precision_recall_fscore_support(average=None)`` gives the F1 of every (group, label)
    pair; a pair's F1 is the label's F1 within the group (a sample is only ever confused with
    labels of its own group), so the mean over a group's labels is
    ``f1_score(group_gold, group_pred, labels=labels, average="macro", zero_division=0)``.
    One call instead of one per group keeps Inspect's live metric refreshes cheap.
    """
    if not len(gold):
        return {}
    names, group_codes = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    return macro_f1_by_codes(names, group_codes, *encode(gold, pred, labels), len(labels))


def macro_f1_by_codes(
    names: Sequence[str] | np.ndarray, group_codes: np.ndarray, g: np.ndarray, p: np.ndarray, k: int
) -> dict[str, float]:
    """:func:`macro_f1_by_group` of integer-coded groups and labels (the k labels: 0..k-1): the
    F1 of every (group, label) pair from one :func:`f1_of_codes` call on joint codes, each
    group's macro-F1 the :func:`macro_of` of its k labels."""
    width = int(max(g.max(), p.max())) + 1
    joint = [i * width + c for i in range(len(names)) for c in range(k)]
    f1 = f1_of_codes(group_codes * width + g, group_codes * width + p, joint)
    return {str(name): macro_of(f1[i * k : (i + 1) * k]) for i, name in enumerate(names)}


def label_codes(
    values: Sequence[Value], labels: Sequence[str] = (), valid_only: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The values' ``target`` and ``prediction`` as codes (:func:`encode`'s: ``labels`` are
    0..k-1), only the valid ones with ``valid_only``."""
    table = rows_of(values).table
    g, p = table.codes("target", labels), table.codes("prediction", labels)
    return (g[table.mask("valid")], p[table.mask("valid")]) if valid_only else (g, p)


def accuracy_of(values: Sequence[Value], valid_only: bool) -> float:
    """:func:`accuracy_codes` over all values or the valid ones."""
    return accuracy_codes(*label_codes(values, (), valid_only))


def macro_f1_of(values: Sequence[Value], labels: Sequence[str], valid_only: bool) -> float:
    """:func:`macro_f1_codes` over all values or the valid ones (``labels``: the labels
    averaged; a prediction outside them is a miss for its gold label, a false positive for
    none)."""
    return macro_f1_codes(*label_codes(values, labels, valid_only), len(labels))


def valid_rate_of(values: Sequence[Value]) -> float:
    """Share of all samples whose reply parsed to a label (NaN for no samples)."""
    if not values:
        return math.nan
    return int(rows_of(values).table.mask("valid").sum()) / len(values)


def _column(values: Sequence[Value], field: str) -> list[Any]:
    """``[v[field] for v in values]``, cached in the values' table."""
    return rows_of(values).table.column(("field", field), lambda v: v[field])


def counts_of(values: Sequence[Value], labels: Sequence[str]) -> dict[str, int]:
    """Predicted-label counts, then invalid and error counts, then the total."""
    c = Counter(_column(values, "prediction"))
    out = {label: c.get(label, 0) for label in labels}
    out[INVALID] = c.get(INVALID, 0)
    out[ERROR] = c.get(ERROR, 0)
    out["total"] = len(values)
    return out


def confusion_of(values: Sequence[Value], labels: Sequence[str]) -> dict[str, int]:
    """``gold>predicted`` counts over all samples; INVALID and ERROR are predicted columns."""
    cols = [*labels, INVALID, ERROR]
    if not values:
        return {}
    g, p = label_codes(values, cols)
    cm = confusion_codes(g, p, len(cols))
    return {f"{g}>{p}": int(cm[i, j]) for i, g in enumerate(labels) for j, p in enumerate(cols)}


def label_headline(values: Sequence[Value], labels: Sequence[str]) -> dict[str, float]:
    """Accuracy and macro-F1 over all samples (a reply without a label is wrong: a miss for its
    gold label), and the valid rate: the headline of the label-classification studies
    (MedEvidence, MedREQAL, HealthFC)."""
    rows = rows_of(values)
    return {
        "accuracy_all": float(accuracy_of(rows, valid_only=False)),
        "macro_f1_all": float(macro_f1_of(rows, labels, valid_only=False)),
        "valid_rate": float(valid_rate_of(rows)),
    }


@metric
def accuracy_all() -> Metric:
    """Accuracy over all samples; an invalid or errored reply is wrong."""

    return condition_metric(lambda v: accuracy_of(v, False), "accuracy_all")


@metric
def accuracy_valid() -> Metric:
    """Accuracy over samples whose reply parsed to a label."""

    return condition_metric(lambda v: accuracy_of(v, True), "accuracy_valid")


@metric
def macro_f1_all(labels: list[str]) -> Metric:
    """Macro-F1 over ``labels``, all samples (invalid replies are misses)."""

    return condition_metric(lambda v: macro_f1_of(v, labels, False), "macro_f1_all")


@metric
def macro_f1_valid(labels: list[str]) -> Metric:
    """Macro-F1 over ``labels``, samples whose reply parsed to a label."""

    return condition_metric(lambda v: macro_f1_of(v, labels, True), "macro_f1_valid")


@metric
def valid_rate() -> Metric:
    """Share of all samples whose reply parsed to a label."""

    return condition_metric(valid_rate_of, "valid_rate")


@metric
def label_counts(labels: list[str]) -> Metric:
    """How often each label was predicted, and how many replies were invalid or errors."""

    return condition_metric(lambda v: counts_of(v, labels), "label_counts")


@metric
def confusion_counts(labels: list[str]) -> Metric:
    """The confusion matrix as ``gold>predicted`` counts (INVALID / ERROR columns included)."""

    return condition_metric(lambda v: confusion_of(v, labels), "confusion")


@metric
def by_field(field: str, labels: list[str]) -> Metric:
    """Accuracy (all samples) and macro-F1 (all samples) for each value of ``field``."""

    def fn(values: list[Value]) -> dict[str, float]:
        groups = [str(v.get(field, "")) for v in values]
        gold = [v["target"] for v in values]
        pred = [v["prediction"] for v in values]
        acc = accuracy_by_group(groups, gold, pred)
        f1 = macro_f1_by_group(groups, gold, pred, labels)
        n = Counter(groups)
        out: dict[str, float] = {}
        for value in sorted(n):
            out[f"{field}={value}/accuracy_all"] = acc[value]
            out[f"{field}={value}/macro_f1_all"] = f1[value]
            out[f"{field}={value}/n"] = n[value]
        return out

    return condition_metric(fn, f"by_{field}")


# --- the headline metric, and a metric set over values read back --------------------


@metric
def headline(study: Study | str, label_set: str | None = None) -> Metric:
    """The study's headline numbers (per condition when a run holds several).

    Args:
        study: The study's spec (logged as its task name; Inspect passes that name when it
            recreates the metric from a log, e.g. ``inspect score``).
        label_set: The label set in use where the study has several (MedEvidence ``labels``).
    """
    if isinstance(study, str):
        study = Study.named(study)
    args = {study.label_arg: label_set} if study.label_arg and label_set else {}
    # the study's own function (its spec's compute: every headline number, in the headline's
    # order, as floats), as Study.headline_values calls it for the report and the gate
    numbers, labels = study.compute, study.labels(args)
    if numbers is None:
        raise TypeError(f"{study.task} has no headline numbers")

    # its own compute, not condition_metric's: the logged metric is the route's first hop
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return per_condition(scores, lambda values: dict(numbers(values, labels)), "headline")

    return compute


def metric_values(
    metrics: Sequence[Metric | dict[str, list[Metric]]], values: Mapping[str, Mapping[str, Any]],
    counts: bool = False,
) -> dict[str, float]:
    """``metrics`` computed over per-sample score values (sample id -> value), named as Inspect
    names them in a log: a metric returning a dict gives one entry per key.

    The report calls a scorer's full metric set through this, so it shows those numbers whether
    the run logged them (``-T metrics=full``) or only its headline. Every number is a float, as
    Inspect logs it; with ``counts``, a number the metric gave as an integer (a count: ``n``,
    ``judge_failures``) stays one, so a table prints ``12``, not ``12.000``.
    """
    scores = [SampleScore(score=Score(value=dict(v)), sample_id=sid) for sid, v in values.items()]
    out: dict[str, float] = {}

    def number(v: Any) -> float:
        return int(v) if counts and is_count(v) else float(v)

    for m in metrics:
        if not callable(m):
            raise TypeError("metric_values: per-key metric dicts are not supported")
        value = cast(Any, m)(scores)  # a Metric of SampleScores (ours all are)
        if isinstance(value, Mapping):
            out.update({str(k): number(v) for k, v in value.items() if v is not None})
        elif isinstance(value, int | float):
            out[registry_unqualified_name(m)] = number(value)
    return out


def is_count(value: Any) -> bool:
    """An integer (Python's or numpy's), not a boolean: a metric's count."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)