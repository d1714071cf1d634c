"""The KubeVirt CR's configuration, read through a short-lived cache."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

import aiohttp
import structlog
from kube_runtime import ApiError, KubeClient
from kubevirt_api import ClusterConfig
from kubevirt_api.resources import KUBEVIRTS

__all__ = ["ClusterConfigSource"]

log = structlog.get_logger("virt_api.clusterconfig")


class ClusterConfigSource:
    """Feature gates etc. from the KubeVirt CR, re-read at most every `ttl` seconds.

    A changed gate takes effect within `ttl`; an unreadable CR keeps the last good answer.
    `on_read` sees each configuration read from the API server (e.g. to follow its log
    verbosity).
    """

    def __init__(
        self,
        api: KubeClient,
        ttl: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        namespace: str = "kubevirt",
        on_read: Callable[[ClusterConfig], object] | None = None,
    ) -> None:
        self._api = api
        self._on_read = on_read
        self._namespace = namespace
        self._ttl = ttl
        self._clock = clock
        self._value = ClusterConfig()
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> ClusterConfig:
        """The current configuration."""
        now = self._clock()
        if self._read_at is not None and now - self._read_at < self._ttl:
            return self._value
        async with self._lock:
            if self._read_at is not None and self._clock() - self._read_at < self._ttl:
                return self._value
            try:
                listing = await self._api.list(KUBEVIRTS)
            except (TimeoutError, ApiError, OSError, aiohttp.ClientError) as error:
                log.warning(
                    "cannot read the KubeVirt CR; keeping the last configuration", error=str(error)
                )
                self._read_at = self._clock()
                return self._value
            items = listing.get("items") if isinstance(listing, Mapping) else None
            crs = (
                [i for i in items or [] if isinstance(i, Mapping)]
                if isinstance(items, list)
                else []
            )
            # As upstream: the CR in virt-api's own namespace rules; else the first one.
            own = [c for c in crs if (c.get("metadata") or {}).get("namespace") == self._namespace]
            chosen = (own or crs)[0] if (own or crs) else None
            self._value = ClusterConfig.from_kubevirt(chosen)
            self._read_at = self._clock()
            if self._on_read is not None:
                self._on_read(self._value)
            return self._value
