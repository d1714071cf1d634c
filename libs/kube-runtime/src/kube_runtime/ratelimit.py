"""Rate limiters with client-go's semantics: per-item exponential backoff and token buckets."""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import Protocol

from .clock import Clock, SystemClock

__all__ = [
    "Backoff",
    "ItemExponentialRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "TokenBucket",
    "TokenBucketRateLimiter",
    "default_controller_rate_limiter",
]


class RateLimiter(Protocol):
    """Decides how long an item waits before its next retry."""

    def when(self, item: Hashable) -> float:
        """The delay for this retry of `item` (each call counts as one retry)."""
        ...

    def forget(self, item: Hashable) -> None:
        """Clear the item's history (call after it succeeded)."""
        ...

    def retries(self, item: Hashable) -> int:
        """How many times `when` was called for `item` since it was last forgotten."""
        ...


class ItemExponentialRateLimiter:
    """base * 2**failures, capped; the history is per item."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        if base <= 0 or cap < base:
            raise ValueError("need 0 < base <= cap")
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        if failures > 64:  # avoids float overflow; the cap is long reached
            return self.cap
        return min(self.cap, self.base * float(2**failures))

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def retries(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class TokenBucket:
    """`qps` tokens per second, at most `burst` saved; `reserve` books one token."""

    def __init__(self, qps: float, burst: int, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self.clock = clock or SystemClock()
        self._tokens = float(burst)
        self._last = self.clock.monotonic()

    def reserve(self) -> float:
        """Take one token now and return how long the caller must wait before using it."""
        now = self.clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> float:
        """Wait for a token; returns the time waited (for the rate-limiter metric)."""
        delay = self.reserve()
        if delay > 0:
            await self.clock.sleep(delay)
        return delay


class TokenBucketRateLimiter:
    """An overall limit shared by all items (it keeps no per-item history)."""

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self.bucket = TokenBucket(qps, burst, clock)

    def when(self, item: Hashable) -> float:
        return self.bucket.reserve()

    def forget(self, item: Hashable) -> None:
        pass

    def retries(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay of several limiters (every limiter sees every retry)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("need at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def retries(self, item: Hashable) -> int:
        return max(limiter.retries(item) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> RateLimiter:
    """client-go's default: max(5ms * 2**n capped at 1000s, 10 qps / burst 100 overall)."""
    return MaxOfRateLimiter(
        ItemExponentialRateLimiter(0.005, 1000.0), TokenBucketRateLimiter(10.0, 100, clock)
    )


class Backoff:
    """Jittered exponential backoff for reconnect loops; `reset` after a healthy period."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._current = initial

    def next(self) -> float:
        """The next delay: current * (1 + jitter * U[0,1)), then the base grows."""
        delay = self._current * (1.0 + self.jitter * self._rng.random())
        self._current = min(self.cap, self._current * self.factor)
        return min(delay, self.cap * (1.0 + self.jitter))

    def reset(self) -> None:
        self._current = self.initial
