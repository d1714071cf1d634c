"""Work queue behaviour: in-flight re-adds, delays, retries with backoff, shutdown."""

from __future__ import annotations

import asyncio

import pytest
from kube_runtime import InMemoryMetrics, ItemExponentialRateLimiter, ManualClock, WorkQueue


async def test_add_during_processing_is_requeued_on_done() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("k")
    assert await queue.get() == "k"
    queue.add("k")
    assert len(queue) == 0, "a key in flight must not be handed out again"
    queue.done("k")
    assert len(queue) == 1
    assert await queue.get() == "k"


async def test_add_after_waits_for_the_clock_and_earliest_deadline_wins() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("k", 10)
    queue.add_after("k", 3)
    await clock.advance(2.9)
    assert len(queue) == 0
    await clock.advance(0.2)
    assert len(queue) == 1
    await clock.advance(10)
    assert len(queue) == 1, "the later deadline was superseded, not added twice"


async def test_retries_back_off_exponentially_until_forgotten() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(
        clock=clock, rate_limiter=ItemExponentialRateLimiter(0.25, 10.0)
    )
    waits = []
    for _ in range(4):
        queue.add_rate_limited("k")
        start = clock.monotonic()
        while len(queue) == 0:
            await clock.advance(0.125)  # binary fractions: exact sums
        waits.append(round(clock.monotonic() - start, 2))
        assert await queue.get() == "k"
        queue.done("k")
    assert waits == [0.25, 0.5, 1.0, 2.0]
    assert queue.num_requeues("k") == 4
    queue.forget("k")
    assert queue.num_requeues("k") == 0


async def test_backoff_is_capped() -> None:
    limiter = ItemExponentialRateLimiter(1.0, 5.0)
    assert [limiter.when("x") for _ in range(6)] == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert limiter.when("y") == 1.0, "history is per item"


async def test_shutdown_hands_out_queued_keys_then_none_and_refuses_adds() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("a")
    queue.add("b")
    queue.add_after("c", 5)
    queue.shutdown()
    queue.add("d")
    assert await queue.get() == "a"
    assert await queue.get() == "b"
    assert await queue.get() is None
    assert queue.delayed == 0


async def test_shutdown_wakes_idle_workers() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    getter = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.shutdown()
    assert await asyncio.wait_for(getter, 1) is None


async def test_shutdown_with_drain_waits_for_in_flight_keys() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("k")
    assert await queue.get() == "k"
    drained = asyncio.ensure_future(queue.shutdown_with_drain())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not drained.done(), "drain must wait for the key in flight"
    queue.done("k")
    await asyncio.wait_for(drained, 1)


async def test_done_on_a_key_not_in_flight_is_an_error() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("nope")


async def test_metrics_use_kubevirt_names() -> None:
    clock = ManualClock()
    metrics = InMemoryMetrics()
    queue: WorkQueue[str] = WorkQueue("vmi", clock=clock, metrics=metrics)
    labels = {"name": "vmi"}
    queue.add("a")
    queue.add("b")
    assert metrics.value("kubevirt_workqueue_depth", labels) == 2
    assert metrics.value("kubevirt_workqueue_adds_total", labels) == 2
    await clock.advance(1.5)
    assert await queue.get() == "a"
    await clock.advance(2.0)
    queue.update_unfinished_work()
    assert metrics.value("kubevirt_workqueue_longest_running_processor_seconds", labels) == 2.0
    assert metrics.value("kubevirt_workqueue_unfinished_work_seconds", labels) == 2.0
    queue.done("a")
    queue.add_rate_limited("a")
    assert metrics.value("kubevirt_workqueue_retries_total", labels) == 1
    assert metrics.value("kubevirt_workqueue_queue_duration_seconds", labels) == 1
    assert metrics.value("kubevirt_workqueue_work_duration_seconds", labels) == 1
    text = metrics.render()
    assert 'kubevirt_workqueue_depth{name="vmi"} 1' in text
    assert "# TYPE kubevirt_workqueue_work_duration_seconds histogram" in text
