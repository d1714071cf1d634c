"""Kubernetes Events about objects (`kubectl describe` shows them), best effort.

Repeats of the same event on the same object within a window bump `count` and
`lastTimestamp` with a merge patch instead of creating a new Event, like client-go's
correlator does.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from .client import KubeClient
from .clock import Clock, SystemClock
from .errors import ApiError
from .resources import EVENTS

__all__ = ["EventRecorder", "EventType"]

log = structlog.get_logger(__name__)

EventType = Literal["Normal", "Warning"]


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    last: float


class EventRecorder:
    """Records core/v1 Events for one component (e.g. virt-controller)."""

    def __init__(
        self,
        client: KubeClient,
        component: str,
        *,
        host: str | None = None,
        clock: Clock | None = None,
        window: float = 600.0,
        max_tracked: int = 4096,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.clock = clock or SystemClock()
        self.window = window
        self.max_tracked = max_tracked
        self._seen: dict[tuple[str, str, str, str], _Seen] = {}

    async def event(
        self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str
    ) -> None:
        """Record an event about `obj` (a raw object); failures are logged, never raised."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        uid = str(meta.get("uid") or "")
        key = (uid or str(meta.get("name")), type_, reason, message)
        now = self.clock.monotonic()
        stamp = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            seen = self._seen.get(key)
            if seen is not None and now - seen.last < self.window:
                seen.count += 1
                seen.last = now
                patch = {"count": seen.count, "lastTimestamp": stamp}
                await self.client.merge_patch(EVENTS, seen.name, patch, seen.namespace)
                return
            name = f"{meta.get('name', 'object')}.{secrets.token_hex(8)}"
            body: dict[str, Any] = {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": meta.get("name"),
                    "namespace": meta.get("namespace"),
                    "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "type": type_,
                "reason": reason,
                "message": message,
                "source": {
                    "component": self.component,
                    **({"host": self.host} if self.host else {}),
                },
                "reportingComponent": self.component,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            }
            await self.client.create(EVENTS, body, namespace)
            if len(self._seen) >= self.max_tracked:
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = _Seen(name, namespace, 1, now)
        except (ApiError, OSError, TimeoutError) as exc:
            if isinstance(exc, ApiError) and exc.not_found:
                self._seen.pop(key, None)  # the Event expired: the next one creates anew
            log.warning("event not recorded", reason=reason, error=str(exc))
