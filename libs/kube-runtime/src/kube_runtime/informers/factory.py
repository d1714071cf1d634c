"""One informer per (resource, namespace, selectors), shared by every controller asking."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from ..client import KubeClient
from ..clock import Clock
from ..resources import Resource
from .informer import SharedInformer, Transform
from .listwatch import RestListWatch
from .reflector import ReflectorSettings
from .store import IndexFunc, RawObject

__all__ = ["InformerFactory"]

_Key = tuple[Resource, str | None, str | None, str | None]


class InformerFactory:
    """Hands out shared informers (client-go's SharedInformerFactory) and runs them all."""

    def __init__(
        self,
        client: KubeClient,
        *,
        read_timeout: float = 90.0,
        reflector_settings: ReflectorSettings | None = None,
        transform: Transform | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.read_timeout = read_timeout
        self.reflector_settings = reflector_settings
        self.transform = transform
        self.clock = clock
        self._informers: dict[_Key, SharedInformer[Any]] = {}
        self._running: dict[_Key, asyncio.Task[None]] = {}
        self._stop: asyncio.Event | None = None

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        decode: Callable[[RawObject], Any] | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> SharedInformer[Any]:
        """The informer for this watch; created on first request, then shared.

        Indexers asked for by later callers are added to the shared cache. A `decode`
        only applies when the informer is created (pass the same one everywhere).
        """
        key = (resource, namespace, label_selector, field_selector)
        informer = self._informers.get(key)
        if informer is None:
            source = RestListWatch(
                self.client,
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                read_timeout=self.read_timeout,
            )
            kwargs: dict[str, Any] = {}
            if decode is not None:
                kwargs["decode"] = decode
            informer = SharedInformer(
                source,
                name=f"{resource.plural}/{namespace or '*'}",
                reflector_settings=self.reflector_settings,
                transform=self.transform,
                clock=self.clock,
                **kwargs,
            )
            self._informers[key] = informer
            if self._stop is not None:
                self._running[key] = asyncio.ensure_future(informer.run(self._stop))
        for name, fn in (indexers or {}).items():
            if name not in informer.store.index_names():
                informer.store.add_index(name, fn)
        return informer

    def start(self, stop: asyncio.Event) -> None:
        """Run every informer (and any created later) until `stop` is set."""
        self._stop = stop
        for key, informer in self._informers.items():
            if key not in self._running:
                self._running[key] = asyncio.ensure_future(informer.run(stop))

    async def wait_for_sync(self, wait_seconds: float | None = None) -> bool:
        """True once every informer created so far has synced."""
        results = await asyncio.gather(
            *(i.wait_for_sync(wait_seconds) for i in self._informers.values())
        )
        return all(results)

    async def join(self) -> None:
        """Wait for every running informer to finish (after `stop` is set)."""
        await asyncio.gather(*self._running.values())
