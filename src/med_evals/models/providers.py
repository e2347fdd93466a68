"""Inspect model providers of med_evals (registered through the ``inspect_ai`` entry point).

- ``embedded/<model>``: a GGUF model in process (:mod:`med_evals.models.embedded`);
- ``replay/<file>``: recorded outputs (:mod:`med_evals.models.replay`).

The factories import their implementation only when a model is requested, so registering them
costs nothing and needs neither torch nor transformers.
"""

from __future__ import annotations

from inspect_ai.model import ModelAPI, modelapi


@modelapi(name="embedded")
def embedded() -> type[ModelAPI]:
    from med_evals.models.embedded import EmbeddedAPI

    return EmbeddedAPI


@modelapi(name="replay")
def replay() -> type[ModelAPI]:
    from med_evals.models.replay import ReplayAPI

    return ReplayAPI
