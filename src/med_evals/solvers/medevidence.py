"""MedEvidence prompt texts (Polzak et al., ICLR 2026), from the authors' run-med-evidence code.

The evidence condition is the authors' "barebones abstract" setting: prompt set ``basic``, the
question's relevant sources given whole (no summarisation), one call. The system message is
the authors' ``"follow instruction"``. Closed book sends the same prompt with no articles, which
is what the authors' code sends when a question has no text ("No text available").
"""

# ruff: noqa: E501 (prompt text kept verbatim)
SYSTEM = "follow instruction"

# BASIC_PROMPTS["final_answer"], indentation as in the source; {CLASSES} filled per label set:
# the authors' five classes, or (ours) "Higher, Lower, Uncertain" with the mapping of the five
# classes onto Uncertain stated (scorers.medevidence.DISPLAY).
FINAL_ANSWER = """Given the ARTICLE SUMMARIES. Provide a concise and precise answer to the provided QUESTION.

    After you think, return your answer with the following format:
    - **Rationale**: Your rationale
    - **Full Answer**:  A precise answer, citing each fact with the Article ID in brackets (e.g. [2]).
    - **Answer**: A final classification exactly matching one of the following options: {CLASSES}

    Think step by step.
    {text}
    """

# BASIC_PROMPTS["final_answer_values"] with the context left empty, then the article blocks.
HEADER = "\n\n**QUESTION**: '{question}'\n **ARTICLE SUMMARIES**: "
ARTICLE = (
    "----\n\nArticle ID {article_id}:\nTITLE: {title}\nPublished Date: {date}\n\n"
    "Relevant Information:\n{content}\n\n----"
)
NO_TEXT = "No text available"
