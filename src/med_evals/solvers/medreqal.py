"""MedREQAL's prompts (Vladika et al. 2024, Table 7), verbatim, rendered when a sample is sent.

A sample's input is its question (HealthFC: its claim), as ``inspect view`` lists it; the study's
generate solver sends the variant's messages around it (:func:`table7_prompt`).

Three variants, one per model family of the paper:

- ``chat`` (Mixtral, GPT-4): a system message and a user message.
- ``mistral`` (Mistral-7B-Instruct): one user message; the ``<s>[INST] ... [/INST]`` wrapper of
  Table 7 is the model's chat template, added by the provider, not part of the text.
- ``alpaca`` (ChatDoctor, MedAlpaca, PMC-LLaMa): a raw completion prompt sent as a single user
  message with no system message. Table 7 prints it on one line; the line breaks between the
  ``###`` sections are the Alpaca template's own.

The words are Table 7's, including its spacing before the full stop in "LABEL: (label) .".

HealthFC uses the same prompts. Its ``evidence`` option (not in the MedREQAL paper) appends the
claim's top evidence sentences after the question: ``EVIDENCE: ...``.

Several variants in one run (``-T prompt=all``, or a list such as ``prompt=chat,alpaca``):
:func:`variant_samples` asks every question under each variant, each pair one sample whose
``condition`` is the variant (the paper used one template per model family, which confounds
its comparison of models with its comparison of templates).
"""

from __future__ import annotations

from collections.abc import Sequence

from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.solver import TaskState

from med_evals.data.reference_text import reference_fields
from med_evals.solvers.generate import Prompt

CHAT_SYSTEM = (
    "You are an AI assistant helping answer clinical and medical questions based on your best "
    "knowledge."
)

_INSTRUCTION = (
    "please answer this clinical question only with SUPPORTED (if the question is supported by "
    "the clinical research) or REFUTED (if the hypothesis is refuted by the current clinical "
    "research) or NOT ENOUGH INFORMATION (if there is insufficient evidence for the question in "
    "current research). Please give your output in form of LABEL: (label) . Briefly explain "
    "your answer. QUESTION: {question}"
)

CHAT_USER = "Please " + _INSTRUCTION.removeprefix("please ")

MISTRAL_USER = "Based on your knowledge, " + _INSTRUCTION

ALPACA = (
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n"
    "Based on your best current knowledge, please answer the following medical question. If "
    "you think there is not enough evidence to answer, then say so. Please answer the question "
    'with "SUPPORTED" or "REFUTED" or "NOT ENOUGH INFORMATION". Briefly explain your answer.'
    "\n\n### Input:\n{question}\n\n### Response:"
)

#: variant -> (system message or None, user message template)
PROMPTS: dict[str, tuple[str | None, str]] = {
    "chat": (CHAT_SYSTEM, CHAT_USER),
    "mistral": (None, MISTRAL_USER),
    "alpaca": (None, ALPACA),
}

#: ``-T prompt=all``: every variant, in the paper's order
GROUPS: dict[str, tuple[str, ...]] = {"all": tuple(PROMPTS)}

#: Which of the paper's models used each variant.
PAPER_MODELS = {
    "chat": "Mixtral-8x7B, GPT-4-Turbo-0125",
    "mistral": "Mistral-7B-Instruct-v2",
    "alpaca": "ChatDoctor-7B, MedAlpaca-7B, PMC-LLaMa-13B",
}

EVIDENCE_SUFFIX = "\nEVIDENCE: {evidence}"


def user_templates(evidence: bool = False) -> list[str]:
    """Every variant's user message template, the question as ``{question}``: where the input of
    a sample of a log written before the input was the question alone holds its question (the
    report's per-sample lists show it, not the instruction). With
    ``evidence``, each template with the evidence after the question comes first (tried first:
    the question ends where the evidence starts), then the plain ones."""
    plain = [template for _, template in PROMPTS.values()]
    with_evidence = [t.replace("{question}", "{question}" + EVIDENCE_SUFFIX) for t in plain]
    return [*with_evidence, *plain] if evidence else plain


