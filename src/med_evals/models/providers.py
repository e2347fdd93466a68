"""Inspect model providers of med_evals (registered through the ``inspect_ai`` entry point).

- ``embedded/<model>``: a GGUF model in process (:mod:`med_evals.models.embedded`);
- ``replay/<file>``: recorded outputs (:mod:`med_evals.models.replay`).

The factories import their implementation only when a model is requested, so registering them
costs nothing and needs neither torch nor transformers.

:func:`vllm_server_problem` checks Inspect's own ``vllm/`` provider before a run (every task
calls it while it is built, :mod:`med_evals.study.checks`).
"""

from __future__ import annotations

import importlib.util
import os

from inspect_ai.model import Model, ModelAPI, ModelName, modelapi

from med_evals.inspect_internals.compat import vllm_url_given


@modelapi(name="embedded")
def embedded() -> type[ModelAPI]:
    from med_evals.models.embedded import EmbeddedAPI

    return EmbeddedAPI


@modelapi(name="replay")
def replay() -> type[ModelAPI]:
    from med_evals.models.replay import ReplayAPI

    return ReplayAPI


def vllm_server_problem(model: Model | None) -> str | None:
    """What stops a ``vllm/<name>`` model before its first request, or None.

    Inspect's provider connects to ``VLLM_BASE_URL`` (or a URL given with ``--model-base-url``,
    ``-M base_url=`` or ``-M port=``), and with none starts ``vllm serve`` itself, which needs
    vLLM installed. With neither, every sample failed on its first request with Inspect's
    "vLLM Server requires optional dependencies" panel (raw markup, a traceback) and the run
    exited 0; now one line names both ways, before any sample. Any other model passes, and so
    does a vllm model when this Inspect keeps its URL where we cannot see it."""
    if model is None or ModelName(model).api != "vllm":
        return None
    if os.environ.get("VLLM_BASE_URL") or vllm_url_given(model.api) is not False:
        return None
    if importlib.util.find_spec("vllm") is not None:
        return None
    return (
        f"--model {ModelName(model)}: no vLLM server to send requests to (VLLM_BASE_URL is not "
        "set) and vllm is not installed here to start one: set "
        "VLLM_BASE_URL=http://<host>:<port>/v1 (or pass --model-base-url, or -M port=<port> for "
        "a server on this machine), or pip install vllm on a GPU machine and Inspect starts the "
        "server (docs/models.md)"
    )
