"""parse_verdict on realistic replies, in the styles of the MedREQAL paper's Tables 4, 8 and 9."""

from __future__ import annotations

import pytest

from med_evals.scorers.labels import ERROR, INVALID
from med_evals.scorers.medreqal import NEI, REFUTED, SUPPORTED, VERDICT, parse_verdict

S, R, N = SUPPORTED, REFUTED, NEI

CASES: list[tuple[str, str | None, str]] = [
    # --- explicit LABEL line, as the prompt asks -------------------------------------------
    ("plain", "LABEL: SUPPORTED\nExercise improves sleep quality in several trials.", S),
    ("lower case", "label: refuted. Vitamin C does not prevent colds.", R),
    ("markdown bold", "**LABEL:** NOT ENOUGH INFORMATION\n\nThe trials are small.", N),
    ("bold label word", "**Label**: Supported\n\nExplanation: two large RCTs ...", S),
    ("parenthesised", "LABEL: (REFUTED) . Omega-3 has no effect on mortality.", R),
    ("bracketed", "LABEL: [Not Enough Information]\nEvidence is inconsistent.", N),
    ("quoted", 'LABEL: "SUPPORTED". Fluoride varnish prevents caries.', S),
    ("no space", "LABEL:SUPPORTED.", S),
    ("mixed case NEI", "Label: Not enough information.", N),
    ("short NEI", "LABEL: NOT ENOUGH INFO\nMore research is needed.", N),
    ("dash separator", "Label - Refuted\nHigh-quality trials found no benefit.", R),
    ("predicted label", "Predicted label: SUPPORTED\nThe evidence is consistent.", S),
    ("the label is", "Based on current research, the label is REFUTED.", R),
    (
        "label wins over other labels",
        "LABEL: SUPPORTED\n\nAn older 2016 review found NOT ENOUGH INFORMATION, but newer trials "
        "show a clear benefit.",
        S,
    ),
    (
        "label at the end",
        "Probiotics have been studied widely in children with acute diarrhoea. The results of the "
        "largest trials were inconsistent. LABEL: NOT ENOUGH INFORMATION",
        N,
    ),
    (
        "echoed instruction then label",
        "You asked me to answer with SUPPORTED, REFUTED or NOT ENOUGH INFORMATION.\nLABEL: "
        "REFUTED\nCranberry juice does not prevent infections.",
        R,
    ),
    (
        "label not supported is not a label",
        "LABEL: NOT SUPPORTED\nNo trials found benefit.",
        INVALID,
    ),
    # --- the label stated in the answer (no LABEL line) -----------------------------------
    ("capitals alone", "SUPPORTED", S),
    ("capitals with full stop", "REFUTED.", R),
    ("bold capitals", "**NOT ENOUGH INFORMATION**\n\nThe trials were of low quality.", N),
    (
        # Table 4, Mixtral: a long explanation that ends with the label in brackets
        "Table 4 Mixtral style",
        "While there is evidence suggesting that interventions can improve appropriate "
        "polypharmacy (the use of multiple medications for a patient), the impact on clinically "
        "significant improvement can vary depending on the specific patient population, "
        "interventions, and outcomes measured. Some studies have shown positive results, while "
        "others have not found significant improvements. Therefore, more research is needed to "
        "draw definitive conclusions. (NOT ENOUGH INFORMATION)",
        N,
    ),
    (
        # Table 4, GPT-4: affirmative explanation, label last
        "Table 4 GPT-4 style",
        "Interventions aimed at improving appropriate polypharmacy, which refers to the use of "
        "multiple medications in a manner that maximizes benefit and minimizes harm, have been "
        "shown to result in clinically significant improvements in various studies. These "
        "improvements include enhanced medication adherence, reduced adverse drug events, and "
        "better overall patient outcomes. SUPPORTED",
        S,
    ),
    (
        # Table 8, Mixtral: cites an outdated Cochrane review, label in square brackets
        "Table 8 Mixtral style",
        "While some studies suggest that sucrose may help to reduce procedural pain in neonates, "
        "including heel lance procedures, the evidence is not conclusive. The Cochrane review on "
        'this topic from 2016 states that "there is considerable uncertainty about the effects '
        'of sucrose on procedural pain in newborn infants." Therefore, more research is needed '
        "to definitively answer this question. [NOT ENOUGH INFORMATION]",
        N,
    ),
    (
        # Table 9, ChatDoctor: a plain affirmative answer with no label at all
        "Table 9 ChatDoctor style (no label)",
        "Yes, antidepressants have been shown to be effective in treating depressive symptoms "
        "in adults with cancer.",
        INVALID,
    ),
    (
        # Table 9, GPT-4: "supported" only as a verb in prose -> no label stated
        "Table 9 GPT-4 style (verb, not label)",
        "Antidepressants have been studied for their efficacy in treating depressive symptoms in "
        "adults with cancer. Clinical research, including randomized controlled trials and "
        "systematic reviews, has generally supported the use of antidepressants for this "
        "purpose.",
        INVALID,
    ),
    (
        # Table 9, Mistral: citations of meta-analyses, then the label on its own line
        "Table 9 Mistral style",
        "Numerous studies have demonstrated that antidepressants are effective in reducing "
        "depressive symptoms in adults with cancer. A meta-analysis of 28 randomized controlled "
        "trials involving over 3,000 patients found that antidepressants were significantly more "
        "effective than placebo (Kanji et al., 2011).\n\nSUPPORTED",
        S,
    ),
    (
        # Table 9, MedAlpaca (alpaca prompt): label first, lower case
        "Table 9 MedAlpaca style",
        "Supported. Based on the available research, antidepressants appear to be effective in "
        "treating depressive symptoms in adults with cancer.",
        S,
    ),
    (
        "Not enough information (mixed case) at the start",
        "Not enough information. Current research on acupuncture for tension-type headache is "
        "limited by small sample sizes.",
        N,
    ),
    (
        "not enough information in prose",
        "There is not enough information in current research to say whether zinc helps.",
        N,
    ),
    ("answer cue", "Answer: Refuted. Magnetic bracelets are no better than sham.", R),
    ("verdict cue", "Verdict: **Supported** - two large trials agree.", S),
    ("conclusion is", "My conclusion is refuted: homeopathy equals placebo.", R),
    ("ends with lower-case label", "Taken together, the answer is: supported.", S),
    ("label in parentheses mid-reply", "Evidence (refuted) from three trials shows no effect.", R),
    # --- two labels, no label, no reply ------------------------------------------------------
    (
        "two labels",
        "SUPPORTED for short-term pain relief, but REFUTED for long-term function.",
        INVALID,
    ),
    (
        "two labels in capitals, one in parentheses",
        "Some trials SUPPORTED this, others REFUTED it (NOT ENOUGH INFORMATION overall?).",
        INVALID,
    ),
    ("hedged without a label", "It depends on the patient; ask your doctor.", INVALID),
    ("literal template echo", "LABEL: (label) . The question is unclear.", INVALID),
    ("NOT SUPPORTED in capitals", "The claim is NOT SUPPORTED by good trials.", INVALID),
    ("unsupported is not supported", "This is an unsupported claim.", INVALID),
    ("empty", "", ERROR),
    ("whitespace", "  \n ", ERROR),
    ("none", None, ERROR),
]


@pytest.mark.parametrize(("name", "reply", "expected"), CASES, ids=[c[0] for c in CASES])
def test_parse_verdict(name: str, reply: str | None, expected: str) -> None:
    assert parse_verdict(reply) == expected


def test_at_least_thirty_realistic_replies() -> None:
    assert len(CASES) >= 30
    assert {expected for _, _, expected in CASES} == {S, R, N, INVALID, ERROR}


def test_label_set() -> None:
    assert VERDICT.labels == (S, R, N)
    assert all(VERDICT.is_label(parse_verdict(f"LABEL: {label}")) for label in VERDICT.labels)
