"""The Table 6 prompts are the paper's, verbatim; their replies' parsers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from med_evals.data.builders import prompts
from med_evals.data.builders.prompts import (
    MISCELLANEOUS,
    RENAL,
    consolidate_renal,
    parse_category,
    parse_question_label,
    question_label_user,
)

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MED_EVALS_SHARED_DATA", REPO.parent / "shared" / "datasets"))
PAPER = SHARED.parent / "papers" / "medreqal-2024.txt"


def _table6() -> dict[str, str]:
    if not PAPER.is_file():
        pytest.skip(f"paper text not found at {PAPER}")
    cells = {}
    for line in PAPER.read_text(encoding="utf-8").splitlines():
        use, sep, text = line.partition("\t")
        if sep and use in ("Classification", "Question & Label generation"):
            cells[use] = text
    return cells


def test_prompts_are_table_6_verbatim() -> None:
    cells = _table6()
    assert cells["Classification"] == f"SYSTEM: {prompts.CLASSIFICATION_SYSTEM}"
    assert cells["Question & Label generation"] == (
        f"SYSTEM: {prompts.QUESTION_LABEL_SYSTEM} AGENT {prompts.QUESTION_LABEL_USER}"
    )


def test_thirteen_options_plus_renal() -> None:
    assert len(prompts.PROMPT_CATEGORIES) + 1 == 13  # the named classes and miscellaneous
    assert all(c in prompts.CLASSIFICATION_SYSTEM for c in prompts.PROMPT_CATEGORIES)
    assert len(prompts.CATEGORIES) == 14 and RENAL in prompts.CATEGORIES


def test_user_message_holds_the_excerpt() -> None:
    text = question_label_user("Bg.", "To assess X.", "X helps.")
    assert text.startswith(prompts.QUESTION_LABEL_USER + "\n\n")
    assert text.endswith(
        "Background: Bg.\nObjectives: To assess X.\nAuthors' conclusions: X helps."
    )
    assert "Background" not in question_label_user("", "To assess X.", "X helps.")


@pytest.mark.parametrize(
    "reply, question, label",
    [
        ("QUESTION: Does X help?\nLABEL: SUPPORTED", "Does X help?", "SUPPORTED"),
        (
            "QUESTION: (Does X help?)\nLABEL: (3) NOT ENOUGH INFORMATION",
            "Does X help?",
            "NOT ENOUGH INFORMATION",
        ),
        ("**QUESTION:** Is Y safe?\n**LABEL:** refuted.", "Is Y safe?", "REFUTED"),
        (
            "Here you go.\nQuestion: Does Z work?   Label: Not enough   information\nThanks",
            "Does Z work?",
            "NOT ENOUGH INFORMATION",
        ),
    ],
)
def test_parse_question_label(reply: str, question: str, label: str) -> None:
    parsed = parse_question_label(reply)
    assert parsed is not None
    assert (parsed.question, parsed.label) == (question, label)


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "Does X help? SUPPORTED",
        "QUESTION: Does X help?\nLABEL: PARTLY SUPPORTED",
        "QUESTION: Does X help?\nLABEL: UNCERTAIN",
        "QUESTION:\nLABEL: SUPPORTED",
        "LABEL: SUPPORTED\nQUESTION: Does X help?",
    ],
)
def test_unparsable_replies(reply: str) -> None:
    assert parse_question_label(reply) is None


@pytest.mark.parametrize(
    "reply, category",
    [
        ("cancer", "cancer"),
        ("Respiratory system.", "respiratory system"),
        ("Class: cognitive and mental health", "cognitive and mental health"),
        ("miscellaneous", MISCELLANEOUS),
        ("hepatology", MISCELLANEOUS),
        ("cancer or respiratory system", MISCELLANEOUS),
        ("", MISCELLANEOUS),
    ],
)
def test_parse_category(reply: str, category: str) -> None:
    assert parse_category(reply) == category


def test_renal_category_is_made_from_miscellaneous_only() -> None:
    assert consolidate_renal(MISCELLANEOUS, "Does bladder training reduce incontinence?") == RENAL
    assert consolidate_renal(MISCELLANEOUS, "Does haemodialysis at night help?") == RENAL
    assert consolidate_renal("cancer", "Does BCG prevent bladder cancer recurrence?") == "cancer"
    assert consolidate_renal(MISCELLANEOUS, "Does honey relieve cough?") == MISCELLANEOUS
