"""Shared informer: handlers see adds/updates/deletes, sync, resync, decode, late handlers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kube_runtime import DeltaType, Event, ManualClock, RawObject, SharedInformer
from kube_runtime.fakes import FakeListWatch


@dataclass(frozen=True)
class Typed:
    name: str
    value: str


def decode(raw: RawObject) -> Typed:
    return Typed(raw["metadata"]["name"], raw.get("data", {}).get("v", ""))


async def until(predicate: Callable[[], bool]) -> None:
    for _ in range(2000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


@pytest.fixture
async def stop() -> AsyncIterator[asyncio.Event]:
    event = asyncio.Event()
    yield event
    event.set()


async def test_handlers_see_the_list_then_changes_and_the_cache_matches(
    stop: asyncio.Event,
) -> None:
    source = FakeListWatch()
    source.create("a", v="1")
    informer: SharedInformer[Typed] = SharedInformer(source, decode=decode, clock=ManualClock())
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda e: seen.append((e.type.value, e.key)))
    task = asyncio.ensure_future(informer.run(stop))
    assert await informer.wait_for_sync(1)
    source.create("b", v="1")
    source.update("a", v="2")
    source.delete("b")
    await until(lambda: len(seen) == 4)
    assert seen == [
        ("ADDED", "default/a"),
        ("ADDED", "default/b"),
        ("UPDATED", "default/a"),
        ("DELETED", "default/b"),
    ]
    assert informer.get("default/a") == Typed("a", "2")
    assert informer.objects() == [Typed("a", "2")]
    stop.set()
    await task


async def test_events_decode_on_demand_and_keep_the_raw_object(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    source.create("a", v="1")
    calls = 0

    def counting(raw: RawObject) -> Typed:
        nonlocal calls
        calls += 1
        return decode(raw)

    informer: SharedInformer[Typed] = SharedInformer(source, decode=counting, clock=ManualClock())
    events: list[Event[Typed]] = []
    informer.add_handler(events.append)
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    source.update("a", v="2")
    await until(lambda: len(events) == 2)
    assert calls == 0, "nothing decoded until asked"
    update = events[1]
    assert update.obj == Typed("a", "2")
    assert update.obj is update.obj
    assert update.old == Typed("a", "1")
    assert update.raw["data"]["v"] == "2"
    stop.set()
    await task


async def test_relist_delivers_tombstones_for_objects_deleted_while_away(
    stop: asyncio.Event,
) -> None:
    source = FakeListWatch()
    source.create("a", v="1")
    source.create("b", v="1")
    clock = ManualClock()
    informer: SharedInformer[Typed] = SharedInformer(source, decode=decode, clock=clock)
    events: list[Event[Typed]] = []
    informer.add_handler(events.append)
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    source.fail_watches.append(ConnectionResetError())
    source.end_streams()
    source.delete("a")
    source.compact()
    while source.open_streams == 0 or len(events) < 3:
        await clock.advance(0.5)
    tombstone = events[2]
    assert (tombstone.type, tombstone.key, tombstone.tombstone) == (
        DeltaType.DELETED,
        "default/a",
        True,
    )
    assert tombstone.obj == Typed("a", "1")
    assert sorted(informer.store.keys()) == ["default/b"]
    stop.set()
    await task


async def test_late_handler_is_replayed_the_cache(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    for name in "abc":
        source.create(name)
    informer: SharedInformer[Typed] = SharedInformer(source, decode=decode, clock=ManualClock())
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    late: list[str] = []
    informer.add_handler(lambda e: late.append(e.key))
    await until(lambda: len(late) == 3)
    assert sorted(late) == ["default/a", "default/b", "default/c"]
    stop.set()
    await task


async def test_periodic_resync_redelivers_every_object(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    source.create("a")
    clock = ManualClock()
    informer: SharedInformer[Typed] = SharedInformer(
        source, decode=decode, clock=clock, resync_period=30
    )
    kinds: list[DeltaType] = []
    informer.add_handler(lambda e: kinds.append(e.type))
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    await clock.advance(29)
    assert kinds == [DeltaType.ADDED]
    await clock.advance(1)
    assert kinds == [DeltaType.ADDED, DeltaType.SYNC]
    stop.set()
    await task


async def test_a_failing_handler_does_not_starve_the_others(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    informer: SharedInformer[Typed] = SharedInformer(source, decode=decode, clock=ManualClock())

    def broken(event: Event[Typed]) -> None:
        raise RuntimeError("bug in a handler")

    seen: list[str] = []

    async def async_handler(event: Event[Typed]) -> None:
        seen.append(event.key)

    informer.add_handler(broken)
    informer.add_handler(async_handler)
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    source.create("x")
    await until(lambda: seen == ["default/x"])
    assert len(informer.store) == 1
    stop.set()
    await task


async def test_indexers_are_queryable_through_the_informer(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    source.create("a", v="n1")
    source.create("b", v="n2")

    def by_value(raw: Any) -> list[str]:
        return [raw["data"]["v"]]

    informer: SharedInformer[Typed] = SharedInformer(
        source, decode=decode, indexers={"v": by_value}, clock=ManualClock()
    )
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    assert informer.by_index("v", "n2") == [Typed("b", "n2")]
    stop.set()
    await task


async def test_wait_for_sync_times_out_when_the_list_never_succeeds(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    source.fail_lists.extend([ConnectionRefusedError()] * 10)
    informer: SharedInformer[Typed] = SharedInformer(source, decode=decode, clock=ManualClock())
    task = asyncio.ensure_future(informer.run(stop))
    assert not await informer.wait_for_sync(0.05)
    assert not informer.has_synced
    stop.set()
    await task


async def test_transform_edits_objects_before_they_are_cached(stop: asyncio.Event) -> None:
    from kube_runtime import drop_managed_fields

    source = FakeListWatch()
    source.create("a")
    source.objects["default/a"]["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    informer: SharedInformer[Typed] = SharedInformer(
        source, decode=decode, transform=drop_managed_fields, clock=ManualClock()
    )
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    source.update("a", v="2")
    await until(lambda: informer.get("default/a") == Typed("a", "2"))
    cached = informer.get_raw("default/a")
    assert cached is not None
    assert "managedFields" not in cached["metadata"]
    stop.set()
    await task


async def test_each_object_version_is_decoded_once(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    source.create("a", v="1")
    calls: list[str] = []

    def counting(raw: RawObject) -> Typed:
        calls.append(raw["metadata"]["resourceVersion"])
        return decode(raw)

    informer: SharedInformer[Typed] = SharedInformer(source, decode=counting, clock=ManualClock())
    events: list[Event[Typed]] = []
    informer.add_handler(events.append)
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    assert events[0].obj is informer.get("default/a") is informer.get("default/a")
    assert len(calls) == 1
    source.update("a", v="2")
    await until(lambda: len(events) == 2)
    assert informer.get("default/a") == Typed("a", "2")
    assert informer.get("default/a") is events[1].obj
    assert len(calls) == 2
    stop.set()
    await task


async def test_a_late_handler_sees_the_replay_before_newer_changes(stop: asyncio.Event) -> None:
    source = FakeListWatch()
    source.create("a", v="1")
    informer: SharedInformer[Typed] = SharedInformer(source, decode=decode, clock=ManualClock())
    task = asyncio.ensure_future(informer.run(stop))
    await informer.wait_for_sync(1)
    await until(lambda: source.open_streams > 0)
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda e: seen.append((e.type.value, e.obj.value)))
    source.update("a", v="2")
    source.update("a", v="3")
    await until(lambda: seen[-1:] == [("UPDATED", "3")])
    assert seen[0][0] == "ADDED"
    assert [t for t, _ in seen[1:]] == ["UPDATED"] * (len(seen) - 1)
    values = [v for _, v in seen]
    assert values == sorted(values), "never an older state after a newer one"
    stop.set()
    await task
