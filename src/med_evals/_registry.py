"""Inspect entry point: importing this module registers every med_evals task and provider, and
puts the package's exception hook in place (one line for a misspelt ``--model`` provider)."""

# ruff: noqa: F401
from med_evals._compat import install_excepthook
from med_evals.models.providers import embedded, replay
from med_evals.studies import STUDIES  # the specs, registered (metrics recreated from a log)
from med_evals.tasks.counterfactual import counterfactual_build, counterfactual_judges
from med_evals.tasks.healthfc import healthfc
from med_evals.tasks.medevidence import medevidence
from med_evals.tasks.medreqal import medreqal
from med_evals.tasks.oncology_rct import oncology_rct

install_excepthook()
