"""The controller runner: N workers reconciling keys from a work queue, level-triggered.

A reconcile receives only a key and reads current state from informers; it returns
None (done), or a Result asking for a later requeue; an exception means retry with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import structlog

from .clock import Clock, sleep_or_stop
from .queue import WorkQueue

__all__ = ["Controller", "Reconciler", "Result", "Syncable"]

log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for besides success: a requeue after `requeue_after` seconds."""

    requeue_after: float | None = None


Reconciler = Callable[[K], Awaitable[Result | None]]


class Syncable(Protocol):
    async def wait_for_sync(self, wait_seconds: float | None = None) -> bool: ...


class Controller(Generic[K]):
    """Runs `reconcile` for keys from `queue` with `workers` concurrent workers."""

    def __init__(
        self,
        name: str,
        queue: WorkQueue[K],
        reconcile: Reconciler[K],
        *,
        workers: int = 1,
        informers: Sequence[Syncable] = (),
        sync_timeout: float | None = None,
        metrics_period: float = 0.5,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.queue = queue
        self.reconcile = reconcile
        self.workers = workers
        self.informers = informers
        self.sync_timeout = sync_timeout
        self.metrics_period = metrics_period

    @property
    def clock(self) -> Clock:
        return self.queue.clock

    async def run(self, stop: asyncio.Event) -> None:
        """Wait for the informers' caches, run workers until `stop`, then drain in-flight keys."""
        for informer in self.informers:
            synced = asyncio.ensure_future(informer.wait_for_sync(self.sync_timeout))
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait({synced, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if stop.is_set():
                synced.cancel()
                return
            if not synced.result():
                raise TimeoutError(f"controller {self.name}: informer caches did not sync")
        log.info("controller started", controller=self.name, workers=self.workers)
        workers = [asyncio.ensure_future(self._worker()) for _ in range(self.workers)]
        gauges = asyncio.ensure_future(self._update_gauges(stop))
        try:
            await stop.wait()
        finally:
            # Workers finish the key in hand, take whatever is still queued, then exit.
            self.queue.shutdown()
            await asyncio.gather(*workers, return_exceptions=True)
            gauges.cancel()
            await asyncio.gather(gauges, return_exceptions=True)
            log.info("controller stopped", controller=self.name)

    async def _update_gauges(self, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(self.clock, self.metrics_period, stop):
            self.queue.update_unfinished_work()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def process(self, key: K) -> None:
        """Reconcile one key with (controller, key) bound in structlog's context."""
        with structlog.contextvars.bound_contextvars(controller=self.name, key=str(key)):
            try:
                result = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                retries = self.queue.num_requeues(key)
                log.warning("reconcile failed, requeueing", error=repr(exc), retries=retries)
                self.queue.add_rate_limited(key)
                return
            self.queue.forget(key)
            if result is not None and result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
