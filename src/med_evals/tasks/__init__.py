"""The tasks, one module per study, and the registry of their specs in the papers' order.

Each task module defines its ``@task`` function and its spec
(:class:`~med_evals.study.spec.Study`); this module lists the specs, explicitly and in the
papers' order (the report's sections follow it), in the one registry
(:data:`med_evals.study.spec.TASKS`; the studies with headline numbers also in
:data:`~med_evals.study.spec.STUDIES`, which reading runs back (:mod:`med_evals.logs`), the
report, the gate, subsets and the CLI ask). ``med_evals/__init__.py`` exports the ``@task``
functions and :mod:`med_evals._registry` registers them with Inspect.
"""

from __future__ import annotations

from med_evals.study.spec import STUDIES, TASKS, Study, register
from med_evals.tasks.counterfactual import BUILD_SPEC as COUNTERFACTUAL_BUILD
from med_evals.tasks.counterfactual import JUDGES_SPEC as COUNTERFACTUAL_JUDGES
from med_evals.tasks.healthfc import SPEC as HEALTHFC
from med_evals.tasks.medevidence import SPEC as MEDEVIDENCE
from med_evals.tasks.medreqal import SPEC as MEDREQAL
from med_evals.tasks.oncology_rct import SPEC as ONCOLOGY_RCT

__all__ = [
    "COUNTERFACTUAL_BUILD", "COUNTERFACTUAL_JUDGES", "HEALTHFC", "MEDEVIDENCE", "MEDREQAL",
    "ONCOLOGY_RCT", "STUDIES", "TASKS", "Study", "spec",
]

# the papers' order: the oncology study and its counterfactual tools, MedEvidence, MedREQAL,
# HealthFC (STUDIES: the four with headline numbers, in that order)
register(ONCOLOGY_RCT, COUNTERFACTUAL_BUILD, COUNTERFACTUAL_JUDGES, MEDEVIDENCE, MEDREQAL,
         HEALTHFC)


def spec(task: str) -> Study:
    """The study spec of ``task`` (``med_evals/oncology_rct`` or ``oncology_rct``)."""
    return Study.named(task)
