"""Inspect's entry point (``[project.entry-points.inspect_ai]``): importing this module
registers every med_evals task, in the papers' order, and the package's model providers, and
puts the package's exception hook in place (one line for a misspelt ``--model`` provider)."""

# ruff: noqa: F401
from med_evals.inspect_internals.compat import install_excepthook
from med_evals.models.providers import embedded, replay

# the papers' order: the oncology study and its counterfactual tools, MedEvidence, MedREQAL,
# HealthFC (tests/test_studies.py checks it)
# isort: off
from med_evals.tasks.oncology_rct import oncology_rct
from med_evals.tasks.counterfactual import counterfactual_build, counterfactual_judges
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.healthfc import healthfc
# isort: on

install_excepthook()
