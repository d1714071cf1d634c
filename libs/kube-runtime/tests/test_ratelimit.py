"""Rate limiters: per-item exponential, overall token bucket, their max, jittered backoff."""

from __future__ import annotations

import random

import pytest
from kube_runtime import (
    Backoff,
    ItemExponentialRateLimiter,
    ManualClock,
    MaxOfRateLimiter,
    TokenBucketRateLimiter,
    default_controller_rate_limiter,
)


def test_overall_bucket_limits_a_burst_of_distinct_items() -> None:
    clock = ManualClock()
    limiter = MaxOfRateLimiter(
        ItemExponentialRateLimiter(0.005, 1000), TokenBucketRateLimiter(10, 3, clock)
    )
    delays = [limiter.when(f"item-{i}") for i in range(5)]
    # The first three ride the burst (per-item 5 ms each); then 0.1 s apart.
    assert delays == pytest.approx([0.005, 0.005, 0.005, 0.1, 0.2])
    assert limiter.retries("item-0") == 1
    limiter.forget("item-0")
    assert limiter.retries("item-0") == 0


def test_default_controller_limiter_matches_client_go() -> None:
    limiter = default_controller_rate_limiter(ManualClock())
    assert [limiter.when("k") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])


def test_backoff_grows_with_jitter_within_bounds_and_resets() -> None:
    backoff = Backoff(initial=1.0, cap=8.0, factor=2.0, jitter=1.0, rng=random.Random(7))
    for base in (1, 2, 4, 8, 8, 8):
        assert base <= backoff.next() <= 2 * base
    backoff.reset()
    assert 1.0 <= backoff.next() <= 2.0


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="base"):
        ItemExponentialRateLimiter(0, 1)
    with pytest.raises(ValueError, match="qps"):
        TokenBucketRateLimiter(0, 1)
