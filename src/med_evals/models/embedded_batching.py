"""Batching and progress for ``embedded/<model>``.

Each sample's ``generate`` puts its request on the :class:`Batcher` of its event loop and awaits
its own reply; the worker (:mod:`med_evals.models.batching`) takes the oldest waiting request and up
to
``batch_size - 1`` more that can share a ``generate`` call, runs them on the one model thread,
and hands each reply back.
:class:`Progress` prints a line to stderr every so often, for runs without Inspect's live display.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import sys
import time
from collections.abc import Callable

from med_evals.models.batching import Batcher as BaseBatcher
from med_evals.models.embedded_runtime import Generation, Request, batch_key

#: runs one batch on the model thread: (requests, number still waiting) -> replies
RunBatch = Callable[[list[Request], int], list[Generation]]


@functools.lru_cache(maxsize=1)
def _model_thread() -> concurrent.futures.ThreadPoolExecutor:
    """One thread for every load and generation: torch keeps one intra-op thread pool."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedded")


class Progress:
    """Counts generations and prints a line to stderr at most every ``interval`` seconds; on a
    terminal the line is rewritten in place (:meth:`close` ends it)."""

    def __init__(self, name: str, interval: float) -> None:
        self.name, self.interval = name, interval
        self.started = self.last = time.monotonic()
        self.done = self.tokens = self.waiting = 0
        self.rows = 0
        self.in_place = sys.stderr.isatty()
        self.open_line = False  # a line written in place and not yet ended

    # all calls come from the one model thread (generate_batch and the decoding loop)
    def batch_started(self, rows: int, waiting: int) -> None:
        if not self.done and not self.rows:  # the first batch: count time from here
            self.started = self.last = time.monotonic()
        self.rows, self.waiting = rows, waiting

    def step(self, generated: int) -> None:
        if self.interval <= 0 or time.monotonic() - self.last < self.interval:
            return
        self.emit(f"{self.rows} in progress at token {generated:,}")

    def batch_done(self, gens: list[Generation]) -> None:
        self.done += len(gens)
        self.tokens += sum(g.output_tokens for g in gens)
        self.rows = 0
        if self.interval > 0 and time.monotonic() - self.last >= self.interval:
            self.emit("")

    def emit(self, now: str) -> None:
        elapsed = time.monotonic() - self.started
        self.last = time.monotonic()
        parts = [now] if now else []
        parts += [f"{self.done:,} done ({self.tokens:,} tokens)", f"{self.waiting} waiting"]
        line = f"{self.name}: {', '.join(parts)}; {elapsed / 60:.1f} min"
        if self.in_place:
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
            self.open_line = True
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        """End a line written in place, with the final counts."""
        if self.open_line:
            self.emit("")
            print(file=sys.stderr, flush=True)
            self.open_line = False


class Batcher(BaseBatcher[Request, Generation]):
    """Collects the requests of concurrently generating samples (one event loop) and runs them
    in batches of one batch key on the model thread (:class:`med_evals.models.batching.Batcher`)."""

    def __init__(self, run: RunBatch, batch_size: int, linger_s: float = 0.02) -> None:
        super().__init__(run, _model_thread, linger_s)
        self.batch_size = batch_size

    def take(self) -> list[tuple[Request, asyncio.Future[Generation]]]:
        """The oldest waiting request and up to ``batch_size - 1`` more that can join it, those
        closest to it in prompt length first (rows are padded to the longest prompt)."""
        self.pending = [(r, f) for r, f in self.pending if not f.done()]  # cancelled samples
        if not self.pending:
            return []
        key = batch_key(self.pending[0][0])
        size = self.batch_size if key is not None else 1
        same = [i for i, (r, _) in enumerate(self.pending) if batch_key(r) == key]
        length = [sum(len(m["content"]) for m in r.messages) for r, _ in self.pending]
        chosen = sorted(same, key=lambda i: (abs(length[i] - length[0]), i))[:size]
        take = [self.pending[i] for i in chosen]
        skip = set(chosen)
        self.pending = [p for i, p in enumerate(self.pending) if i not in skip]
        return take
