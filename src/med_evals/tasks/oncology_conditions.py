"""The oncology study's conditions: which text each input variant shows, and groups of them.

The study's five (Table 1), its appendix's three, the section ablations of the group's earlier
paper and the negative controls proposed in the study's outlook. Each condition names its user
prompt template (:mod:`med_evals.solvers.oncology_rct`, the papers' wording) and whether it
shows the counterfactual text, scored against the inverted label.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from med_evals.solvers import oncology_rct as prompts
from med_evals.tasks.oncology_controls import Controls


@dataclass(frozen=True)
class Condition:
    """One input variant: how the user message is built and which label is expected."""

    name: str
    template: str
    counterfactual: bool  # counterfactual text, scored against the inverted label
    source: str  # where the condition comes from


def _join(*sections: str) -> str:
    return " ".join(s.strip() for s in sections if s.strip())


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        # the study's five
        Condition("title_abstract", prompts.TITLE_ABSTRACT, False, "study (baseline)"),
        Condition("title_only", prompts.TITLE_ONLY, False, "study"),
        Condition("doi_only", prompts.DOI_ONLY, False, "study"),
        Condition("counterfactual", prompts.TITLE_ABSTRACT, True, "study"),
        Condition("counterfactual_doi", prompts.DOI_TITLE_ABSTRACT, True, "study"),
        # its appendix
        Condition("abstract_only", prompts.ABSTRACT_ONLY, False, "appendix"),
        Condition("title_doi", prompts.DOI_TITLE, False, "appendix"),
        # only trials whose counterfactual title was edited (see title_edited)
        Condition("counterfactual_title_only", prompts.TITLE_ONLY, True, "appendix"),
        # section ablations of the group's earlier paper (sections joined by a space)
        Condition("conclusion_only", prompts.ABSTRACT_ONLY, False, "sections"),
        Condition("methods_conclusion", prompts.ABSTRACT_ONLY, False, "sections"),
        Condition("methods_results_conclusion", prompts.ABSTRACT_ONLY, False, "sections"),
        # negative controls proposed in the study's outlook
        Condition("doi_shuffled", prompts.DOI_ONLY, False, "controls"),
        Condition("doi_synthetic", prompts.DOI_ONLY, False, "controls"),
        Condition("irrelevant_identifier", prompts.IDENTIFIER_ONLY, False, "controls"),
    )
}

#: The conditions whose text is counterfactual, scored against the inverted label.
COUNTERFACTUAL = frozenset(name for name, c in CONDITIONS.items() if c.counterfactual)

GROUPS: dict[str, tuple[str, ...]] = {
    "study": ("title_abstract", "title_only", "doi_only", "counterfactual", "counterfactual_doi"),
    "appendix": ("abstract_only", "title_doi", "counterfactual_title_only"),
    "sections": ("conclusion_only", "methods_conclusion", "methods_results_conclusion"),
    "controls": ("doi_shuffled", "doi_synthetic", "irrelevant_identifier"),
}
GROUPS["all"] = tuple(CONDITIONS)


#: Condition names used by the study groups' scripts and tables (the earlier paper's recorded
#: replies, the study's Table 1), mapped to this package's.
CONDITION_ALIASES = {
    "baseline": "title_abstract",
    "counterfactual_with_doi": "counterfactual_doi",
    "conclusion": "conclusion_only",
}


def condition_name(name: str) -> str:
    """This package's name of a condition named by the study groups' scripts."""
    return CONDITION_ALIASES.get(name, name)


def unknown_condition(name: str) -> str | None:
    """None for a known condition; else what to say of ``name``: unknown, and the closest
    known condition (``title-abstract`` -> ``title_abstract``)."""
    if name in CONDITIONS:
        return None
    close = difflib.get_close_matches(name.replace("-", "_"), list(CONDITIONS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown condition {name!r}{hint} (conditions: {', '.join(CONDITIONS)})"


def resolve_conditions(condition: str | Sequence[str]) -> list[str]:
    """Names or group names (``study``, ``appendix``, ``sections``, ``controls``, ``all``)."""
    items = condition.split(",") if isinstance(condition, str) else list(condition)
    names: list[str] = []
    for item in (i.strip() for i in items):
        expanded = GROUPS.get(item, (item,))
        for name in expanded:
            if name not in CONDITIONS:
                raise ValueError(
                    f"unknown condition {name!r}; choose from {', '.join(CONDITIONS)} "
                    f"or a group: {', '.join(GROUPS)}"
                )
            if name not in names:
                names.append(name)
    if not names:
        raise ValueError("no condition selected")
    return names


_SECTIONS: dict[str, tuple[str, ...]] = {
    "conclusion_only": ("abstract_conclusions",),
    "methods_conclusion": ("abstract_methods", "abstract_conclusions"),
    "methods_results_conclusion": (
        "abstract_methods",
        "abstract_results",
        "abstract_conclusions",
    ),
}


def condition_fields(row: Mapping[str, Any], pos: int, cond: Condition, controls: Controls) -> dict:
    """The template fields of one trial under one condition."""
    cf = cond.counterfactual
    fields = {
        "title": row["counterfactual_title"] if cf else row["title"],
        "abstract": row["counterfactual_abstract"] if cf else row["abstract"],
        "doi": row["doi"],
    }
    if cond.name in _SECTIONS:
        fields["abstract"] = _join(*(row[c] for c in _SECTIONS[cond.name]))
    elif cond.name == "doi_shuffled":
        fields["doi"] = controls.shuffled_doi[pos]
    elif cond.name == "doi_synthetic":
        fields["doi"] = controls.synthetic_doi[pos]
    elif cond.name == "irrelevant_identifier":
        fields["identifier"] = controls.identifier[pos]
    return fields
