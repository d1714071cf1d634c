"""The shared informer: one reflector, one cache, many event handlers.

Handlers get `Event`s holding the raw (frozen) object; `event.obj` decodes it on demand
through the informer's decode callable (e.g. a kubevirt_api model's constructor).
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import structlog

from ..clock import Clock, SystemClock, sleep_or_stop
from .listwatch import ListWatchSource
from .reflector import Reflector, ReflectorSettings
from .store import Delta, DeltaType, IndexFunc, ObjectKey, RawObject, Store, key_of

__all__ = ["Event", "Handler", "SharedInformer", "Transform", "drop_managed_fields"]

log = structlog.get_logger(__name__)

T = TypeVar("T")


def _identity(raw: RawObject) -> Any:
    return raw


@dataclass(eq=False)
class Event(Generic[T]):
    """One change seen by the informer. DELETED events carry the last known state;
    `tombstone` is True when the delete was inferred on relist rather than watched."""

    type: DeltaType
    key: ObjectKey
    raw: RawObject
    old_raw: RawObject | None
    tombstone: bool
    decode: Callable[[RawObject], T] = field(repr=False)
    _obj: Any = field(default=None, repr=False)

    @property
    def obj(self) -> T:
        """The typed object, decoded on first use."""
        if self._obj is None:
            self._obj = self.decode(self.raw)
        result: T = self._obj
        return result

    @property
    def old(self) -> T | None:
        return None if self.old_raw is None else self.decode(self.old_raw)


Handler = Callable[[Event[T]], Awaitable[None] | None]
Transform = Callable[[dict[str, Any]], dict[str, Any]]


def drop_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A transform that drops metadata.managedFields (often half an object's memory)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class SharedInformer(Generic[T]):
    """Cache plus fan-out for one resource; run it once, share it among controllers."""

    def __init__(
        self,
        source: ListWatchSource,
        *,
        decode: Callable[[RawObject], T] = _identity,
        name: str = "informer",
        indexers: Mapping[str, IndexFunc] | None = None,
        resync_period: float | None = None,
        reflector_settings: ReflectorSettings | None = None,
        transform: Transform | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`transform` edits each object (a fresh dict) before it is cached, e.g.
        `drop_managed_fields`; `decode` turns cached raw objects into typed ones on demand."""
        self.name = name
        self.transform = transform
        self.decode = decode
        self.clock = clock or SystemClock()
        self.store = Store(indexers)
        self.resync_period = resync_period
        self.reflector = Reflector(
            source, self, name=name, settings=reflector_settings, clock=self.clock, rng=rng
        )
        self._handlers: list[Handler[T]] = []
        # Decoded objects, reused while the cached raw object is the very same one.
        self._typed: dict[ObjectKey, tuple[RawObject, T]] = {}
        self._synced = asyncio.Event()
        self._pending: set[asyncio.Task[None]] = set()
        # Held while handlers are being called, and across a whole relist.
        self._dispatching = asyncio.Lock()

    # -- handlers ---------------------------------------------------------------------------

    def add_handler(self, handler: Handler[T]) -> None:
        """Register a handler. Once the cache has synced, a new handler first sees every
        cached object as ADDED, then the changes after that point, in order (it joins
        between two deliveries, never in the middle of a relist)."""
        if not self._synced.is_set() and not self._dispatching.locked():
            self._handlers.append(handler)
            return
        task = asyncio.get_running_loop().create_task(self._join(handler))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _join(self, handler: Handler[T]) -> None:
        async with self._dispatching:
            if self._synced.is_set():
                replay = [self._event(Delta(DeltaType.ADDED, k, o)) for k, o in self._items()]
                await self._deliver(handler, replay)
            self._handlers.append(handler)

    def _items(self) -> list[tuple[ObjectKey, RawObject]]:
        return [(k, o) for k in self.store if (o := self.store.get(k)) is not None]

    # -- reading the cache --------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_for_sync(self, wait_seconds: float | None = None) -> bool:
        """True once the first list reached the cache (and its handlers); False on timeout."""
        try:
            async with asyncio.timeout(wait_seconds):
                await self._synced.wait()
        except TimeoutError:
            return False
        return True

    def get(self, key: str) -> T | None:
        raw = self.store.get(key)
        return None if raw is None else self._decoded(raw)

    def get_raw(self, key: str) -> RawObject | None:
        return self.store.get(key)

    def objects(self) -> list[T]:
        return [self._decoded(o) for o in self.store.objects()]

    def by_index(self, index: str, value: str) -> list[T]:
        return [self._decoded(o) for o in self.store.by_index(index, value)]

    def _decoded(self, raw: RawObject) -> T:
        """Decode once per cached object version (a VMI takes about a millisecond)."""
        if self.decode is _identity:
            return self.decode(raw)
        key = key_of(raw)
        hit = self._typed.get(key)
        if hit is not None and hit[0] is raw:
            return hit[1]
        value = self.decode(raw)
        if self.store.get(key) is raw:
            self._typed[key] = (raw, value)
        return value

    # -- running ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run the reflector (and the periodic resync) until `stop` is set."""
        tasks = [asyncio.ensure_future(self.reflector.run(stop))]
        if self.resync_period:
            tasks.append(asyncio.ensure_future(self._resync_loop(stop, self.resync_period)))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _resync_loop(self, stop: asyncio.Event, period: float) -> None:
        while not await sleep_or_stop(self.clock, period, stop):
            if not self.has_synced:
                continue
            for key, obj in self._items():
                await self._dispatch(Delta(DeltaType.SYNC, key, obj, obj))

    # -- ReflectorSink ------------------------------------------------------------------------

    async def replace(self, items: list[dict[str, Any]], resource_version: str) -> None:
        if self.transform is not None:
            items = [self.transform(item) for item in items]
        async with self._dispatching:
            for delta in self.store.replace(items):
                if delta.type is DeltaType.DELETED:
                    self._typed.pop(delta.key, None)
                await self._deliver_all(delta)
            self._synced.set()

    async def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        if self.transform is not None:
            obj = self.transform(obj)
        if event_type == "DELETED":
            delta = self.store.delete(obj)
            self._typed.pop(delta.key, None)
            if delta.old is None:
                return  # never seen (deleted before our list): nothing to tell handlers
        else:
            delta = self.store.upsert(obj)
        await self._dispatch(delta)

    # -- dispatch -----------------------------------------------------------------------------

    def _event(self, delta: Delta) -> Event[T]:
        return Event(delta.type, delta.key, delta.obj, delta.old, delta.tombstone, self._decoded)

    async def _dispatch(self, delta: Delta) -> None:
        async with self._dispatching:
            await self._deliver_all(delta)

    async def _deliver_all(self, delta: Delta) -> None:
        event = self._event(delta)
        for handler in list(self._handlers):
            await self._deliver(handler, [event])

    async def _deliver(self, handler: Handler[T], events: list[Event[T]]) -> None:
        for event in events:
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                # A broken handler must not stop the cache or the other handlers.
                log.exception("informer handler failed", informer=self.name, key=event.key)
