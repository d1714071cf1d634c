"""Reflector against a fake list/watch: paging, 410 relist, re-watch, backoff, bookmarks,
and the normal ends of a watch (server timeout, close, read timeout) that must not back off.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import structlog
from kube_runtime import ApiError, ManualClock, Reflector, ReflectorSettings, WatchEnd
from kube_runtime.fakes import FakeListWatch


class Recorder:
    """A ReflectorSink that mirrors what it is told, like a store would."""

    def __init__(self) -> None:
        self.state: dict[str, str] = {}
        self.replaces = 0
        self.events: list[tuple[str, str]] = []

    async def replace(self, items: list[dict[str, Any]], resource_version: str) -> None:
        self.replaces += 1
        self.state = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}

    async def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.events.append((event_type, name))
        if event_type == "DELETED":
            self.state.pop(name, None)
        else:
            self.state[name] = obj["metadata"]["resourceVersion"]


def server_state(source: FakeListWatch) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in source.objects.values()
    }


async def until(predicate: Callable[[], bool], clock: ManualClock | None = None) -> None:
    """Let the loop (and, if given, the fake clock) run until `predicate` holds."""
    for _ in range(2000):
        if predicate():
            return
        if clock is not None:
            await clock.advance(0.1)
        else:
            await asyncio.sleep(0)
    raise AssertionError("condition never became true")


@pytest.fixture
async def running() -> AsyncIterator[Callable[..., tuple[Reflector, Recorder, ManualClock]]]:
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []

    def start(
        source: FakeListWatch, page_size: int = 500
    ) -> tuple[Reflector, Recorder, ManualClock]:
        clock = ManualClock()
        sink = Recorder()
        reflector = Reflector(
            source,
            sink,
            settings=ReflectorSettings(page_size=page_size, backoff_initial=1.0, backoff_cap=8.0),
            clock=clock,
            rng=random.Random(1),
        )
        tasks.append(asyncio.ensure_future(reflector.run(stop)))
        return reflector, sink, clock

    yield start
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)


async def test_lists_in_pages_then_watches_from_the_list_version(running: Any) -> None:
    source = FakeListWatch()
    for i in range(25):
        source.create(f"cm{i:02}")
    reflector, sink, _ = running(source, page_size=10)
    await until(lambda: source.open_streams == 1)
    assert source.list_calls == 3
    assert sink.state == server_state(source)
    assert source.watch_calls == [str(source.rv)]
    source.create("late")
    source.update("cm03", x="1")
    source.delete("cm04")
    await until(lambda: sink.state == server_state(source))
    assert sink.events == [("ADDED", "late"), ("MODIFIED", "cm03"), ("DELETED", "cm04")]
    assert reflector.last_resource_version == str(source.rv)


async def test_stream_end_rewatches_from_the_last_seen_version(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    _reflector, sink, _ = running(source)
    await until(lambda: source.open_streams == 1)
    source.create("b")
    await until(lambda: "b" in sink.state)
    source.end_streams()
    await until(lambda: len(source.watch_calls) == 2 and source.open_streams == 1)
    assert source.watch_calls[1] == str(source.rv)
    assert source.list_calls == 1, "a clean stream end must not relist"


async def test_410_on_watch_start_relists_and_converges(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    source.create("b")
    reflector, sink, clock = running(source)
    await until(lambda: source.open_streams == 1)
    # The connection drops; while the client is away things change and history is compacted.
    source.fail_watches.append(ConnectionResetError("reset"))
    source.end_streams()
    source.delete("a")
    source.update("b", v="2")
    source.create("c")
    source.compact()
    await until(lambda: source.open_streams == 1 and len(source.watch_calls) >= 3, clock)
    assert sink.state == server_state(source)
    assert reflector.stats.relists_on_expired == 1
    assert sink.replaces == 2


async def test_410_error_event_mid_stream_relists(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    reflector, sink, _ = running(source)
    await until(lambda: source.open_streams == 1)
    source.error_event(410, "Expired")
    await until(lambda: source.list_calls == 2 and source.open_streams == 1)
    assert reflector.stats.relists_on_expired == 1
    assert sink.state == server_state(source)


async def test_expired_continue_token_restarts_the_list(running: Any) -> None:
    source = FakeListWatch()
    for i in range(6):
        source.create(f"cm{i}")
    original = source.list_page
    calls = 0

    async def compact_after_first_page(*, limit: int, continue_token: str) -> Any:
        nonlocal calls
        calls += 1
        page = await original(limit=limit, continue_token=continue_token)
        if calls == 1:
            source.create("during-list")
            source.compact()
        return page

    source.list_page = compact_after_first_page  # type: ignore[method-assign]
    _, sink, _ = running(source, page_size=4)
    await until(lambda: source.open_streams == 1)
    assert sink.state == server_state(source)
    assert "during-list" in sink.state


async def test_errors_back_off_with_growing_jittered_delays(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    for _ in range(4):
        source.fail_watches.append(ApiError(500, "InternalError", "boom"))
    reflector, _sink, clock = running(source)
    await until(lambda: len(source.watch_calls) == 1)
    times = [clock.monotonic()]
    while len(source.watch_calls) < 5:
        n = len(source.watch_calls)
        await until(lambda n=n: len(source.watch_calls) > n, clock)
        times.append(clock.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # base 1s doubling, jitter up to +100%, cap 8s
    for gap, base in zip(gaps, [1, 2, 4, 8], strict=True):
        assert base - 0.11 <= gap <= 2 * base + 0.11, gaps
    assert reflector.stats.errors == 4
    await until(lambda: source.open_streams == 1, clock)
    assert source.list_calls == 1, "watch errors re-watch from the last version, not relist"


async def test_list_errors_retry_the_list(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    source.fail_lists.append(ApiError(503, "ServiceUnavailable", "etcd"))
    _, sink, clock = running(source)
    await until(lambda: source.open_streams == 1, clock)
    assert source.list_calls == 2
    assert sink.state == server_state(source)


async def test_bookmarks_advance_the_resume_version(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    other = FakeListWatch()  # changes to objects we do not watch still bump the version
    reflector, sink, _ = running(source)
    await until(lambda: source.open_streams == 1)
    before = reflector.last_resource_version
    source.rv += 5  # e.g. other resources changed
    source.bookmark()
    await until(lambda: reflector.stats.bookmarks == 1)
    assert reflector.last_resource_version == str(source.rv) != before
    source.end_streams()
    await until(lambda: len(source.watch_calls) == 2)
    assert source.watch_calls[-1] == str(source.rv)
    assert sink.events == []
    assert other.rv == 1


async def test_stop_ends_a_blocked_watch_promptly() -> None:
    source = FakeListWatch()
    stop = asyncio.Event()
    reflector = Reflector(source, Recorder(), clock=ManualClock())
    task = asyncio.ensure_future(reflector.run(stop))
    await until(lambda: source.open_streams == 1)
    stop.set()
    await asyncio.wait_for(task, 1)
    assert source.open_streams == 0


async def test_repeated_410_right_after_relisting_backs_off(running: Any) -> None:
    from kube_runtime import ResourceExpiredError

    source = FakeListWatch()
    source.create("a")
    source.fail_watches.extend(ResourceExpiredError(410, "Expired", "gone") for _ in range(3))
    reflector, _, clock = running(source)
    await until(lambda: source.list_calls == 2)
    for _ in range(50):
        await asyncio.sleep(0)
    assert source.list_calls == 2, "the first 410 relists at once, the second waits"
    await until(lambda: source.open_streams == 1, clock)
    assert source.list_calls == 4
    assert reflector.stats.relists_on_expired == 3


ENDS = {
    "server timeout or close": (FakeListWatch.end_streams, WatchEnd.CLOSED),
    "client read timeout": (FakeListWatch.time_out_streams, WatchEnd.READ_TIMEOUT),
    "connection lost mid-stream": (FakeListWatch.drop_streams, WatchEnd.CONNECTION_LOST),
}


@pytest.mark.parametrize("how", ENDS)
async def test_an_idle_watch_end_rewatches_at_once_from_the_last_version(
    running: Any, how: str
) -> None:
    end_streams, expected_end = ENDS[how]
    source = FakeListWatch()
    source.create("a")
    reflector, sink, clock = running(source)
    await until(lambda: source.open_streams == 1)
    source.create("b")
    await until(lambda: "b" in sink.state)
    resume_from = str(source.rv)
    with structlog.testing.capture_logs() as logs:
        # Five idle periods in a row: nothing changes, each watch ends after 90 s of silence.
        for n in range(2, 7):
            await clock.advance(90)
            end_streams(source)
            # No clock advance here: a back-off sleep would never finish and this would fail.
            await until(lambda n=n: len(source.watch_calls) == n and source.open_streams == 1)
            assert clock.sleepers == 0, "re-watched without waiting"
    assert source.watch_calls[1:] == [resume_from] * 5
    assert source.list_calls == 1, "a normal end does not relist"
    assert reflector.stats.errors == 0, reflector.stats.last_error
    assert reflector.stats.ends[expected_end] == 5
    assert {entry["log_level"] for entry in logs} == {"debug"}, logs
    assert logs[0]["event"] == "watch ended, re-watching"
    assert logs[0]["end"] == expected_end.value
    source.create("c")
    await until(lambda: sink.state == server_state(source))


async def test_a_real_error_backs_off_and_a_good_watch_resets_the_back_off(
    running: Any,
) -> None:
    source = FakeListWatch()
    source.create("a")
    source.fail_watches.extend(
        [
            ApiError(500, "InternalError", "boom"),
            ConnectionRefusedError("connection refused"),
            ApiError(500, "InternalError", "boom"),
        ]
    )
    reflector, _sink, clock = running(source)
    await until(lambda: len(source.watch_calls) == 1)
    started = clock.monotonic()
    await until(lambda: source.open_streams == 1, clock)
    # Three failures: 1 + 2 + 4 s at least (base 1 s doubling, jitter up to +100%).
    assert clock.monotonic() - started >= 7 - 0.11
    assert reflector.stats.errors == 3
    assert "ConnectionRefusedError" in reflector.stats.last_error or "500" in (
        reflector.stats.last_error
    )

    # A good watch: it runs for a while, then the server ends it.
    await clock.advance(30)
    source.fail_watches.append(ApiError(500, "InternalError", "boom"))
    source.end_streams()
    await until(lambda: len(source.watch_calls) == 5)  # re-watched at once, and failed
    failed_at = clock.monotonic()
    await until(lambda: source.open_streams == 1, clock)
    gap = clock.monotonic() - failed_at
    assert 1 - 0.11 <= gap <= 2 + 0.11, f"back-off restarted from its base: waited {gap:.1f}s"
    assert reflector.stats.errors == 4


async def test_an_error_event_mid_stream_backs_off(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    reflector, _sink, clock = running(source)
    await until(lambda: source.open_streams == 1)
    with structlog.testing.capture_logs() as logs:
        source.error_event(500, "InternalError")
        await until(lambda: clock.sleepers == 1)
    assert len(source.watch_calls) == 1, "waits before re-watching"
    assert reflector.stats.errors == 1
    assert [e["log_level"] for e in logs] == ["warning"]
    await until(lambda: len(source.watch_calls) == 2 and source.open_streams == 1, clock)
    assert source.list_calls == 1


async def test_a_watch_that_closes_at_once_and_empty_backs_off(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    reflector, _sink, clock = running(source)
    await until(lambda: source.open_streams == 1)
    source.end_streams()  # no event, no time passed: a broken server or proxy, not idleness
    await until(lambda: clock.sleepers == 1)
    assert len(source.watch_calls) == 1
    assert reflector.stats.errors == 1
    assert "ShortWatchError" in reflector.stats.last_error


async def test_a_410_after_an_idle_end_relists_at_once(running: Any) -> None:
    source = FakeListWatch()
    source.create("a")
    reflector, sink, clock = running(source)
    await until(lambda: source.open_streams == 1)
    await clock.advance(90)
    source.create("b")  # the watch sees it ...
    await until(lambda: "b" in sink.state)
    # ... then the connection goes silent, history is compacted and more changes come.
    source.rv += 10
    source.compact()
    source.time_out_streams()
    await until(lambda: source.list_calls == 2 and source.open_streams == 1)
    assert clock.sleepers == 0, "relisted without waiting"
    assert reflector.stats.relists_on_expired == 1
    assert reflector.stats.errors == 0
    assert source.watch_calls[-1] == str(source.rv)
    assert sink.state == server_state(source)
