"""MedREQAL's data-generation prompts (Table 6), verbatim, and the parsers of their replies.

Table 6 prints each prompt as ``SYSTEM: <system message> AGENT <user message>``; the role markers
are not message text, so the system and user parts are kept apart here and a test checks that
``"SYSTEM: " + system + " AGENT " + user`` is the paper's cell, character for character (the
paper's typos, "medial question" and "The documents begins now.", included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from med_evals.scorers.medreqal import NEI, REFUTED, SUPPORTED

#: Table 6, "Question & Label generation": the system message.
QUESTION_LABEL_SYSTEM = (
    "You’re a helpful assistant. Your task is to help with generating questions and labels in "
    "the medical and clinical domain."
)
#: Table 6, "Question & Label generation": the user ("AGENT") message; the review's excerpt
#: follows it (see :func:`question_label_user`).
QUESTION_LABEL_USER = (
    "You will be given an excerpt of an abstract of a clinical systematic review. Based on the "
    "given background, objectives, and author’s conclusions, generate only ONE SINGLE question, "
    "answerable with yes/no/uncertain, that sums up the main medical objective that was "
    'investigated. Please keep the question short and general and use the "Objectives" section '
    "to construct the question. The question should be about a general medical hypothesis, not "
    "about this specific review. Afterwards, please also give a label for the author’s "
    "conclusions. Label tries to answer the objective by looking at the conclusion. The label may "
    "be ONLY from one of the following three: (1) SUPPORTED; (2) REFUTED; (3) NOT ENOUGH "
    "INFORMATION. Do not try to make up a new label. Please only select the third label if not "
    "enough evidence was found to reach a verdict, not if certainty of the conclusion is low! "
    'Please aim to predict "SUPPORTED" or "REFUTED" even if certainty of these conclusions by '
    "authors is low or moderate. Please structure the output in two lines, as: QUESTION: "
    "(question) LABEL: (label) The documents begins now."
)
#: Table 6, "Classification": the system message; the question is the user message. The paper
#: ran it at temperature 0.
CLASSIFICATION_SYSTEM = (
    "Your task is to classify an input with a medial question into one of several medical "
    "classes. If none of the classes fits, output miscellaneous. Output only one class from the "
    "following options: cancer cardiovascular system dental and oral health digestive system and "
    "metabolism endocrine system and hormones immune system and infections cognitive and mental "
    "health musculoskeletal system and dermatology nutrition and dietary supplements respiratory "
    "system sensory organs sexual and reproductive health"
)

MISCELLANEOUS = "miscellaneous"
#: The twelve named classes of the prompt; with ``miscellaneous`` the paper's 13 options.
PROMPT_CATEGORIES = (
    "cancer",
    "cardiovascular system",
    "dental and oral health",
    "digestive system and metabolism",
    "endocrine system and hormones",
    "immune system and infections",
    "cognitive and mental health",
    "musculoskeletal system and dermatology",
    "nutrition and dietary supplements",
    "respiratory system",
    "sensory organs",
    "sexual and reproductive health",
)
#: The fourteenth category, "created afterward to consolidate questions concerning the renal and
#: urinary systems" (Section 3). Its wording and the rule below are ours: the paper gives neither.
RENAL = "renal and urinary system"
CATEGORIES = (*PROMPT_CATEGORIES, MISCELLANEOUS, RENAL)
_RENAL_TERMS = re.compile(
    r"\b(?:renal|kidneys?|nephr\w*|urinary|urine|bladder|incontinence|dialysis|haemodialysis|"
    r"hemodialysis|ureter\w*|urethr\w*|urolog\w*|glomerul\w*)\b",
    re.IGNORECASE,
)

LABELS = (SUPPORTED, REFUTED, NEI)
SECTION_NAMES = {
    "background": "Background",
    "objectives": "Objectives",
    "conclusions": "Authors' conclusions",
}


def question_label_user(background: str, objectives: str, conclusions: str) -> str:
    """The user message: Table 6's text, a blank line, then the excerpt the prompt names
    (background, objectives and authors' conclusions), one labelled section a line. The excerpt's
    layout is ours; the paper does not print it."""
    excerpt = "\n".join(
        f"{SECTION_NAMES[k]}: {v}"
        for k, v in (
            ("background", background),
            ("objectives", objectives),
            ("conclusions", conclusions),
        )
        if v
    )
    return f"{QUESTION_LABEL_USER}\n\n{excerpt}"


@dataclass(frozen=True)
class QuestionLabel:
    question: str
    label: str


_QL = re.compile(r"QUESTION\s*:\s*(?P<q>.+?)\s*LABEL\s*:\s*(?P<l>.+)", re.IGNORECASE | re.DOTALL)
_NUMBERING = re.compile(r"^\(?\d\)\s*")


def _clean(text: str) -> str:
    text = " ".join(text.replace("*", " ").split())
    text = text.strip(" \"'`_")
    if text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        text = text[1:-1].strip()
    return text


def parse_question_label(reply: str) -> QuestionLabel | None:
    """``QUESTION: ... LABEL: ...`` with one of the three labels, else None.

    Markdown emphasis, quotes, the template's brackets (``(Does X help?)``), a numbering such as
    ``(3)`` and a final full stop are tolerated; any other label text is not (no guessing).
    """
    m = _QL.search(reply or "")
    if not m:
        return None
    question = _clean(m.group("q"))
    first_line = next((ln for ln in m.group("l").splitlines() if ln.strip()), "")
    label = _NUMBERING.sub("", _clean(first_line)).rstrip(".;").strip().upper()
    label = " ".join(label.split())
    if not question or label not in LABELS:
        return None
    return QuestionLabel(question=question, label=label)


def parse_category(reply: str) -> str:
    """One of the prompt's classes, else ``miscellaneous`` ("If none of the classes fits, output
    miscellaneous"): the reply itself, or the one class it names."""
    text = " ".join(re.sub(r"[^a-z ]+", " ", (reply or "").lower()).split())
    if text in CATEGORIES:
        return text
    named = [c for c in PROMPT_CATEGORIES if re.search(rf"\b{re.escape(c)}\b", text)]
    # "digestive system and metabolism" also contains no other class; a reply naming two or more
    # classes is not one class
    return named[0] if len(named) == 1 else MISCELLANEOUS


def consolidate_renal(category: str, question: str) -> str:
    """The fourteenth category: a ``miscellaneous`` question about the kidneys or urinary tract
    becomes ``renal and urinary system``; every other category stays as the model gave it."""
    if category == MISCELLANEOUS and _RENAL_TERMS.search(question):
        return RENAL
    return category
