"""One spec per study: the single place that says what a study (an Inspect task of ours) is.

Everything that reads runs back — :mod:`med_evals.logs`, ``med-evals report``, ``med-evals
regress``, subsets and the CLI — asks :func:`spec` instead of keeping a table of its own:

- the task's name, title and ``version`` (the tasks pass ``SPEC.version`` to ``Task``);
- its label set (for MedEvidence, per ``labels`` task argument) and reply parser;
- the scorer whose per-sample values describe its predictions;
- its **headline metrics**: the numbers the paper reports, with the paper's denominator, each a
  function of the per-sample score values. The logged metric, its interval, the report's cell
  and the regression gate's comparison all call :meth:`Study.headline_values`;
- expected row and label counts, the subset source, the published reference tables, the
  conditions.

A change to a prompt, parser, metric definition or dataset pin changes :meth:`Study.fingerprint`;
``tests/test_studies.py`` compares it with the fingerprint recorded beside the version, so the
version is bumped with the change (``python -m med_evals.studies`` prints the new fingerprints).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from med_evals.scorers.classification import accuracy_of, macro_f1_of, valid_rate_of

Values = Sequence[Mapping[str, Any]]


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


def label_headline(values: Values, labels: Sequence[str]) -> dict[str, float]:
    """Accuracy and macro-F1 over all samples (a reply without a label is wrong: a miss for its
    gold label), and the valid rate: the headline of the label-classification studies."""
    return {
        "accuracy_all": accuracy_of(values, valid_only=False),
        "macro_f1_all": macro_f1_of(values, labels, valid_only=False),
        "valid_rate": valid_rate_of(values),
    }


VALID_RATE = Headline("valid_rate", "Valid rate", "all samples")
#: MedREQAL / HealthFC: the paper does not say over which samples; all samples is our reading
_DENOMINATOR = "our choice of denominator"
ACCURACY_ALL = Headline(
    "accuracy_all", "Accuracy", "all samples (no label = wrong)", "ours", _DENOMINATOR
)
MACRO_F1_ALL = Headline(
    "macro_f1_all", "Macro-F1", "all samples (no label = miss)", "ours", _DENOMINATOR
)


@dataclass(frozen=True)
class Study:
    """What one task is. Modules are named by import path and imported when first needed, so
    this module imports no task (the tasks import it for their version)."""

    task: str
    title: str
    version: str
    fingerprint_recorded: str
    scorer: str
    #: label set name -> module attribute ``"module:NAME"`` of a :class:`LabelSet`
    label_sets: Mapping[str, str]
    #: the task argument choosing the label set (None: one label set)
    label_arg: str | None
    parser: str
    headline: tuple[Headline, ...]
    #: ``"module:function"`` computing every headline number from one condition's values
    compute: str
    #: the module holding ``subset_source(data_dir)`` and the task function
    module: str
    #: dataset manifests whose pins the numbers depend on
    datasets: tuple[str, ...] = ()
    expected_rows: int | None = None
    expected_labels: Mapping[str, int] = field(default_factory=dict)
    reference_tables: tuple[str, ...] = ()
    #: attribute of ``module`` listing the conditions (None: the study has none)
    conditions_attr: str | None = None
    #: modules and attributes (``"module"`` or ``"module:NAME"``) the fingerprint covers
    fingerprint_of: tuple[str, ...] = ()

    # -- labels ------------------------------------------------------------------------------
    def label_set_name(self, task_args: Mapping[str, Any] | None = None) -> str:
        """The key of the label set a run used (its ``label_arg``), else the first (paper's)."""
        key = (task_args or {}).get(self.label_arg) if self.label_arg else None
        name = str(key) if key is not None and str(key) in self.label_sets else None
        return name or next(iter(self.label_sets))

    def label_set(self, task_args: Mapping[str, Any] | None = None) -> Any:
        return _attr(self.label_sets[self.label_set_name(task_args)])

    def labels(self, task_args: Mapping[str, Any] | None = None) -> tuple[str, ...]:
        return tuple(self.label_set(task_args).labels)

    def conditions(self) -> tuple[str, ...]:
        if not self.conditions_attr:
            return ()
        return tuple(getattr(importlib.import_module(self.module), self.conditions_attr))

    # -- numbers -----------------------------------------------------------------------------
    def headline_values(
        self, values: Values, task_args: Mapping[str, Any] | None = None
    ) -> dict[str, float]:
        """Every headline number over ``values`` (one condition's per-sample score values)."""
        numbers = _attr(self.compute)(values, self.labels(task_args))
        return {h.name: float(numbers[h.name]) for h in self.headline}

    def headline_by_name(self, name: str) -> Headline:
        for h in self.headline:
            if h.name == name:
                return h
        raise KeyError(f"{self.task} has no headline metric {name!r}")

    # -- subsets -----------------------------------------------------------------------------
    def subset_source(self, data_dir: str | None = None) -> Any:
        return importlib.import_module(self.module).subset_source(data_dir)

    # -- versioning --------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """A hash of the prompts, parser, metric code and dataset pins behind the numbers."""
        h = hashlib.sha256()
        parts = [*self.fingerprint_of, self.parser, self.compute, *self.label_sets.values()]
        for ref in sorted(set(parts)):
            h.update(ref.encode())
            h.update(_source_of(ref).encode())
        for hl in self.headline:
            h.update(f"{hl.name}|{hl.over}|{hl.source}".encode())
        for name in self.datasets:
            from med_evals.data import load_manifest

            m = load_manifest(name)
            pins = {f: (s.sha256, s.git_blob_sha1) for f, s in sorted(m.files.items())}
            # other pinned sources (the Hugging Face copy of MedREQAL) count too
            h.update(json.dumps([m.revision, pins, m.extra], sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]


def _attr(ref: str) -> Any:
    module, _, name = ref.partition(":")
    obj: Any = importlib.import_module(module)
    return getattr(obj, name) if name else obj


def _source_of(ref: str) -> str:
    obj = _attr(ref)
    try:
        return inspect.getsource(obj)
    except TypeError:  # a constant (a LabelSet, a prompt string)
        return repr(obj)


_S = "med_evals.scorers"
_VERDICT_FP = (
    f"{_S}.verdict",
    f"{_S}.verdict_metrics",
    f"{_S}.classification",
    f"{_S}.score_table",
    f"{_S}.generation",
    f"{_S}.bertscore",
    "med_evals.solvers.verdict",
)

ONCOLOGY_RCT = Study(
    task="oncology_rct",
    title="Oncology RCT evidence use (Windisch et al. 2026)",
    version="2.1.0",
    fingerprint_recorded="8df1b7572312f72f",
    scorer="trial_outcome",
    label_sets={"two": f"{_S}.labels:TRIAL_OUTCOME"},
    label_arg=None,
    parser=f"{_S}.labels:parse_outcome_strict",
    # the paper summarises performance "using F1-score (and accuracy)", F1 over valid replies
    headline=(
        Headline("macro_f1_valid", "Macro-F1", "valid predictions"),
        Headline("accuracy_valid", "Accuracy", "valid predictions"),
        VALID_RATE,
    ),
    compute=f"{_S}.oncology_rct:headline_numbers",
    module="med_evals.tasks.oncology_rct",
    datasets=("oncology-rct-250-counterfactual",),
    expected_rows=250,
    reference_tables=("oncology-table1-published.csv",),
    conditions_attr="CONDITIONS",
    fingerprint_of=(
        "med_evals.solvers.oncology_rct",
        f"{_S}.labels",
        f"{_S}.oncology_rct",
        f"{_S}.oncology_flips",
        f"{_S}.classification",
        f"{_S}.score_table",
        "med_evals.stats",
        "med_evals.tasks.oncology_conditions",
    ),
)

MEDEVIDENCE = Study(
    task="medevidence",
    title="MedEvidence (Polzak et al. 2026)",
    version="2.1.0",
    fingerprint_recorded="53a04a39632764ff",
    scorer="effect_direction",
    label_sets={"five": f"{_S}.medevidence:FIVE", "three": f"{_S}.medevidence:THREE"},
    label_arg="labels",
    parser=f"{_S}.medevidence:parse_effect",
    headline=(
        Headline("accuracy_all", "Accuracy", "all questions (invalid = wrong)"),
        # the authors' notebook computes accuracy, the parsable share and the confusion matrix
        Headline(
            "macro_f1_all", "Macro-F1", "all questions (invalid = miss)", "ours",
            "ours: the authors' code computes accuracy, not macro-F1",
        ),
        VALID_RATE,
    ),
    compute="med_evals.studies:label_headline",
    module="med_evals.tasks.medevidence",
    datasets=("medevidence",),
    expected_rows=250,
    conditions_attr="CONDITIONS",
    fingerprint_of=(
        f"{_S}.medevidence",
        f"{_S}.classification",
        f"{_S}.score_table",
        "med_evals.solvers.medevidence",
    ),
)

#: What MedREQAL and HealthFC share: labels, parser, scorer, headline and the code behind them.
_VERDICT_STUDY: dict[str, Any] = {
    "scorer": "verdict",
    "label_sets": {"verdict": f"{_S}.verdict:VERDICT"},
    "label_arg": None,
    "parser": f"{_S}.verdict:parse_verdict",
    "headline": (ACCURACY_ALL, MACRO_F1_ALL, VALID_RATE),
    "compute": "med_evals.studies:label_headline",
    "fingerprint_of": _VERDICT_FP,
}

MEDREQAL = Study(
    task="medreqal",
    title="MedREQAL (Vladika et al. 2024)",
    version="2.0.0",
    fingerprint_recorded="cddfebba8ef0f524",
    module="med_evals.tasks.medreqal",
    datasets=("medreqal",),
    expected_rows=2786,
    expected_labels={"SUPPORTED": 543, "REFUTED": 186, "NOT ENOUGH INFORMATION": 2057},
    reference_tables=("medreqal-table2-published.csv", "medreqal-table3-published.csv"),
    **_VERDICT_STUDY,
)

HEALTHFC = Study(
    task="healthfc",
    title="HealthFC (Vladika et al. 2024)",
    version="2.0.0",
    fingerprint_recorded="5f51078fed32b139",
    module="med_evals.tasks.healthfc",
    datasets=("healthfc",),
    expected_rows=750,
    expected_labels={"SUPPORTED": 202, "REFUTED": 125, "NOT ENOUGH INFORMATION": 423},
    **_VERDICT_STUDY,
)

STUDIES: dict[str, Study] = {s.task: s for s in (ONCOLOGY_RCT, MEDEVIDENCE, MEDREQAL, HEALTHFC)}

#: ``-T metrics=``: which metrics a run of a study logs. ``headline`` (default): the headline
#: numbers only (plus the flip rates of the oncology study, MedREQAL/HealthFC's ROUGE-L and
#: BERTScore means), so the viewer's title bar and the console at the end of a run fit a screen;
#: ``full``: the scorer's full metric set (intervals, counts, confusion cells, strata, the
#: lenient reading). The per-sample values, and so the report and the gate, are the same.
METRIC_SETS = ("headline", "full")
#: Task arguments that change no per-sample value: neither a run label nor a setup change.
NON_SETUP_ARGS = ("data_dir", "metrics")

#: Versions of the tasks that build data rather than measure a model (no headline metrics).
TOOL_VERSIONS = {"counterfactual_build": "2.0.0", "counterfactual_judges": "1.1.0"}


def spec(task: str) -> Study:
    """The study spec of ``task`` (``med_evals/oncology_rct`` or ``oncology_rct``)."""
    name = task.split("/")[-1]
    try:
        return STUDIES[name]
    except KeyError:
        raise KeyError(f"{task!r} is not a med_evals study ({', '.join(STUDIES)})") from None


@cache
def fingerprints() -> dict[str, str]:
    return {name: s.fingerprint() for name, s in STUDIES.items()}


if __name__ == "__main__":  # print the current fingerprints, to record beside a bumped version
    for name, fp in fingerprints().items():
        recorded = STUDIES[name].fingerprint_recorded
        print(f"{name:14} version {STUDIES[name].version:8} fingerprint {fp}"
              + ("" if fp == recorded else f"  (recorded: {recorded or 'none'})"))
