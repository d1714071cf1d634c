"""A work queue with client-go's semantics, on asyncio.

A key is never handed to two workers at once (the processing set), never lost while in
flight (an add during processing marks it dirty and it is queued again on `done`), and
deduplicated while waiting. Delays (`add_after`, `add_rate_limited`) run on the injected clock.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Hashable
from typing import Generic, TypeVar

from .clock import Clock, SystemClock
from .metrics import InMemoryMetrics, MetricsRegistry, WorkQueueMetrics
from .ratelimit import RateLimiter, default_controller_rate_limiter

__all__ = ["WorkQueue"]

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Rate-limited, delaying, deduplicating work queue (client-go's RateLimitingQueue)."""

    def __init__(
        self,
        name: str = "default",
        *,
        rate_limiter: RateLimiter | None = None,
        clock: Clock | None = None,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        self.name = name
        self.clock = clock or SystemClock()
        self.rate_limiter = rate_limiter or default_controller_rate_limiter(self.clock)
        self._metrics = WorkQueueMetrics(metrics or InMemoryMetrics(), name)
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._waiting: dict[K, tuple[float, asyncio.Task[None]]] = {}
        self._shutting_down = False
        self._idle = asyncio.Event()
        self._idle.set()

    # -- adding ---------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue `key` unless it is already waiting; ignored after shutdown."""
        if self._shutting_down or key in self._dirty:
            return
        self._metrics.adds.inc(self._metrics.labels)
        self._dirty.add(key)
        self._added_at.setdefault(key, self.clock.monotonic())
        if key in self._processing:
            return
        self._queue.append(key)
        self._update_depth()
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending deadline for it wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready_at = self.clock.monotonic() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        task = asyncio.get_running_loop().create_task(self._add_later(key, delay))
        self._waiting[key] = (ready_at, task)

    async def _add_later(self, key: K, delay: float) -> None:
        await self.clock.sleep(delay)
        self._waiting.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> None:
        """Queue `key` again after its rate limiter's delay (counts as a retry)."""
        self._metrics.retries.inc(self._metrics.labels)
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Clear `key`'s retry history (call after a successful reconcile)."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.retries(key)

    # -- taking ---------------------------------------------------------------------------

    async def get(self) -> K | None:
        """Wait for a key and mark it processing; None once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                return None
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # Pass our wake-up on so an add is not stranded with a sleeping worker.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                raise
        key = self._queue.popleft()
        now = self.clock.monotonic()
        added = self._added_at.pop(key, now)
        self._metrics.latency.observe(self._metrics.labels, now - added)
        self._processing.add(key)
        self._started_at[key] = now
        self._dirty.discard(key)
        self._idle.clear()
        self._update_depth()
        return key

    def done(self, key: K) -> None:
        """Finish processing `key`; if it was added meanwhile, it is queued again."""
        if key not in self._processing:
            raise ValueError(f"{key!r} is not being processed")
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if started is not None:
            self._metrics.work_duration.observe(
                self._metrics.labels, self.clock.monotonic() - started
            )
        if key in self._dirty:
            self._queue.append(key)
            self._update_depth()
            self._wake_one()
        if not self._processing:
            self._idle.set()

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Refuse new keys, drop delayed ones, and wake idle workers (they get None)."""
        self._shutting_down = True
        for _, task in self._waiting.values():
            task.cancel()
        self._waiting.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def shutdown_with_drain(self) -> None:
        """Shut down, then wait until every key in flight is `done`."""
        self.shutdown()
        await self._idle.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # -- introspection ------------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys waiting to be handed out (not counting delayed or in-flight ones)."""
        return len(self._queue)

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    @property
    def delayed(self) -> int:
        return len(self._waiting)

    def update_unfinished_work(self) -> None:
        """Refresh the unfinished-work and longest-running gauges (called periodically)."""
        now = self.clock.monotonic()
        ages = [now - t for t in self._started_at.values()]
        self._metrics.unfinished.set(self._metrics.labels, sum(ages))
        self._metrics.longest_running.set(self._metrics.labels, max(ages, default=0.0))

    def _update_depth(self) -> None:
        self._metrics.depth.set(self._metrics.labels, len(self._queue))

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
