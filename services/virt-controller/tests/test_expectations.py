"""Expectations hold a key until the informer shows what was created or deleted."""

from __future__ import annotations

from kube_runtime import ManualClock
from virt_controller.expectations import Expectations


def test_creations_block_until_observed() -> None:
    e = Expectations(ManualClock())
    assert e.satisfied("k")
    e.expect_creations("k", 2)
    assert not e.satisfied("k")
    e.creation_observed("k")
    assert not e.satisfied("k")
    e.creation_observed("k")
    assert e.satisfied("k")


def test_deletions_are_tracked_by_uid() -> None:
    e = Expectations(ManualClock())
    e.expect_deletions("k", ["a", "b"])
    e.deletion_observed("k", "c")
    assert not e.satisfied("k")
    e.deletion_observed("k", "a")
    e.deletion_observed("k", "b")
    assert e.satisfied("k")


async def test_unobserved_expectations_expire() -> None:
    clock = ManualClock()
    e = Expectations(clock, ttl=300)
    e.expect_creations("k", 1)
    await clock.advance(299)
    assert not e.satisfied("k")
    await clock.advance(2)
    assert e.satisfied("k")
