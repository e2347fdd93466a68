"""med_evals: medical LLM evaluations for UK AISI's Inspect.

The tasks (``inspect eval med_evals/<task>``), in the papers' order: the oncology study's
``oncology_rct`` and its counterfactual tools, ``medevidence``, ``medreqal``, ``healthfc``.
"""

__version__ = "0.1.0"

from med_evals.tasks.counterfactual import counterfactual_build, counterfactual_judges  # noqa: E402, I001
from med_evals.tasks.healthfc import healthfc  # noqa: E402
from med_evals.tasks.medevidence import medevidence  # noqa: E402
from med_evals.tasks.medreqal import medreqal  # noqa: E402
from med_evals.tasks.oncology_rct import oncology_rct  # noqa: E402

__all__ = [
    "__version__",
    "counterfactual_build",
    "counterfactual_judges",
    "healthfc",
    "medevidence",
    "medreqal",
    "oncology_rct",
]
