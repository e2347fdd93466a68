"""med_evals: medical LLM evaluations for UK AISI's Inspect.

The tasks (``inspect eval med_evals/<task>``), in the papers' order: the oncology study's
``oncology_rct`` and its counterfactual tools, ``medevidence``, ``medreqal``, ``healthfc``.
"""

__version__ = "0.1.0"

# ruff: noqa: E402
# the papers' order, as in _registry.py
# isort: off
from med_evals.tasks.oncology_rct import oncology_rct
from med_evals.tasks.counterfactual import counterfactual_build, counterfactual_judges
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.healthfc import healthfc
# isort: on

__all__ = [
    "__version__",
    "oncology_rct",
    "counterfactual_build",
    "counterfactual_judges",
    "medevidence",
    "medreqal",
    "healthfc",
]
