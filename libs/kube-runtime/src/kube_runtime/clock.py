"""Injected time: every loop in kube_runtime asks a Clock, so tests drive time by hand."""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "sleep_or_stop"]


class Clock(Protocol):
    """The time source of queues, reflectors and leader electors."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for intervals and deadlines)."""
        ...

    def now(self) -> dt.datetime:
        """Wall-clock time in UTC (written into Lease objects)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for `seconds` of this clock's time."""
        ...


class SystemClock:
    """The real clock: time.monotonic and asyncio.sleep."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when a test calls `advance`; sleepers wake in deadline order."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._epoch = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        self._start = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def now(self) -> dt.datetime:
        return self._epoch + dt.timedelta(seconds=self._now - self._start)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many coroutines are waiting on this clock (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """The earliest pending wake-up time, if any."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline passes, in order."""
        target = self._now + seconds
        while True:
            await _settle()
            deadline = self.next_deadline()
            if deadline is None or deadline > target:
                break
            self._now = max(self._now, deadline)
            while self._sleepers and self._sleepers[0][0] <= self._now:
                _, _, fut = heapq.heappop(self._sleepers)
                if not fut.done():
                    fut.set_result(None)
        self._now = target
        await _settle()

    async def run_until_idle(self, limit: float = 3600.0) -> None:
        """Jump from deadline to deadline until nobody sleeps or `limit` seconds pass."""
        end = self._now + limit
        while True:
            await _settle()
            deadline = self.next_deadline()
            if deadline is None or deadline > end:
                return
            await self.advance(deadline - self._now)


async def _settle(rounds: int = 20) -> None:
    # Let ready callbacks run so that woken tasks register their next sleep.
    for _ in range(rounds):
        await asyncio.sleep(0)


async def sleep_or_stop(clock: Clock, seconds: float, stop: asyncio.Event) -> bool:
    """Sleep `seconds` on `clock` unless `stop` is set first; return True if stopped."""
    if stop.is_set():
        return True
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, stopper):
            if not task.done():
                task.cancel()
        await asyncio.gather(sleeper, stopper, return_exceptions=True)
    return stop.is_set()
