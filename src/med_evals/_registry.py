"""Inspect entry point: importing this module registers every med_evals task and provider, and
puts the package's exception hook in place (one line for a misspelt ``--model`` provider)."""

# ruff: noqa: F401
from med_evals._compat import install_excepthook
from med_evals.models.providers import embedded, replay

# every study's spec, registered (metrics recreated from a log); studies imports every task
# module of med_evals.tasks (its discovery), so each @task is registered with Inspect too
from med_evals.studies import STUDIES

install_excepthook()