def check_variant(prompt: str) -> str:
    if prompt not in PROMPTS:
        raise ValueError(f"unknown prompt {prompt!r}; choose from {', '.join(PROMPTS)}")
    return prompt


def variants(prompt: str | Sequence[str]) -> list[str]:
    """The variants a ``prompt`` argument names: one variant, ``all``, or a comma-separated list
    (or a list: Inspect splits ``-T prompt=chat,alpaca``) of variants and groups; each once, in
    the paper's order (:data:`PROMPTS`)."""
    items = prompt.split(",") if isinstance(prompt, str) else list(prompt)
    chosen: set[str] = set()
    for item in (str(i).strip() for i in items):
        chosen.update(GROUPS.get(item) or (check_variant(item),))
    return [v for v in PROMPTS if v in chosen]


def render(prompt: str, question: str, evidence: str | None = None) -> tuple[str | None, str]:
    """(system message, user message) for one question; ``evidence`` follows the question."""
    system, template = PROMPTS[check_variant(prompt)]
    subject = question.strip()
    if evidence is not None:
        subject += EVIDENCE_SUFFIX.format(evidence=evidence.strip())
    # str.replace, not str.format: a question may contain braces
    return system, template.replace("{question}", subject)


def prompt_messages(
    prompt: str, question: str, evidence: str | None = None
) -> list[ChatMessageSystem | ChatMessageUser]:
    """The Table 7 messages for one question: the system message (``chat`` only), the user
    message; ``evidence`` follows the question."""
    system, user = render(prompt, question, evidence)
    messages: list[ChatMessageSystem | ChatMessageUser] = (
        [ChatMessageSystem(content=system)] if system else []
    )
    return [*messages, ChatMessageUser(content=user)]


def table7_prompt(prompt: str, evidence: bool = False) -> Prompt:
    """The Table 7 messages of a sample (:func:`prompt_messages`), rendered by the study's
    generate solver (:func:`~med_evals.solvers.generate.generate_or_record_error`) from the
    sample's input, its question: the variant is the sample's ``condition`` in a run of several
    (:func:`variant_samples`), else ``prompt``; with ``evidence``, the evidence after the
    question is the field ``evidence`` of the sample's reference record
    (:mod:`med_evals.data.reference_text`; :func:`variant_samples` checked that each has one).
    """
    check_variant(prompt)

    def table7(state: TaskState) -> list[ChatMessageSystem | ChatMessageUser]:
        variant = str(state.metadata.get("condition") or prompt)
        ev = str(reference_fields(state.metadata).get("evidence") or "") if evidence else None
        return prompt_messages(variant, state.input_text, ev)

    return table7


#: Between a question's id and its variant in a sample id of a run of several variants
VARIANT_SEPARATOR = "@"


def variant_samples(
    samples: Sequence[Sample], variants: Sequence[str], evidence: bool = False,
    keep_question: bool = False,
) -> list[Sample]:
    """The samples under each of ``variants``, each sample's input its question (the prompt is
    rendered when it is sent: :func:`table7_prompt`). One variant: the samples as they are (ids
    unchanged, no condition). Several: question-major (every variant of the first question,
    then of the second, ...), each sample's id ``<id>@<variant>`` (unique in the run: a run's
    values are keyed by sample id) and its metadata's ``condition`` the variant, which the
    scorer copies into the score value so that every metric, the report and the gate take each
    variant as a condition. With ``evidence``, a sample without evidence text (its reference
    record's ``evidence``) is an error; ``keep_question`` keeps the question in the metadata too,
    for a grader that reads it there."""
    for variant in variants:
        check_variant(variant)
    base = []
    for s in samples:
        metadata = dict(s.metadata or {})
        if evidence and not str(reference_fields(metadata).get("evidence") or ""):
            raise ValueError(f"sample {s.id}: no evidence text for the evidence option")
        if keep_question:
            metadata["question"] = str(s.input)
        base.append(s.model_copy(update={"metadata": metadata}))
    if len(variants) == 1:
        return base
    return [
        s.model_copy(update={
            "id": f"{s.id}{VARIANT_SEPARATOR}{variant}",
            "metadata": {**(s.metadata or {}), "condition": variant},
        })
        for s in base for variant in variants
    ]
