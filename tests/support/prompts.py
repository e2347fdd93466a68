"""The messages a task's solver sends the model for each sample, without a model or a run."""

from __future__ import annotations

import asyncio
from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, ChatMessageUser, ModelName
from inspect_ai.solver import TaskState


def sent(task: Task, samples: list[Sample] | None = None) -> dict[str, list[ChatMessage]]:
    """sample id -> the messages the task's solver (its whole chain: a ``system_message()``,
    the generate solver's prompt) passes to ``generate`` for the sample, as Inspect starts a
    sample's state (its input as the messages) and before any reply."""
    return {str(s.id): asyncio.run(_first_call(task, s))
            for s in (samples if samples is not None else list(task.dataset))}


async def _first_call(task: Task, sample: Sample) -> list[ChatMessage]:
    messages = ([ChatMessageUser(content=sample.input)] if isinstance(sample.input, str)
                else list(sample.input))
    state = TaskState(model=ModelName("mockllm/model"), sample_id=sample.id or "", epoch=1,
                      input=sample.input, messages=messages,
                      metadata=dict(sample.metadata or {}))
    calls: list[list[ChatMessage]] = []

    async def generate(state: TaskState, **kwargs: Any) -> TaskState:
        calls.append(list(state.messages))
        return state

    await task.solver(state, generate)
    return calls[0]
