"""Inspect's ``eval``, ``eval_set`` and ``eval_retry`` as the tests call them: the same functions,
with Inspect's realtime sample buffer off unless a test asks for it.

The realtime buffer is what lets ``inspect view`` show a running eval's samples live (a SQLite
database written at every event); no test reads it, and it is about a quarter of an in-process
eval's CPU (250 oncology samples on mockllm: 4.2 s with it, 3.2 s without). The log Inspect
writes is the same either way: every sample, score and event (the recorded-metrics test
compares each sample record). ``med-evals run``'s shards run without it too (``--no-log-realtime``).
"""

from __future__ import annotations

from typing import Any

import inspect_ai


def inspect_eval(*args: Any, **kwargs: Any) -> Any:
    """:func:`inspect_ai.eval`, ``log_realtime=False`` unless given."""
    kwargs.setdefault("log_realtime", False)
    return inspect_ai.eval(*args, **kwargs)


def eval_set(*args: Any, **kwargs: Any) -> Any:
    """:func:`inspect_ai.eval_set`, ``log_realtime=False`` unless given."""
    kwargs.setdefault("log_realtime", False)
    return inspect_ai.eval_set(*args, **kwargs)


def eval_retry(*args: Any, **kwargs: Any) -> Any:
    """:func:`inspect_ai.eval_retry`, ``log_realtime=False`` unless given."""
    kwargs.setdefault("log_realtime", False)
    return inspect_ai.eval_retry(*args, **kwargs)
