"""The list/watch seam a reflector reads from, and its REST implementation."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from ..client import KubeClient
from ..errors import ApiError
from ..resources import Resource

__all__ = ["ListPage", "ListWatchSource", "RestListWatch", "WatchEvent"]


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list; `continue_token` is empty on the last page."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (then `object` is a metav1.Status)."""

    type: str
    object: dict[str, Any]


class ListWatchSource(Protocol):
    """Where a reflector lists and watches one resource (a fake in unit tests)."""

    async def list_page(self, *, limit: int, continue_token: str) -> ListPage:
        """One page; an empty continue token starts a consistent (quorum) list."""
        ...

    def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[WatchEvent]]:
        """A watch from `resource_version`; raises ApiError (ResourceExpired on 410).

        Once open, its events end (StopAsyncIteration) when the server closes the stream.
        The iterator raises TimeoutError when nothing arrived for the client's read
        timeout, and ConnectionError when the connection dropped mid-stream; the reflector
        takes these three as normal ends and re-watches at once. Anything else is an error.
        """
        ...


class RestListWatch:
    """List/watch any resource over REST, with selectors and client-side read timeouts."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        read_timeout: float = 90.0,
        list_timeout: float = 60.0,
    ) -> None:
        if read_timeout <= 0:
            raise ValueError("read_timeout must be > 0")
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.read_timeout = read_timeout
        self.list_timeout = list_timeout

    async def list_page(self, *, limit: int, continue_token: str) -> ListPage:
        body = await self.client.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=limit,
            continue_token=continue_token or None,
            request_timeout=self.list_timeout,
        )
        if not isinstance(body, dict):
            raise ApiError(500, "BadList", "list response is not an object")
        meta = body.get("metadata") or {}
        items = body.get("items") or []
        # List items carry no apiVersion/kind; typed decoders want them.
        for item in items:
            item.setdefault("apiVersion", self.resource.api_version)
            item.setdefault("kind", self.resource.kind)
        return ListPage(
            items=items,
            resource_version=str(meta.get("resourceVersion") or ""),
            continue_token=str(meta.get("continue") or ""),
        )

    @contextlib.asynccontextmanager
    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        if self.field_selector:
            query.append(("fieldSelector", self.field_selector))
        async with self.client.stream(
            self.resource.path(self.namespace),
            query=query,
            read_timeout=self.read_timeout,
            # The server ends the watch at timeoutSeconds; past that plus a margin, it is stuck.
            total_timeout=timeout_seconds + self.read_timeout,
            resource=self.resource.plural,
        ) as lines:
            yield _events(lines)


async def _events(lines: AsyncIterator[dict[str, Any]]) -> AsyncIterator[WatchEvent]:
    try:
        async for line in lines:
            obj = line.get("object")
            yield WatchEvent(str(line.get("type") or ""), obj if isinstance(obj, dict) else {})
    except TimeoutError:
        raise  # aiohttp's read timeout is already one (SocketTimeoutError)
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
        # A body cut short or a server gone mid-stream: the seam's "connection lost".
        raise ConnectionResetError(f"watch stream lost: {type(exc).__name__}: {exc}") from exc
