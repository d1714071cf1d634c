"""In-memory stand-ins for the API server, for unit tests of code built on kube_runtime.

`FakeListWatch` is one resource's list/watch endpoint with real resourceVersion, paging,
compaction (410) and stream-ending behaviour; `FakeLeaseApi` is one Lease with
optimistic concurrency; `FakeApiServer` is the client a controller writes through, its
writes landing in the controller's own informer caches. Integration tests use the real control plane instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from .errors import ApiError, ResourceExpiredError
from .informers import DeltaType, Event, SharedInformer
from .informers.listwatch import ListPage, WatchEvent
from .informers.store import ObjectKey, RawObject, key_of, thaw
from .leader import LeaseRecord

__all__ = ["FakeApiServer", "FakeLeaseApi", "FakeListWatch"]

_END = WatchEvent("__END__", {})
_READ_TIMEOUT = WatchEvent("__READ_TIMEOUT__", {})
_CONNECTION_LOST = WatchEvent("__CONNECTION_LOST__", {})


class FakeListWatch:
    """A ListWatchSource over an in-memory object set with a resourceVersion log."""

    def __init__(self, kind: str = "ConfigMap", api_version: str = "v1") -> None:
        self.kind = kind
        self.api_version = api_version
        self.objects: dict[ObjectKey, dict[str, Any]] = {}
        self.rv = 1
        self.log: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted_rv = 0
        self._snapshots: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._streams: list[asyncio.Queue[WatchEvent]] = []
        self.fail_lists: list[Exception] = []
        self.fail_watches: list[Exception] = []
        self.list_calls = 0
        self.watch_calls: list[str] = []

    # -- mutations (what another client would do) --------------------------------------------

    def _bump(self, event_type: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", self.api_version)
        obj.setdefault("kind", self.kind)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.log.append((self.rv, event_type, obj))
        for stream in self._streams:
            stream.put_nowait(WatchEvent(event_type, copy.deepcopy(obj)))
        return obj

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace a whole object (any kind of body); returns it as stored."""
        key = key_of(obj)
        event = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = self._bump(event, obj)
        return self.objects[key]

    def create(self, name: str, namespace: str = "default", **data: Any) -> dict[str, Any]:
        obj = {"metadata": {"name": name, "namespace": namespace}, "data": data}
        key = key_of(obj)
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f"{key} exists")
        self.objects[key] = self._bump("ADDED", obj)
        return self.objects[key]

    def update(self, name: str, namespace: str = "default", **data: Any) -> dict[str, Any]:
        key = ObjectKey(f"{namespace}/{name}" if namespace else name)
        obj = copy.deepcopy(self.objects[key])
        obj["data"] = data
        self.objects[key] = self._bump("MODIFIED", obj)
        return self.objects[key]

    def delete(self, name: str, namespace: str = "default") -> None:
        key = ObjectKey(f"{namespace}/{name}" if namespace else name)
        obj = self.objects.pop(key)
        self._bump("DELETED", obj)

    def compact(self) -> None:
        """Forget history up to now: watches and continue tokens from before get 410."""
        self.compacted_rv = self.rv

    def bookmark(self) -> None:
        for stream in self._streams:
            stream.put_nowait(
                WatchEvent(
                    "BOOKMARK",
                    {"kind": self.kind, "metadata": {"resourceVersion": str(self.rv)}},
                )
            )

    def error_event(self, code: int, reason: str = "") -> None:
        for stream in self._streams:
            stream.put_nowait(
                WatchEvent("ERROR", {"kind": "Status", "code": code, "reason": reason})
            )

    def end_streams(self) -> None:
        """Close every open watch cleanly (like the server's timeoutSeconds)."""
        for stream in self._streams:
            stream.put_nowait(_END)

    def time_out_streams(self) -> None:
        """End every open watch as the client's read timeout would (TimeoutError)."""
        for stream in self._streams:
            stream.put_nowait(_READ_TIMEOUT)

    def drop_streams(self) -> None:
        """Cut every open watch mid-stream, as a dropped connection would (ConnectionError)."""
        for stream in self._streams:
            stream.put_nowait(_CONNECTION_LOST)

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    # -- ListWatchSource ------------------------------------------------------------------------

    async def list_page(self, *, limit: int, continue_token: str) -> ListPage:
        await asyncio.sleep(0)
        self.list_calls += 1
        if self.fail_lists:
            raise self.fail_lists.pop(0)
        if continue_token:
            if continue_token not in self._snapshots:
                raise ApiError(400, "BadRequest", "unknown continue token")
            list_rv, items = self._snapshots.pop(continue_token)
            if list_rv < self.compacted_rv:
                raise ResourceExpiredError(410, "Expired", "continue token expired")
        else:
            list_rv = self.rv
            items = [copy.deepcopy(o) for _, o in sorted(self.objects.items())]
        page, rest = items[:limit], items[limit:]
        token = ""
        if rest:
            token = f"c{len(self._snapshots)}-{list_rv}-{len(rest)}"
            self._snapshots[token] = (list_rv, rest)
        # Like the real server: list items carry no kind/apiVersion.
        for item in page:
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return ListPage(page, str(list_rv), token)

    @contextlib.asynccontextmanager
    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        await asyncio.sleep(0)
        self.watch_calls.append(resource_version)
        if self.fail_watches:
            raise self.fail_watches.pop(0)
        since = int(resource_version or "0")
        if since < self.compacted_rv:
            raise ResourceExpiredError(410, "Expired", f"too old resource version: {since}")
        stream: asyncio.Queue[WatchEvent] = asyncio.Queue()
        for rv, event_type, obj in self.log:
            if rv > since:
                stream.put_nowait(WatchEvent(event_type, copy.deepcopy(obj)))
        self._streams.append(stream)
        try:
            yield _drain(stream)
        finally:
            self._streams.remove(stream)


