"""The reflector: paginated list, then watch from the list's resourceVersion, forever.

A watch that ends without a verdict from the server (its timeoutSeconds ran out, the stream
closed, the client's read timeout fired on a silent stream, the connection dropped
mid-stream) is the normal life of a watch: re-watch at once from the last seen
resourceVersion, as client-go does. A 410 relists. Only errors (a refused or failed watch
request, an ERROR event, a very short empty watch) back off, with jitter; the back-off
resets after a good watch.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from ..clock import Clock, SystemClock, sleep_or_stop
from ..errors import ApiError, ResourceExpiredError
from ..ratelimit import Backoff
from .listwatch import ListWatchSource, WatchEvent

__all__ = [
    "Reflector",
    "ReflectorSettings",
    "ReflectorSink",
    "ReflectorStats",
    "ShortWatchError",
    "WatchEnd",
]

log = structlog.get_logger(__name__)


class ReflectorSink(Protocol):
    """What a reflector feeds: a full replacement after each list, then single changes."""

    async def replace(self, items: list[dict[str, Any]], resource_version: str) -> None: ...

    async def apply(self, event_type: str, obj: dict[str, Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class ReflectorSettings:
    """The reflector's knobs; the client read timeout belongs to the source (RestListWatch)."""

    page_size: int = 500
    # Each watch asks the server to end it after min_watch_timeout * [1, 2) seconds (jitter
    # spreads reconnects of many clients).
    min_watch_timeout: float = 300.0
    backoff_initial: float = 0.8
    backoff_cap: float = 30.0
    # A watch that ends with no events sooner than this counts as an error (no hot loop).
    short_watch: float = 1.0


class WatchEnd(enum.Enum):
    """How a watch ended without an error; each of these re-watches at once."""

    CLOSED = "closed"  # the server's timeoutSeconds ran out, or it closed the stream
    # Silent for the client's read timeout: an idle resource (no bookmark comes before
    # the cache has seen an event), or a dead server, which the immediate re-watch reveals.
    READ_TIMEOUT = "read timeout"
    CONNECTION_LOST = "connection lost"  # dropped mid-stream, e.g. an apiserver restart


class ShortWatchError(Exception):
    """A watch ended with no events as soon as it started: treated as an error."""


@dataclass
class ReflectorStats:
    """Counters a test or a status page can read."""

    lists: int = 0
    watches: int = 0
    relists_on_expired: int = 0
    errors: int = 0
    events: int = 0
    bookmarks: int = 0
    last_error: str = ""
    ends: Counter[WatchEnd] = field(default_factory=Counter)


class Reflector:
    """Keeps a sink in step with one list/watch source until stopped."""

    def __init__(
        self,
        source: ListWatchSource,
        sink: ReflectorSink,
        *,
        name: str = "reflector",
        settings: ReflectorSettings | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.source = source
        self.sink = sink
        self.name = name
        self.settings = settings or ReflectorSettings()
        self.clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self.last_resource_version = ""
        self.stats = ReflectorStats()

    async def run(self, stop: asyncio.Event) -> None:
        """List and watch until `stop` is set (a blocked watch is cancelled promptly)."""
        body = asyncio.ensure_future(self._loop(stop))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({body, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (body, stopper):
                if not task.done():
                    task.cancel()
            await asyncio.gather(stopper, return_exceptions=True)
            try:
                await body
            except asyncio.CancelledError:
                if not stop.is_set():
                    raise

    async def _loop(self, stop: asyncio.Event) -> None:
        s = self.settings
        backoff = Backoff(s.backoff_initial, s.backoff_cap, rng=self._rng)
        need_list = True
        expired_in_row = 0
        while not stop.is_set():
            try:
                if need_list:
                    await self._list()
                    need_list = False
                end = await self._watch()
                self.stats.ends[end] += 1
                backoff.reset()
                expired_in_row = 0
                log.debug(
                    "watch ended, re-watching",
                    reflector=self.name,
                    end=end.value,
                    resource_version=self.last_resource_version,
                )
                continue
            except ResourceExpiredError as exc:
                self.stats.relists_on_expired += 1
                log.info("resource version expired, relisting", reflector=self.name, error=str(exc))
                need_list = True
                expired_in_row += 1
                if expired_in_row == 1:
                    continue  # the normal case: relist at once
                delay = backoff.next()  # expiring again straight after a list: slow down
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.stats.errors += 1
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                delay = backoff.next()
                log.warning(
                    "list/watch failed, backing off",
                    reflector=self.name,
                    error=self.stats.last_error,
                    delay=round(delay, 3),
                    relist=need_list,
                )
            if await sleep_or_stop(self.clock, delay, stop):
                return

    async def _list(self) -> None:
        items: list[dict[str, Any]] = []
        token = ""
        resource_version = ""
        restarted = False
        while True:
            try:
                page = await self.source.list_page(
                    limit=self.settings.page_size, continue_token=token
                )
            except ResourceExpiredError as exc:
                if not token or restarted:
                    # Not a stale token (or stale twice running): fail, and back off.
                    raise ApiError(exc.status, "ListExpired", exc.message) from exc
                # The continue token outlived etcd's compaction window: restart the list.
                items, token, restarted = [], "", True
                continue
            items.extend(page.items)
            resource_version = page.resource_version
            token = page.continue_token
            if not token:
                break
        self.stats.lists += 1
        self.last_resource_version = resource_version
        await self.sink.replace(items, resource_version)

    async def _watch(self) -> WatchEnd:
        """One watch, until it ends normally (returned) or fails (raised)."""
        timeout = int(self.settings.min_watch_timeout * (1.0 + self._rng.random()))
        started = self.clock.monotonic()
        delivered = 0
        self.stats.watches += 1
        # Errors opening the watch (refused, 5xx, a timeout before any response) propagate.
        async with self.source.watch(
            resource_version=self.last_resource_version, timeout_seconds=timeout
        ) as events:
            while True:
                event = await _next_event(events)
                if isinstance(event, WatchEnd):
                    end = event
                    break
                delivered += 1
                if event.type == "BOOKMARK":
                    self.stats.bookmarks += 1
                    self._handle_rv(event.object)
                    continue
                if event.type == "ERROR":
                    raise ApiError.from_status(500, event.object)
                if event.type not in ("ADDED", "MODIFIED", "DELETED"):
                    raise ApiError(500, "BadWatchEvent", f"unknown watch event type {event.type!r}")
                self.stats.events += 1
                await self.sink.apply(event.type, event.object)
                # Only after the sink has it, so a failed apply is seen again on re-watch.
                self._handle_rv(event.object)
        lasted = self.clock.monotonic() - started
        if not delivered and lasted < self.settings.short_watch:
            raise ShortWatchError(f"watch ended ({end.value}) after {lasted:.3f}s with no events")
        return end

    def _handle_rv(self, obj: Mapping[str, Any]) -> None:
        if obj.get("kind") == "Status":
            return
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.last_resource_version = str(rv)


async def _next_event(events: AsyncIterator[WatchEvent]) -> WatchEvent | WatchEnd:
    """The next event, or how the stream ended if that was not an error (see ListWatchSource)."""
    try:
        return await anext(events)
    except StopAsyncIteration:
        return WatchEnd.CLOSED
    except TimeoutError:
        return WatchEnd.READ_TIMEOUT
    except ConnectionError:
        return WatchEnd.CONNECTION_LOST
