"""Leader election against a fake Lease: one leader, takeover after expiry, release, step-down."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest
from kube_runtime import LeaderElectionConfig, LeaderElector, ManualClock
from kube_runtime.fakes import FakeLeaseApi

CFG = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}


class Candidate:
    def __init__(self, name: str, lease: FakeLeaseApi, clock: ManualClock, stop: asyncio.Event):
        self.name = name
        self.leading = False
        self.started = 0
        self.stopped = 0
        self.leaders_seen: list[str] = []
        self.stop = stop

        async def lead(lost: asyncio.Event) -> None:
            self.leading = True
            self.started += 1
            try:
                await lost.wait()
            finally:
                self.leading = False

        def stopped() -> None:
            self.stopped += 1

        self.elector = LeaderElector(
            lease,
            LeaderElectionConfig(identity=name, **CFG),
            on_started_leading=lead,
            on_stopped_leading=stopped,
            on_new_leader=self.leaders_seen.append,
            clock=clock,
            rng=random.Random(name),
        )
        self.task = asyncio.ensure_future(self.elector.run(stop))


async def until(predicate: Callable[[], bool], clock: ManualClock, limit: float = 120) -> float:
    """Advance the fake clock until `predicate` holds; returns the time it took."""
    start = clock.monotonic()
    while not predicate():
        if clock.monotonic() - start > limit:
            raise AssertionError("condition never became true")
        await clock.advance(0.25)
    return clock.monotonic() - start


async def test_exactly_one_of_two_leads_and_the_other_takes_over_after_expiry() -> None:
    clock = ManualClock()
    lease = FakeLeaseApi()
    a = Candidate("a", lease, clock, asyncio.Event())
    b = Candidate("b", lease, clock, asyncio.Event())
    await until(lambda: a.leading or b.leading, clock)
    for _ in range(40):
        await clock.advance(0.5)
        assert a.leading != b.leading, "exactly one leader at all times"
    leader, follower = (a, b) if a.leading else (b, a)
    assert follower.leaders_seen == [leader.name]
    # The leader dies without releasing (kill -9): its task simply vanishes.
    leader.task.cancel()
    await asyncio.gather(leader.task, return_exceptions=True)
    took = await until(lambda: follower.leading, clock)
    assert CFG["lease_duration"] - 2 <= took <= CFG["lease_duration"] + 2 * 2.4
    assert lease.record is not None
    assert lease.record.holder == follower.name
    assert lease.record.transitions == 1
    follower.stop.set()
    await follower.task


async def test_release_on_stop_lets_the_other_lead_at_once() -> None:
    clock = ManualClock()
    lease = FakeLeaseApi()
    a = Candidate("a", lease, clock, asyncio.Event())
    await until(lambda: a.leading, clock)
    b = Candidate("b", lease, clock, asyncio.Event())
    await clock.advance(5)
    assert not b.leading
    a.stop.set()
    await a.task
    assert (a.started, a.stopped) == (1, 1)
    assert lease.record is not None
    assert lease.record.holder == ""
    took = await until(lambda: b.leading, clock)
    assert took <= 2 * 2.4 + 0.5, "a released lease is taken at the next retry"
    b.stop.set()
    await b.task


async def test_leader_steps_down_when_it_cannot_renew_before_the_deadline() -> None:
    clock = ManualClock()
    lease = FakeLeaseApi()
    a = Candidate("a", lease, clock, asyncio.Event())
    await until(lambda: a.leading, clock)
    lease.down = True
    took = await until(lambda: not a.leading, clock)
    # It must stop before anyone else could consider the lease expired.
    assert CFG["renew_deadline"] - 0.5 <= took < CFG["lease_duration"]
    await asyncio.wait_for(a.task, 1)
    assert a.stopped == 1


async def test_invalid_timings_are_refused_with_the_rule() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaderElectionConfig(identity="x", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="identity"):
        LeaderElectionConfig(identity="")


async def test_a_leader_whose_renewals_hang_steps_down_before_the_lease_expires() -> None:
    clock = ManualClock()
    lease = FakeLeaseApi()
    a = Candidate("a", lease, clock, asyncio.Event())
    await until(lambda: a.leading, clock)
    renewed = lease.record
    lease.hang.set()  # the API server stops answering; calls never return
    took = await until(lambda: not a.leading, clock)
    assert took < CFG["lease_duration"], "must stop leading before others may take over"
    assert lease.record == renewed
    await asyncio.wait_for(a.task, 1)
