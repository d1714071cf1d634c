"""Property tests: the work queue never runs a key twice at once and never loses an add."""

from __future__ import annotations

import asyncio
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from kube_runtime import ItemExponentialRateLimiter, ManualClock, WorkQueue

KEYS = st.sampled_from(["a", "b", "c", "d"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS, st.just(0.0)),
        st.tuples(st.just("add_after"), KEYS, st.floats(0.001, 2.0)),
        st.tuples(st.just("tick"), st.just(""), st.floats(0.0, 1.0)),
    ),
    max_size=60,
)


async def _scenario(ops: list[tuple[str, str, float]], workers: int, rng: random.Random) -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(
        "prop", clock=clock, rate_limiter=ItemExponentialRateLimiter(0.01, 0.5)
    )
    seq = 0
    active: set[str] = set()
    adds: list[tuple[int, str]] = []  # (sequence number, key) of each add the queue accepted
    starts: list[tuple[int, str]] = []
    failed_once: set[str] = set()

    def tick() -> int:
        nonlocal seq
        seq += 1
        return seq

    async def worker() -> None:
        while (key := await queue.get()) is not None:
            assert key not in active, f"{key} handed to two workers at once"
            active.add(key)
            starts.append((tick(), key))
            await clock.sleep(rng.choice([0.0, 0.05, 0.3]))
            active.discard(key)
            # Each key fails once: the retry must still come back.
            if key not in failed_once and rng.random() < 0.3:
                failed_once.add(key)
                adds.append((tick(), key))
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
            queue.done(key)

    tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
    for op, key, value in ops:
        if op == "add":
            adds.append((tick(), key))
            queue.add(key)
        elif op == "add_after":
            # The add happens when the delay expires; the key must start after *now*.
            adds.append((tick(), key))
            queue.add_after(key, value)
        else:
            await clock.advance(value)
    await clock.run_until_idle()
    assert len(queue) == 0
    assert queue.delayed == 0
    assert not queue.processing
    await queue.shutdown_with_drain()
    await asyncio.gather(*tasks)

    for added_at, key in adds:
        assert any(s > added_at and k == key for s, k in starts), f"add of {key} lost"
    for key in {k for _, k in starts}:
        assert sum(k == key for _, k in starts) <= sum(k == key for _, k in adds)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, workers=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_never_concurrent_never_lost_and_deduplicated(
    ops: list[tuple[str, str, float]], workers: int, seed: int
) -> None:
    asyncio.run(_scenario(ops, workers, random.Random(seed)))


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(KEYS, min_size=1, max_size=30))
def test_adds_while_waiting_collapse_into_one(keys: list[str]) -> None:
    async def main() -> None:
        queue: WorkQueue[str] = WorkQueue("dedupe", clock=ManualClock())
        for key in keys:
            queue.add(key)
        assert len(queue) == len(set(keys))
        taken = [await queue.get() for _ in range(len(set(keys)))]
        # First-come order is kept.
        assert taken == list(dict.fromkeys(keys))

    asyncio.run(main())
