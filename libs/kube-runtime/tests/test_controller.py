"""Controller runner: workers reconcile keys, retry failures with backoff, drain on stop."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import structlog
from kube_runtime import (
    Controller,
    InMemoryMetrics,
    ItemExponentialRateLimiter,
    ManualClock,
    Result,
    SharedInformer,
    WorkQueue,
)
from kube_runtime.fakes import FakeListWatch


async def until(predicate: Callable[[], bool], clock: ManualClock | None = None) -> None:
    for _ in range(4000):
        if predicate():
            return
        if clock is not None:
            await clock.advance(0.05)
        else:
            await asyncio.sleep(0)
    raise AssertionError("condition never became true")


async def test_informer_events_become_reconciles_by_key_with_bound_log_context() -> None:
    source = FakeListWatch()
    source.create("a")
    clock = ManualClock()
    informer: SharedInformer[object] = SharedInformer(source, clock=clock)
    queue: WorkQueue[str] = WorkQueue("cm", clock=clock)
    informer.add_handler(lambda e: queue.add(e.key))
    contexts: list[dict[str, object]] = []

    async def reconcile(key: str) -> None:
        contexts.append(structlog.contextvars.get_contextvars())

    stop = asyncio.Event()
    controller = Controller("cm-controller", queue, reconcile, workers=2, informers=[informer])
    tasks = [asyncio.ensure_future(informer.run(stop)), asyncio.ensure_future(controller.run(stop))]
    await until(lambda: len(contexts) == 1)
    source.update("a", x="1")
    source.create("b")
    await until(lambda: len(contexts) == 3)
    assert sorted(c["key"] for c in contexts) == ["default/a", "default/a", "default/b"]
    assert {c["controller"] for c in contexts} == {"cm-controller"}
    assert structlog.contextvars.get_contextvars() == {}
    stop.set()
    await asyncio.gather(*tasks)


async def test_failures_retry_with_backoff_then_forget_on_success() -> None:
    clock = ManualClock()
    metrics = InMemoryMetrics()
    queue: WorkQueue[str] = WorkQueue(
        "retry", clock=clock, metrics=metrics, rate_limiter=ItemExponentialRateLimiter(1.0, 60)
    )
    attempts: list[float] = []

    async def reconcile(key: str) -> None:
        attempts.append(clock.monotonic())
        if len(attempts) < 4:
            raise RuntimeError("not yet")

    stop = asyncio.Event()
    task = asyncio.ensure_future(Controller("retry", queue, reconcile).run(stop))
    queue.add("k")
    await until(lambda: len(attempts) == 4, clock)
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(attempts)]
    assert gaps == [1.0, 2.0, 4.0]
    assert queue.num_requeues("k") == 0, "success forgets the history"
    assert metrics.value("kubevirt_workqueue_retries_total", {"name": "retry"}) == 3
    stop.set()
    await task


async def test_result_requeue_after_reconciles_again_later() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue("requeue", clock=clock)
    times: list[float] = []

    async def reconcile(key: str) -> Result:
        times.append(clock.monotonic())
        return Result(requeue_after=30)

    stop = asyncio.Event()
    task = asyncio.ensure_future(Controller("requeue", queue, reconcile).run(stop))
    queue.add("k")
    await until(lambda: len(times) == 1)
    await clock.advance(29.9)
    assert len(times) == 1
    await clock.advance(0.2)
    await until(lambda: len(times) == 2)
    stop.set()
    await task


async def test_stop_lets_in_flight_reconciles_finish() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue("drain", clock=clock)
    release = asyncio.Event()
    finished: list[str] = []
    started: list[str] = []

    async def reconcile(key: str) -> None:
        started.append(key)
        await release.wait()
        finished.append(key)

    stop = asyncio.Event()
    task = asyncio.ensure_future(Controller("drain", queue, reconcile, workers=2).run(stop))
    queue.add("a")
    queue.add("b")
    await until(lambda: len(started) == 2)
    stop.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert not task.done(), "run must wait for reconciles in flight"
    release.set()
    await asyncio.wait_for(task, 1)
    assert sorted(finished) == ["a", "b"]


async def test_one_key_is_never_reconciled_twice_at_once() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue("serial", clock=clock)
    active: set[str] = set()
    overlaps = 0
    count = 0

    async def reconcile(key: str) -> None:
        nonlocal overlaps, count
        if key in active:
            overlaps += 1
        active.add(key)
        await clock.sleep(0.1)
        active.discard(key)
        count += 1

    stop = asyncio.Event()
    task = asyncio.ensure_future(Controller("serial", queue, reconcile, workers=4).run(stop))
    for _ in range(20):
        queue.add("same")
        queue.add("other")
        await clock.advance(0.03)
    await until(lambda: len(queue) == 0 and not queue.processing, clock)
    assert overlaps == 0
    assert count >= 2
    stop.set()
    await task
