"""One batcher for the suite's in-process models: the embedded LLM and the BERTScore encoder.

Concurrent samples each ``await batcher.submit(item)``. One worker task runs while items wait:
it lingers ``linger_s`` so that samples arriving together join one batch, takes a batch
(:meth:`Batcher.take`: every waiting item unless a subclass chooses), runs it on the model's own
thread (``executor``: torch keeps one intra-op thread pool there, and the event loop stays free
for the samples still generating) and hands each sample its result, or the batch's exception to
every sample in it. A cancelled sample's result is dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
B = TypeVar("B", bound="Batcher")


class Batcher(Generic[Item, Result]):
    """Runs the items of concurrently waiting samples (one event loop) in shared batches.

    Args:
        run: Called on the model thread with a batch and the number of items still waiting;
            returns one result per item, in order.
        executor: The model's single-thread executor.
        linger_s: How long the worker waits for more samples before taking a batch.
    """

    def __init__(
        self,
        run: Callable[[list[Item], int], list[Result]],
        executor: Callable[[], concurrent.futures.Executor],
        linger_s: float = 0.02,
    ) -> None:
        self.run, self.executor, self.linger_s = run, executor, linger_s
        self.loop = asyncio.get_running_loop()  # futures and the worker belong to this loop
        self.pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self.worker: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []  # for tests

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = self.loop.create_future()
        self.pending.append((item, future))
        if self.worker is None:
            self.worker = asyncio.create_task(self._run())
        return await future

    def take(self) -> list[tuple[Item, asyncio.Future[Result]]]:
        """The next batch, removed from ``pending``: every waiting item."""
        batch, self.pending = self.pending, []
        return batch

    async def _run(self) -> None:
        try:
            while self.pending:
                await asyncio.sleep(self.linger_s)  # samples starting together join one batch
                batch = self.take()
                if not batch:
                    continue
                self.batch_sizes.append(len(batch))
                items = [item for item, _ in batch]
                try:
                    results = await self.loop.run_in_executor(
                        self.executor(), self.run, items, len(self.pending)
                    )
                except Exception as ex:  # noqa: BLE001 - handed to every waiting sample
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(ex)
                    continue
                for (_, fut), result in zip(batch, results, strict=True):
                    if not fut.done():  # a cancelled sample no longer waits
                        fut.set_result(result)
        finally:
            self.worker = None


def loop_batcher(batchers: list[B], make: Callable[[], B]) -> B:
    """The running event loop's batcher, kept as the one item of ``batchers`` (each
    ``eval()`` runs its own loop, whose futures another loop cannot complete)."""
    loop = asyncio.get_running_loop()
    if not batchers or batchers[0].loop is not loop:
        batchers[:] = [make()]
    return batchers[0]
