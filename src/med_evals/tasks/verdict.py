"""What MedREQAL and HealthFC share: the verdict task and the shape of their study spec.

Both ask for SUPPORTED / REFUTED / NOT ENOUGH INFORMATION with MedREQAL's Table 7 prompts, score
with the same parser and metrics (:mod:`med_evals.scorers.verdict`), and compare the reply's
explanation with a reference text (the review's conclusion; HealthFC's explanation). Each
study's module builds its rows and samples and calls :func:`verdict_task`; its ``SPEC`` names
the shared parts (the headline definitions :data:`VERDICT_HEADLINE` and the probe
:data:`VERDICT_PROBE` from here, the scorer's functions from :mod:`med_evals.scorers.verdict`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai import Epochs, Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Scorer

from med_evals.params import Check, Choice, Directory, File, Flag, Integer, Text
from med_evals.reference import REFERENCE, reference_record, reference_text
from med_evals.scorers.bertscore import BertScoreConfig
from med_evals.scorers.judges import JUDGE_VERSION, conclusion_agreement, jury_models
from med_evals.scorers.reducers import majority_label
from med_evals.scorers.verdict import (
    VERDICT,
    verdict_value,
)
from med_evals.solvers.generate import generate_or_record_error
from med_evals.solvers.verdict import PAPER_MODELS, prompt_messages, prompted_samples
from med_evals.study import (
    METRIC_SETS,
    PROBE_REPLIES,
    VALID_RATE,
    Headline,
    Probe,
    Study,
)
from med_evals.subsets import load_subset, select
from med_evals.tasks.run_checks import JURY, Roles, before_run

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


#: the roles without ``-T judge=true``: none (a grader bound then would judge nothing)
NO_JUDGE = Roles(hint=f"-T judge=true adds the agreement judge, which reads {JURY.shown}")


def verdict_params() -> dict[str, Check]:
    """The checks of the parameters MedREQAL and HealthFC share (see :mod:`med_evals.params`)."""
    return {
        "prompt": Choice(values=tuple(PAPER_MODELS)),
        "data_dir": Directory(),
        "data_file": File(),
        "generation_scoring": Flag(),
        "bertscore_model": Text(),
        "bertscore_layers": Integer(optional=True, minimum=1),
        "bertscore_rescale": Flag(),
        "bertscore": Flag(),
        "judge": Flag(),
        "subset": Text(),
        "epochs": Integer(minimum=1),
        "metrics": Choice(values=METRIC_SETS),
    }


def apply_subset(task: str, samples: list[Sample], subset: str | None) -> list[Sample]:
    """Keep a stored subset's samples (ids are 1-based row numbers), checking each question."""
    if not subset:
        return samples
    by_id = {str(s.id).rsplit("-", 1)[-1]: s for s in samples}
    texts = {k: str(s.input) for k, s in by_id.items()}  # the question
    keep = select(by_id, load_subset(task, subset), texts)
    return [by_id[k] for k in keep]


def scorers(
    study: Study,
    generation_scoring: bool,
    bertscore: BertScoreConfig,
    use_bertscore: bool = True,
    judge: bool = False,
    metrics: str = "full",
) -> list[Scorer]:
    """The study's verdict scorer (label; ROUGE-L/BERTScore against the sample's reference
    record unless ``generation_scoring`` is off; evidence mentions) with the ``metrics`` set,
    then optionally the LLM judge of agreement with the reference (``--model-role grader=...``,
    and ``grader_2=...``, ... for a jury).
    """
    label_scorer = study.make_scorer(
        full=metrics == "full",
        scorer_args={
            "reference_key": REFERENCE if generation_scoring else None,
            "bertscore_model": bertscore.model,
            "bertscore_layers": bertscore.num_layers,
            "bertscore_rescale": bertscore.rescale_with_baseline,
            "bertscore_batch_size": bertscore.batch_size,
            "bertscore": use_bertscore,
        },
    )
    out = [label_scorer]
    if judge:
        out.append(conclusion_agreement(reference_field=REFERENCE))
    return out


def verdict_task(
    study: Study,
    samples: list[Sample],
    path: Path,
    *,
    prompt: str,
    evidence: bool = False,
    generation_scoring: bool,
    bert_cfg: BertScoreConfig,
    bertscore: bool,
    judge: bool,
    subset: str | None,
    epochs: int,
    metrics: str = "headline",
    metadata: dict[str, Any],
) -> Task:
    """The Task of MedREQAL and HealthFC: one prompt variant, the verdict scorers, the paper's
    generation settings, and what produced the run in the log's metadata.

    Each sample's input is the prompt variant's Table 7 messages for its question (rendered
    here, once: docs/performance.md), and the solver is one generation.
    """
    samples = apply_subset(study.task, samples, subset)
    prompted = prompted_samples(samples, prompt, evidence=evidence, keep_question=judge)
    before_run(study.task, prompted, roles=JURY if judge else NO_JUDGE)
    return Task(
        dataset=MemoryDataset(prompted, name=study.task, location=str(path)),
        solver=generate_or_record_error(),
        scorer=scorers(study, generation_scoring, bert_cfg, bertscore, judge, metrics),
        config=PAPER_CONFIG,
        epochs=Epochs(epochs, majority_label()),
        version=study.version,
        headline_metric=study.scorer_name,  # viewer: the study's headline first
        metadata={
            **metadata,
            # what the gated numbers depend on in the code (the gate compares it, not version)
            "behaviour": study.behaviour(),
            "prompt": prompt,
            "prompt_models_in_paper": PAPER_MODELS[prompt],
            "label_parser": "parse_verdict",
            "samples_without_reference": [
                s.id for s in samples if not reference_text(s.metadata).strip()
            ],
            **(
                bert_cfg.describe()
                if generation_scoring and bertscore
                else {"generation_scoring": generation_scoring, "bertscore": False}
            ),
            "judge": "conclusion_agreement (grader role)" if judge else None,
            # the judge's graders (role -> model) and version, named beside its numbers
            **({"graders": jury_models(), "judge_version": JUDGE_VERSION} if judge else {}),
            "subset": subset,
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


#: The behaviour probe of both verdict studies (:class:`~med_evals.study.Probe`).
VERDICT_PROBE = Probe(prompts=_probe_inputs, replies=PROBE_REPLIES, values=_probe_values)
