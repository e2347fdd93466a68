"""The oncology study's prompt texts, verbatim, in one place.

Windisch et al. 2026 ("Evidence use and identifier-conditioned prior knowledge ..."), Methods,
"Models and Prompts". The user message is the input variant of each condition.
"""

ONCOLOGY_SYSTEM_PROMPT = (
    "You will be provided with information about a randomized controlled oncology trial. "
    "Your task will be to classify if the trial was positive, i.e. if it met its primary "
    "endpoint, or negative, i.e. if it did not meet its primary endpoint. Your response should "
    "be either the word POSITIVE (in all caps) or NEGATIVE (in all caps). Do not output anything "
    "else."
)

# User-message templates. The first four are the study's (its run_evaluation.py); the others
# follow the same "Field: value" layout, fields separated by a blank line, DOI first.
TITLE_ABSTRACT = "Title: {title}\n\nAbstract: {abstract}"
TITLE_ONLY = "Title: {title}"
DOI_ONLY = "DOI: {doi}"
DOI_TITLE_ABSTRACT = "DOI: {doi}\n\nTitle: {title}\n\nAbstract: {abstract}"
ABSTRACT_ONLY = "Abstract: {abstract}"
DOI_TITLE = "DOI: {doi}\n\nTitle: {title}"
IDENTIFIER_ONLY = "Identifier: {identifier}"
