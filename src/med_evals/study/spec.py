"""What a task is: the :class:`Study` spec, one per task, written beside it.

Each task module (``tasks/oncology_rct.py``, ``tasks/medevidence.py``, ``tasks/medreqal.py``,
``tasks/healthfc.py``, ``tasks/counterfactual.py``) defines its ``SPEC``: a :class:`Study` naming
the task's parts as the objects themselves, so a reader (and an IDE) goes from the spec to each
part's code: its scorer (whose value function reads each reply with the study's parser), its
metric set, its headline numbers and the one function computing them, its label sets, its
conditions, what a shard and a subset hold (``item``), its data and the probe its version is
fingerprinted on. :mod:`med_evals.tasks` registers every spec in the papers' order
(:func:`register`), and :func:`med_evals.study.task.study_task` builds every task's ``Task`` from
its spec. The scorers and metrics never import a spec: the task hands its spec to them, so the
import graph runs one way::

    study/spec.py (this) <- solvers/, scorers/ <- study/task.py <- tasks/ (SPECs, registry)
    <- logs/ <- commands/

A number has one function: :meth:`Study.headline_values` (the study's ``compute``) gives every
headline number of one condition's per-sample score values; the logged ``headline`` metric, the
report's cells and the gate's comparison all call it. The counterfactual tools
(``counterfactual_build``, ``counterfactual_judges``) have specs too, with no headline: they
build or judge data, and are not studies the report and the gate compare (:data:`STUDIES`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import Metric, Scorer

    from med_evals.scorers.labels import LabelSet

Values = Sequence[Mapping[str, Any]]

#: ``-T metrics=``: which metrics a run of a study logs. ``headline`` (default): the headline
#: numbers only (plus the flip rates of the oncology study, MedREQAL/HealthFC's ROUGE-L and
#: BERTScore means), so the viewer's title bar and the console at the end of a run fit a screen;
#: ``full``: the scorer's full metric set (intervals, counts, confusion cells, strata, the
#: lenient reading). The per-sample values, and so the report and the gate, are the same.
METRIC_SETS = ("headline", "full")
#: Task arguments that change no per-sample value: neither a run label nor a setup change.
NON_SETUP_ARGS = ("data_dir", "metrics")


@dataclass(frozen=True)
class Headline:
    """One headline number: its log key, display name and denominator.

    A study's headline is ordered: its primary number first (the one the paper leads with),
    the valid rate after the numbers over replies. Inspect logs the metrics in this order, and
    the viewer's score column is the first one, so runs are ranked by the primary number.
    """

    name: str
    display: str
    #: which samples the number is over, in words (shown in the report and the gate)
    over: str
    #: "paper" when the paper/authors' code defines it, "ours" when we chose it (the number
    #: itself, or its denominator: ``why`` says which)
    source: str = "paper"
    #: for a number of ours: what is ours, in a few words (for the report's labels)
    why: str = ""


VALID_RATE = Headline("valid_rate", "Valid rate", "all samples")


#: Replies every study's parser is fingerprinted on (each study may add its own): labels of
#: every family in several spellings, markup, two labels, prose, blank and no reply.
PROBE_REPLIES: tuple[str | None, ...] = (
    "POSITIVE",
    "NEGATIVE",
    " negative.\n",
    "Positive",
    "The trial was POSITIVE.",
    "POSITIVE NEGATIVE",
    "",
    "   ",
    None,
    "SUPPORTED",
    "LABEL: REFUTED\nEXPLANATION: two trials disagree.",
    "Not enough information.",
    "**Label:** (supported)",
    "SUPPORTED or REFUTED",
    "The evidence is NOT SUPPORTED by trials.",
    "**Answer**: higher",
    "**Answer**: No Difference",
    "<think>maybe lower</think>\n**Answer**: lower",
    "**Answer**: insufficient data\n**Rationale**: none",
    "Answer: uncertain effect",
    "higher or lower",
)


@dataclass(frozen=True)
class Probe:
    """The fixed inputs a study's behaviour is fingerprinted on
    (:func:`med_evals.study.fingerprint.fingerprint`): a reflowed docstring changes nothing, a
    changed
    prompt, parse or number changes the fingerprint."""

    #: every input variant rendered for fixed, made-up samples (prompt texts and targets)
    prompts: Callable[[], Sequence[str]]
    #: replies the parser reads (under each label set)
    replies: Sequence[str | None]
    #: per-sample score values made by the study's own value function from fixed replies,
    #: under a label set (its name; None: the paper's)
    values: Callable[[str | None], Values]


#: The registry of every task's spec, task name -> spec, in the papers' order: the oncology
#: study and its counterfactual tools, MedEvidence, MedREQAL, HealthFC. :func:`register` fills it
#: (:mod:`med_evals.tasks` registers every spec, explicitly and in that order).
TASKS: dict[str, Study] = {}
#: The studies: the registered tasks with headline numbers, in the same order (the report's
#: sections follow it). Everything that reads study runs back (logs, report, regress, subsets,
#: the CLI) asks it, as does a metric Inspect recreates from a log (:meth:`Study.named`).
STUDIES: dict[str, Study] = {}


def plain_numbers(x: Any) -> Any:
    """Data as a fingerprint sees it: floats to 12 significant digits (the last bits of a float
    may differ between library builds), NaN as text, tuples as lists, keys as text."""
    if isinstance(x, float):
        return "nan" if math.isnan(x) else float(f"{x:.12g}")
    if isinstance(x, dict):
        return {str(k): plain_numbers(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain_numbers(v) for v in x]
    return x


def digest(data: Any) -> str:
    """A short hash of :func:`plain_numbers` of ``data`` (16 hex digits)."""
    text = json.dumps(plain_numbers(data), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def register(*specs: Study) -> dict[str, Study]:
    """Add ``specs`` to :data:`TASKS` in order, and each one with headline numbers to
    :data:`STUDIES` (a task registered twice with another spec is an error: one spec per
    task); returns :data:`STUDIES`."""
    for s in specs:
        if TASKS.setdefault(s.task, s) is not s:
            raise ValueError(f"task {s.task!r} is registered already")
        if s.headline:
            STUDIES[s.task] = s
    return STUDIES


def _sample_id(sample: Sample) -> Hashable:
    return str(sample.id)


@dataclass(frozen=True, eq=False)
class Study:
    """What one task is; see the module's docstring."""

    task: str
    title: str
    version: str
    #: the scorer factory (an Inspect ``@scorer``); its registry name is the log's scorer name;
    #: its value function reads each reply into the per-sample score value every number is
    #: computed from
    scorer: Callable[..., Scorer]
    #: :func:`med_evals.study.fingerprint.fingerprint` of this version (tests/test_studies.py
    #: compares; ``""`` for a task without a probe: the counterfactual tools)
    fingerprint_recorded: str = ""
    #: the scorer's metric set: ``metrics(study, full=..., label_set=..., **options)`` (None:
    #: the metrics the scorer declares)
    metrics: Callable[..., list[Metric | dict[str, list[Metric]]]] | None = None
    #: label set name -> label set (the first is the paper's)
    label_sets: Mapping[str, LabelSet] = field(default_factory=dict)
    #: the reply parser: ``parser(reply)``, or ``parser(reply, label_set_name)`` with label_arg
    parser: Callable[..., str] | None = None
    #: the headline numbers, the primary one first (none: not a study the report and the gate
    #: compare)
    headline: tuple[Headline, ...] = ()
    #: every headline number from one condition's values: ``compute(values, labels)``, in the
    #: headline's order, as floats (the logged ``headline`` metric calls it; so does
    #: :meth:`headline_values` for the report and the gate)
    compute: Callable[[Values, Sequence[str]], Mapping[str, float]] | None = None
    #: the fixed inputs its behaviour is fingerprinted on (None: not fingerprinted)
    probe: Probe | None = None
    #: the item a sample belongs to, what a shard keeps together and a stored subset names (a
    #: trial with all its conditions, a question with all its prompt variants); default: the
    #: sample itself. ``item_name`` says what an item is, in messages and the shard record.
    item: Callable[[Sample], Hashable] = _sample_id
    item_name: str = "sample"
    #: the keys of the per-sample score value ``inspect view``'s sample list shows beside the
    #: sample's id, input (what the sample asks), gold (target) and predicted label (answer),
    #: with their headers (:func:`med_evals.study.task.viewer_of`); the list is sorted by
    #: ``view_sort`` (value keys) and then the sample id
    view_scores: Mapping[str, str] = field(default_factory=lambda: {"valid": "Valid label"})
    view_sort: tuple[str, ...] = ()
    #: the task argument choosing the label set (None: one label set)
    label_arg: str | None = None
    #: the generation means (ROUGE-L, BERTScore) of one condition's values, key -> mean
    means: Callable[[Values], Mapping[str, float]] | None = None
    #: the study's conditions, in the paper's order (empty: none)
    conditions: tuple[str, ...] = ()
    #: (revision, stratum of each item, identifying text of each item), for drawing subsets
    subset_source: Callable[[str | None], tuple[str, dict[str, str], dict[str, str]]] | None = None
    #: dataset manifests whose pins the numbers depend on
    datasets: tuple[str, ...] = ()
    #: the papers' published tables (:mod:`med_evals.data.published`)
    reference_tables: tuple[str, ...] = ()
    #: label set name -> the labels that are an abstention (the reply declines to commit: NOT
    #: ENOUGH INFORMATION; MedEvidence's uncertain classes); none: the study has no abstention
    #: (:mod:`med_evals.scorers.abstention`)
    abstaining: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the sample metadata key naming each sample's source, where several samples share one
    #: (the oncology trial behind each condition's sample, MedEvidence's review): intervals
    #: clustered by it stand beside the plain ones
    #: (:func:`med_evals.stats.intervals.clustered_wilson_interval`); None: the
    #: data records none
    source: str | None = None

    @staticmethod
    def named(task: str) -> Study:
        """The registered spec of ``task`` (``med_evals/oncology_rct`` or ``oncology_rct``):
        what a metric recreated by Inspect from a log (``inspect score``) receives is the task
        name it recorded. The specs are registered when :mod:`med_evals.tasks` is imported
        (Inspect imports it with the package's entry point)."""
        try:
            return STUDIES[task.split("/")[-1]]
        except KeyError:
            known = ", ".join(STUDIES) or "none registered: import med_evals.tasks"
            raise KeyError(f"{task!r} is not a med_evals study ({known})") from None

    def _repr_params_(self) -> str:
        """How Inspect records a spec passed to a metric (the log's metric options)."""
        return self.task

    @property
    def scorer_name(self) -> str:
        """The scorer's name in a log (its registry name without the package)."""
        from med_evals.inspect_internals.compat import registry_unqualified_name

        return registry_unqualified_name(self.scorer)

    # -- labels ------------------------------------------------------------------------------
    def label_set_name(self, task_args: Mapping[str, Any] | None = None) -> str:
        """The key of the label set a run used (its ``label_arg``), else the first (paper's)."""
        key = (task_args or {}).get(self.label_arg) if self.label_arg else None
        name = str(key) if key is not None and str(key) in self.label_sets else None
        return name or next(iter(self.label_sets))

    def label_set(self, task_args: Mapping[str, Any] | None = None) -> LabelSet:
        return self.label_sets[self.label_set_name(task_args)]

    def labels(self, task_args: Mapping[str, Any] | None = None) -> tuple[str, ...]:
        return tuple(self.label_set(task_args).labels)

    def abstaining_of(self, label_set: str | None = None) -> tuple[str, ...]:
        """The labels of the label set named ``label_set`` (None: the first, the paper's) that
        are an abstention; empty: the study has none (a run's label set:
        ``abstaining_of(label_set_name(task_args))``)."""
        return tuple(self.abstaining.get(label_set or next(iter(self.label_sets)), ()))

    def _part(self, name: str) -> Any:
        """The part ``name`` of a study (a spec without it, a counterfactual tool's, has no such
        numbers: a programming error to ask)."""
        part = getattr(self, name)
        if part is None:
            raise TypeError(f"{self.task} is not a study with headline numbers: it has no {name}")
        return part

    def parse(self, reply: str | None, label_set: str | None = None) -> str:
        """A reply's label under ``label_set`` (the study's parser)."""
        parser = self._part("parser")
        if self.label_arg:
            return str(parser(reply, label_set or next(iter(self.label_sets))))
        return str(parser(reply))

    # -- numbers -----------------------------------------------------------------------------
    def headline_values(
        self, values: Values, task_args: Mapping[str, Any] | None = None
    ) -> dict[str, float]:
        """Every headline number over ``values`` (one condition's per-sample score values)."""
        numbers = self._part("compute")(values, self.labels(task_args))
        return {h.name: float(numbers[h.name]) for h in self.headline}

    def behaviour(self, task_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What a run's gated numbers depend on in the study's code, recorded in each run's log
        (the task's metadata ``behaviour``) so that the gate compares it between a baseline and
        a new run instead of the task's version (:mod:`med_evals.logs.comparable`): the labels
        of the run's label set, a digest of the parser's labels for the probe's replies
        (``parser``), of the per-sample score values the study's value function makes of them
        (``values``), and of each headline number over those values per condition
        (``metrics``, one digest per gated number). The prompts sent and the data are compared
        from the log itself (each sample's input; the data pin); a new metric of the full set,
        a new condition, docs or a refactoring change none of these."""
        name = self.label_set_name(task_args)
        args = {self.label_arg: name} if self.label_arg else {}
        probe: Probe = self._part("probe")
        values = list(probe.values(name))
        by_condition: dict[str, list[Mapping[str, Any]]] = {}
        for v in values:
            by_condition.setdefault(str(v.get("condition", "")), []).append(v)
        numbers = {c: self.headline_values(vs, args) for c, vs in sorted(by_condition.items())}
        return {
            "labels": list(self.labels(args)),
            "parser": digest([self.parse(r, name) for r in probe.replies]),
            "values": digest(values),
            "metrics": {h.name: digest({c: n[h.name] for c, n in numbers.items()})
                        for h in self.headline},
        }

    def mean_values(self, values: Values) -> dict[str, float]:
        """The generation means over ``values`` (none for a study without generation scores)."""
        return dict(self.means(values)) if self.means else {}

    def headline_by_name(self, name: str) -> Headline:
        for h in self.headline:
            if h.name == name:
                return h
        raise KeyError(f"{self.task} has no headline metric {name!r}")

    # -- the scorer --------------------------------------------------------------------------
    def metric_set(
        self, full: bool, task_args: Mapping[str, Any] | None = None, **options: Any
    ) -> list[Metric | dict[str, list[Metric]]]:
        """The scorer's metrics for a run with ``task_args`` (its label set), handed this spec."""
        label_set = self.label_set_name(task_args) if self.label_arg else None
        return list(self._part("metrics")(self, full=full, label_set=label_set, **options))