async def _drain(stream: asyncio.Queue[WatchEvent]) -> AsyncIterator[WatchEvent]:
    while True:
        event = await stream.get()
        if event is _END:
            return
        if event is _READ_TIMEOUT:
            raise TimeoutError("no data for the read timeout")
        if event is _CONNECTION_LOST:
            raise ConnectionResetError("watch stream lost")
        yield event


class FakeLeaseApi:
    """One Lease with resourceVersion checks; set `down` to make every call fail."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self._rv = 0
        self.down = False
        self.hang = asyncio.Event()  # set: calls block (a frozen API server)
        self.writes = 0

    async def _check(self) -> None:
        if self.hang.is_set():
            await asyncio.Event().wait()
        if self.down:
            raise ConnectionError("lease API unreachable")

    async def get(self) -> LeaseRecord | None:
        await asyncio.sleep(0)
        await self._check()
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        await asyncio.sleep(0)
        await self._check()
        if self.record is not None:
            raise ApiError(409, "AlreadyExists", "lease exists")
        return self._store(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        await asyncio.sleep(0)
        await self._check()
        if self.record is None:
            raise ApiError(404, "NotFound", "lease does not exist")
        if record.resource_version != self.record.resource_version:
            raise ApiError(409, "Conflict", "the object has been modified")
        return self._store(record)

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self._rv += 1
        self.writes += 1
        self.record = replace(record, resource_version=str(self._rv))
        return self.record


class FakeApiServer:
    """The API server for a controller's unit tests: what the controller writes lands in the
    informers' caches (by plural), as a watch would show it, and fires `handlers[plural]`.
    Finalizers hold deleted objects, as the API server does; a failing JSON patch `test` is a
    422. `writes` lists (verb, plural, name) in order; `fail_creates` names a plural whose
    creations fail with a 500."""

    def __init__(self, caches: dict[str, SharedInformer[RawObject]]) -> None:
        self.caches = caches
        self.handlers: dict[str, Callable[[Event[RawObject]], None]] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.fail_creates: str | None = None
        self._ids = itertools.count(1)
        self._seconds = itertools.count()

    # -- the store ---------------------------------------------------------------------

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        cache = self.caches[plural]
        old = cache.get_raw(f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}")
        m = obj["metadata"]
        m.setdefault("uid", f"uid-{next(self._ids)}")
        m.setdefault("generation", 1)
        m.setdefault("creationTimestamp", f"2026-01-01T00:00:{next(self._seconds):02d}Z")
        m["resourceVersion"] = str(next(self._ids))
        delta = cache.store.upsert(copy.deepcopy(obj))
        kind = DeltaType.ADDED if old is None else DeltaType.UPDATED
        self._fire(plural, Event(kind, delta.key, delta.obj, old, False, cache.decode))
        return obj

    def obj(self, plural: str, name: str, namespace: str = "ns") -> Any:
        """What the store holds (None when absent)."""
        raw = self.caches[plural].get_raw(f"{namespace}/{name}")
        return thaw(raw) if raw is not None else None

    def _thawed(self, plural: str, name: str, namespace: str) -> dict[str, Any]:
        obj = self.obj(plural, name, namespace)
        if obj is None:
            raise ApiError(404, "NotFound", f"{name} not found")
        found: dict[str, Any] = obj
        return found

    def _remove(self, plural: str, obj: dict[str, Any]) -> None:
        cache = self.caches[plural]
        delta = cache.store.delete(obj)
        self._fire(
            plural, Event(DeltaType.DELETED, delta.key, delta.obj, None, False, cache.decode)
        )

    def _fire(self, plural: str, event: Event[RawObject]) -> None:
        if plural in self.handlers:
            self.handlers[plural](event)

    # -- the client the controller sees ----------------------------------------------------

    async def get(self, resource: Any, name: str, namespace: str) -> Any:
        return self._thawed(resource.plural, name, namespace)

    async def create(self, resource: Any, body: dict[str, Any], namespace: Any = None) -> Any:
        name = body["metadata"]["name"]
        self.writes.append(("create", resource.plural, name))
        if self.fail_creates == resource.plural:
            raise ApiError(500, "InternalError", "etcd is on holiday")
        if self.obj(resource.plural, name, body["metadata"]["namespace"]) is not None:
            raise ApiError(409, "AlreadyExists", f"{name} exists")
        return self.put(resource.plural, copy.deepcopy(body))

    async def delete(self, resource: Any, name: str, namespace: str, **kw: Any) -> Any:
        self.writes.append(("delete", resource.plural, name))
        obj = self._thawed(resource.plural, name, namespace)
        if kw.get("uid") and kw["uid"] != obj["metadata"]["uid"]:
            raise ApiError(409, "Conflict", "uid precondition")
        if obj["metadata"].get("finalizers"):
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"
            self.put(resource.plural, obj)
        else:
            self._remove(resource.plural, obj)
        return {}

    async def json_patch(
        self, resource: Any, name: str, ops: Any, namespace: str, **kw: Any
    ) -> Any:
        self.writes.append(("patch", resource.plural, name))
        obj = self._thawed(resource.plural, name, namespace)
        for op in ops:
            tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")]
            *parents, last = tokens[1:]
            target = obj
            for part in parents:
                target = target.setdefault(part, {})
            if op["op"] == "test":
                if target.get(last) != op["value"]:
                    raise ApiError(422, "Invalid", f"test of {op['path']} failed")
            elif op["op"] == "remove":
                del target[last]
            else:
                target[last] = copy.deepcopy(op["value"])
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            self._remove(resource.plural, obj)
        else:
            self.put(resource.plural, obj)
        return obj

    async def merge_patch(
        self, resource: Any, name: str, patch: Any, namespace: str, **kw: Any
    ) -> Any:
        self.writes.append(("merge", resource.plural, name))
        obj = self._thawed(resource.plural, name, namespace)

        def merge(target: dict[str, Any], change: Any) -> None:
            for k, v in change.items():
                if v is None:
                    target.pop(k, None)
                elif isinstance(v, dict) and isinstance(target.get(k), dict):
                    merge(target[k], v)
                else:
                    target[k] = copy.deepcopy(v)

        merge(obj, patch)
        return self.put(resource.plural, obj)

    async def patch_status(
        self, resource: Any, name: str, status: Any, namespace: str, **kw: Any
    ) -> Any:
        self.writes.append(("status", resource.plural, name))
        obj = self._thawed(resource.plural, name, namespace)
        obj.setdefault("status", {}).update(copy.deepcopy(status))
        return self.put(resource.plural, obj)
