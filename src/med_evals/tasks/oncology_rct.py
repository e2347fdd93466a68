# inspect-evals-lint: ignore-file[main_file] -- one task module per study is this package's layout
"""Oncology RCT evidence use: progressive content removal and counterfactual results.

Windisch et al. 2026, "Evidence use and identifier-conditioned prior knowledge in LLM
classification of oncology trials, assessed through progressive content removal and
counterfactual testing". 250 oncology RCTs; the model answers POSITIVE (primary endpoint met)
or NEGATIVE, from the input variant of each condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.solver import Solver, generate, system_message

from med_evals.data.datasets import (
    DatasetError,
    DatasetFile,
    check_counts,
    count_summary,
    fetch,
    indexed_records,
    read_csv_checked,
    resolve_file,
)
from med_evals.inspect_internals.compat import active_model
from med_evals.scorers.oncology_rct import (
    DEFAULT_FLIP_PAIRS,
    TRIAL_OUTCOME,
    headline_numbers,
    invert_outcome,
    outcome_metrics,
    outcome_value,
    parse_outcome_strict,
    trial_outcome,
)
from med_evals.solvers import oncology_rct as prompts
from med_evals.solvers.generate import generate_or_record_error
from med_evals.study.params import (
    Choice,
    File,
    Integer,
    IsoDate,
    Pairs,
    ParamError,
)
from med_evals.study.spec import PROBE_REPLIES, VALID_RATE, Headline, Probe, Study
from med_evals.study.task import study_params, study_task, subset_items
from med_evals.tasks.oncology_conditions import (
    CONDITIONS,
    GROUPS,
    Condition,
    condition_fields,
    resolve_conditions,
)
from med_evals.tasks.oncology_controls import Controls, make_controls, parse_trial_date

DATASET = "oncology-rct-250-counterfactual"
FILE = "trials.csv"
REQUIRED_COLUMNS = (
    "doi",
    "journal",
    "date",
    "title",
    "abstract",
    "abstract_introduction",
    "abstract_methods",
    "abstract_results",
    "abstract_conclusions",
    "Annotation_accept",
    "counterfactual_title",
    "counterfactual_abstract",
    "target_label",
    "sections_modified",
)
NON_EMPTY = ("doi", "date", "title", "abstract", "counterfactual_title", "counterfactual_abstract")


# --- generation settings ----------------------------------------------------------------------

#: Providers the study called without a temperature: its Anthropic call set none; its OpenAI and
#: Google calls sent ``temperature=0`` (``run_evaluation.py``).
NO_TEMPERATURE_PROVIDERS = ("anthropic",)


def study_generate_config(model: str | None) -> GenerateConfig:
    """What the study sent to ``model``'s provider: at most 500 output tokens, and temperature 0
    except to Anthropic (none). Any other provider, or a model not known when the task is built,
    gets temperature 0. ``--temperature`` and ``--max-tokens`` override both."""
    provider = model.split("/", 1)[0] if model else None
    temperature = None if provider in NO_TEMPERATURE_PROVIDERS else 0.0
    return GenerateConfig(temperature=temperature, max_tokens=500)


def evaluated_model() -> str | None:
    """The model under evaluation when the task is built by ``inspect eval`` (None for a Task
    built in Python before any model is named: no model is made here)."""
    model = active_model()
    return str(model) if model is not None else None


# --- loading ----------------------------------------------------------------------------------


def load_trials(data_dir: str | Path | None = None) -> tuple[pd.DataFrame, DatasetFile]:
    """The 250 trials, checked: columns, labels, inverted targets, dates."""
    file = fetch(DATASET, FILE, data_dir)
    return read_trials(file.path), file


def read_trials(path: Path) -> pd.DataFrame:
    labels = set(TRIAL_OUTCOME.labels)
    df = read_csv_checked(
        path,
        REQUIRED_COLUMNS,
        labels={"Annotation_accept": labels, "target_label": labels},
        non_empty=NON_EMPTY,
    )
    dup = df.index[df["doi"].duplicated()]
    if len(dup):
        raise DatasetError(
            f"{path}: row {dup[0] + 1}, column 'doi': duplicate DOI {df['doi'][dup[0]]!r} "
            "(trials must be unique)"
        )
    for i, row in indexed_records(df):
        if row["target_label"] != invert_outcome(row["Annotation_accept"]):
            raise DatasetError(
                f"{path}: row {i + 1}, column 'target_label': {row['target_label']!r} is not the "
                f"inverse of Annotation_accept {row['Annotation_accept']!r}"
            )
        try:
            parse_trial_date(row["date"])
        except ValueError as ex:
            raise DatasetError(f"{path}: row {i + 1}, column 'date': {ex}") from None
    return df


# --- samples ----------------------------------------------------------------------------------

def record_to_sample(
    row: Mapping[str, Any], trial: int, pos: int, cond: Condition, controls: Controls
) -> Sample:
    """One trial under one condition.

    Args:
        row: The trial's CSV row.
        trial: Its row index in the dataset (stable id across conditions and runs).
        pos: Its position in the loaded table (indexes ``controls``).
        cond: The condition.
        controls: Shuffled / synthetic DOIs and identifiers of the loaded table.
    """
    truth = row["Annotation_accept"]
    return Sample(
        id=f"{cond.name}-{trial:03d}",
        input=cond.template.format(**condition_fields(row, pos, cond, controls)),
        target=invert_outcome(truth) if cond.counterfactual else truth,
        metadata={
            "condition": cond.name,
            "trial": trial,
            "doi": row["doi"],
            "journal": row["journal"],
            "date": parse_trial_date(row["date"]).isoformat(),
            "ground_truth": truth,
            "sections_modified": row["sections_modified"],
        },
    )


def subset_source(data_dir: str | None = None) -> tuple[str, dict[str, str], dict[str, str]]:
    """(revision, stratum of each trial, identifying text of each trial) for drawing subsets."""
    df, file = load_trials(data_dir)
    ids = [str(i) for i in df.index]
    return (
        file.manifest.revision,
        dict(zip(ids, df["Annotation_accept"], strict=True)),
        dict(zip(ids, df["doi"], strict=True)),
    )


def subset_trials(df: pd.DataFrame, subset: str | None) -> set[str] | None:
    """Row ids of a stored ``oncology_rct`` subset, each checked against its DOI (None: all)."""
    dois = {str(i): doi for i, doi in zip(df.index, df["doi"], strict=True)}
    keep = subset_items(SPEC, subset, dois)
    return None if keep is None else set(keep)


def _normal_title(title: str) -> str:
    return " ".join(title.split()).rstrip(". ")


def title_edited(row: Mapping[str, Any]) -> bool:
    """The counterfactual title says something the original does not (whitespace and a final
    full stop aside). In the study's data 13 of 250 titles were edited (its ``sections_modified``
    lists ``title`` for exactly those); one more differs only by a final full stop."""
    return _normal_title(row["counterfactual_title"]) != _normal_title(row["title"])


#: ``-T title_only_trials=``: which trials ``counterfactual_title_only`` takes, and its label.
TITLE_ONLY_TRIALS = {
    "edited": "ours: only the trials whose counterfactual title was edited (13 of the study's "
    "250); an unchanged title scored against the inverted label would count a correct reading "
    "as wrong",
    "all": "every trial, as the study's counterfactual_title field suggests: the trials whose "
    "title was not edited get their original title, scored against the inverted label",
}


def title_only_counts(
    df: pd.DataFrame, conditions: Sequence[str], trials: str = "edited"
) -> dict[str, Any]:
    """How many counterfactual titles differ from the original, and which trials the condition
    takes (reported with that condition)."""
    if "counterfactual_title_only" not in conditions:
        return {}
    edited = sum(title_edited(row) for row in df.to_dict("records"))
    unchanged = len(df) - edited
    return {
        "counterfactual_title_only": {
            "titles_edited": edited,
            "titles_unchanged": unchanged,
            "trials": trials,
            "trials_rule": TITLE_ONLY_TRIALS[trials],
        }
    }


def build_samples(
    df: pd.DataFrame,
    conditions: Sequence[str],
    seed: int = 0,
    published_after: str | None = None,
    trials: set[str] | None = None,
    title_only_trials: str = "edited",
) -> list[Sample]:
    """Samples trial-major (every condition of trial 0, then trial 1, ...).

    Controls are drawn over the whole table before the time split, so a trial keeps its
    shuffled or synthetic DOI whatever split is taken. ``counterfactual_title_only`` takes, by
    default (``title_only_trials="edited"``), only the trials whose counterfactual title was
    edited (:func:`title_edited`): for the others the input is the original title, and scoring
    it against the inverted label would be wrong; ``"all"`` takes every trial.
    """
    controls = make_controls(df, seed)
    cutoff = date.fromisoformat(published_after) if published_after else None
    samples = []
    for pos, (trial, row) in enumerate(indexed_records(df)):
        if cutoff and parse_trial_date(row["date"]) <= cutoff:
            continue
        if trials is not None and str(trial) not in trials:
            continue
        for name in conditions:
            if (
                name == "counterfactual_title_only"
                and title_only_trials == "edited"
                and not title_edited(row)
            ):
                continue
            samples.append(record_to_sample(row, int(trial), pos, CONDITIONS[name], controls))
    return samples


@task
def oncology_rct(
    condition: str | list[str] = "title_abstract",
    published_after: str | None = None,
    flip_pairs: str | list[str] | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    trials_file: str | None = None,
    subset: str | None = None,
    provider_errors: str = "score",
    metrics: str = "headline",
    title_only_trials: str = "edited",
    shard: str | None = None,
    **unknown: Any,
) -> Task:
    """Classify oncology RCTs as POSITIVE / NEGATIVE (primary endpoint met) from one input variant.

    Args:
        condition: A condition, a comma-separated list, or a group (default ``title_abstract``,
            the study's baseline). Study: title_abstract, title_only, doi_only, counterfactual,
            counterfactual_doi. Appendix: abstract_only, title_doi, counterfactual_title_only.
            Sections (the group's earlier paper): conclusion_only, methods_conclusion,
            methods_results_conclusion. Controls (the study's outlook): doi_shuffled,
            doi_synthetic, irrelevant_identifier. Groups: study, appendix, sections, controls,
            all. Counterfactual conditions are scored against the inverted label.
        published_after: Keep only trials published after this ISO date (time split for
            training-cutoff studies). Default: all 250 trials.
        flip_pairs: Extra condition pairs ``a:b`` (comma-separated) whose flip rate is reported,
            beside title_abstract:counterfactual and counterfactual:counterfactual_doi.
        seed: Seed of the DOI derangement, synthetic DOIs and identifiers (default 0).
        data_dir: Local data directory (default ``$MED_EVALS_DATA_DIR``; else the file is
            downloaded from the pinned commit and cached).
        trials_file: Use this CSV (trials.csv schema) instead of the study's file, e.g. the
            output of ``counterfactual_build``; its sha256 is recorded in the log.
        subset: A stored subset of trials (``smoke``: 20, ``ci``: 100; stratified by label;
            ``med_evals/data/manifests/subsets/oncology_rct-<name>.yaml``). Default: all trials.
        provider_errors: ``score`` (default, as the study): a provider failure left after
            Inspect's retries is scored ERROR and counted apart; ``raise``: Inspect's own
            behaviour (the sample errors; retry with ``inspect eval-retry``).
        metrics: ``headline`` (default): the log's metrics are the study's headline per
            condition (valid rate, accuracy and macro-F1 over valid replies) and the flip rates,
            so the viewer and the console fit a screen; ``full``: also sensitivity,
            specificity, F1 of POSITIVE, Wald and Wilson intervals, counts, confusion cells and
            the lenient parse. ``med-evals report`` shows all of them from either log.
        title_only_trials: Which trials ``counterfactual_title_only`` takes: ``edited``
            (default, ours: the 13 trials whose counterfactual title was edited) or ``all``
            (every trial, as the study's ``counterfactual_title`` field suggests; an unchanged
            title is scored against the inverted label). Recorded in the log's metadata.
        shard: ``i/N``: run only shard ``i`` of ``N`` (1-based) of the trials selected by the
            other parameters, every condition of a trial in the same shard (round-robin by
            trial: :mod:`med_evals.study.shards`); the shards' logs read back as one run. Default:
            all.
        unknown: Any other parameter is refused before the run, naming the closest one.

    Defaults as the study sent them: at most 500 output tokens; temperature 0 to OpenAI, Google
    and any other provider, no temperature to Anthropic (the study set none there); a Task built
    in Python before the model is known sends temperature 0 (``--temperature`` and
    ``--max-tokens`` override). System prompt verbatim from the paper.
    """
    p = study_params(
        SPEC,
        locals(),
        condition=Choice(values=CONDITIONS, groups=GROUPS, many=True),
        published_after=IsoDate(),
        flip_pairs=Pairs(values=CONDITIONS, groups=GROUPS, within="condition"),
        seed=Integer(),
        trials_file=File(),
        provider_errors=Choice(values=("score", "raise")),
        title_only_trials=Choice(values=tuple(TITLE_ONLY_TRIALS)),
    )
    names = resolve_conditions(p.condition)
    if p.title_only_trials != "edited" and "counterfactual_title_only" not in names:
        raise ParamError(
            f"oncology_rct: -T title_only_trials={p.title_only_trials}: applies to the "
            "counterfactual_title_only condition, which this run does not include"
        )
    path, provenance = resolve_file(DATASET, FILE, p.data_dir, p.trials_file, "trials_file")
    df = read_trials(path)
    # recorded in the log, not warned: a trials_file (an export) differs from the 250 by design
    count_problem = check_counts(path, list(df["Annotation_accept"]), DATASET, warn=False)
    if len(df) < 2:  # the DOI controls pair each trial with another one
        raise DatasetError(f"{path}: {len(df)} trial(s); the task needs at least two")
    samples = build_samples(
        df, names, seed=p.seed, published_after=p.published_after,
        trials=subset_trials(df, p.subset), title_only_trials=p.title_only_trials,
    )
    if not samples:
        raise DatasetError(f"{path}: no trial published after {p.published_after}")
    pairs = list(DEFAULT_FLIP_PAIRS)
    extra = p.flip_pairs.split(",") if isinstance(p.flip_pairs, str) else (p.flip_pairs or [])
    pairs += [x.strip() for x in extra if x.strip() and x.strip() not in pairs]
    model = evaluated_model()
    config = study_generate_config(model)
    # provider_errors is one of the two (study_params refused anything else)
    gen: Solver = generate_or_record_error() if p.provider_errors == "score" else generate()
    return study_task(
        SPEC,
        p,
        samples,
        solver=[system_message(prompts.ONCOLOGY_SYSTEM_PROMPT), gen],
        config=config,
        metric_options={"flip_pairs": pairs},
        dataset=DATASET,
        location=str(path),
        metadata={
            "study": "Windisch et al. 2026 (oncology RCT evidence use)",
            "conditions": names,
            "published_after": p.published_after,
            "n_trials": len({(s.metadata or {})["trial"] for s in samples}),
            "count_check": count_problem or count_summary(DATASET),
            "generate": {
                "model_at_build": model,
                "temperature": config.temperature,
                "max_tokens": config.max_tokens,
                "rule": "the study's: temperature 0 to OpenAI and Google, none to Anthropic",
            },
            **title_only_counts(df, names, p.title_only_trials),
            "seed": p.seed,
            "prompt": "oncology_system_prompt_v1 (verbatim from the paper)",
            "parser": "strict: reply.strip().upper() in {POSITIVE, NEGATIVE} (study's rule)",
            "data": provenance,
        },
    )


# --- the study ---------------------------------------------------------------------------------

#: Two made-up trials (not the study's data) on which the spec's behaviour is fingerprinted.
_PROBE_TRIALS = pd.DataFrame(
    {
        "doi": ["10.1200/JCO.2020.01.001", "10.1016/S1470-2045(21)00002-2"],
        "journal": ["J Clin Oncol", "Lancet Oncol"],
        "date": ["2020-01-15", "2021-06-30"],
        "title": ["Drug A versus placebo in stage III disease.", "Drug B after surgery"],
        "abstract": ["Background. Methods. Results: met. Conclusion.", "Results: not met."],
        "abstract_introduction": ["Background.", "Intro."],
        "abstract_methods": ["Methods.", "Randomised 1:1."],
        "abstract_results": ["Results: met.", "Results: not met."],
        "abstract_conclusions": ["Conclusion.", "No benefit."],
        "Annotation_accept": ["POSITIVE", "NEGATIVE"],
        "counterfactual_title": ["Drug A versus placebo in stage III disease", "Drug B fails"],
        "counterfactual_abstract": ["Results: not met.", "Results: met."],
        "target_label": ["NEGATIVE", "POSITIVE"],
        "sections_modified": ["results", "title;results"],
    }
)


def _probe_inputs() -> list[str]:
    """Every condition's input for the probe trials (both title_only_trials rules), with its
    target, the system prompt and the generation settings sent to each kind of provider."""
    out = [prompts.ONCOLOGY_SYSTEM_PROMPT]
    out += [repr(study_generate_config(m)) for m in ("openai/x", "anthropic/x", None)]
    for rule in TITLE_ONLY_TRIALS:
        for s in build_samples(_PROBE_TRIALS, list(CONDITIONS), title_only_trials=rule):
            out.append(f"{s.id}|{s.target}|{s.input}")
    return out


def _probe_values(label_set: str | None = None) -> list[dict[str, Any]]:
    """Score values of the probe replies, paired across conditions for the flip rates."""
    replies = PROBE_REPLIES
    values = []
    for trial in range(len(replies)):
        for k, cond in enumerate(("title_abstract", "counterfactual", "counterfactual_doi")):
            target = TRIAL_OUTCOME.labels[(trial + k) % 2]
            values.append(dict(outcome_value(replies[(trial * 3 + k) % len(replies)], target,
                                             cond, trial)))
    return values


SPEC = Study(
    task="oncology_rct",
    title="Oncology RCT evidence use (Windisch et al. 2026)",
    version="2.1.0",
    fingerprint_recorded="3940899b7d1927f5",
    scorer=trial_outcome,
    metrics=outcome_metrics,
    label_sets={"two": TRIAL_OUTCOME},
    parser=parse_outcome_strict,
    # the paper summarises performance "using F1-score (and accuracy)", F1 over valid replies
    headline=(
        Headline("macro_f1_valid", "Macro-F1", "valid predictions"),
        Headline("accuracy_valid", "Accuracy", "valid predictions"),
        VALID_RATE,
    ),
    compute=headline_numbers,
    probe=Probe(prompts=_probe_inputs, replies=PROBE_REPLIES, values=_probe_values),
    conditions=tuple(CONDITIONS),
    subset_source=subset_source,
    datasets=(DATASET,),
    reference_tables=("oncology-table1-published.csv",),
    source="trial",  # the trial behind each condition's sample (sample metadata)
    # a shard and a subset keep every condition of a trial (the flip rates pair them)
    item=lambda s: (s.metadata or {})["trial"],
    item_name="trial",
    # inspect view: a trial's conditions together, each with its gold, its label, correct or not
    view_scores={"condition": "Condition", "correct": "Correct"},
    view_sort=("trial",),
)
