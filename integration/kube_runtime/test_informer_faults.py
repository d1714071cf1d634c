"""Faults on a private control plane: apiserver restart, forced 410, and a frozen apiserver."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from kube_runtime import (
    CONFIGMAPS,
    Event,
    KubeClient,
    ListPage,
    ReflectorSettings,
    RestListWatch,
    SharedInformer,
    WatchEvent,
)


async def eventually(predicate: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"within {within}s: {what}")
        await asyncio.sleep(0.2)


class Gate:
    """Wraps a source so a test can hold the informer off the server for a while."""

    def __init__(self, inner: RestListWatch) -> None:
        self.inner = inner
        self.open = asyncio.Event()
        self.open.set()
        self.watch_versions: list[str] = []

    async def list_page(self, *, limit: int, continue_token: str) -> ListPage:
        await self.open.wait()
        return await self.inner.list_page(limit=limit, continue_token=continue_token)

    @contextlib.asynccontextmanager
    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        await self.open.wait()
        self.watch_versions.append(resource_version)
        async with self.inner.watch(
            resource_version=resource_version, timeout_seconds=timeout_seconds
        ) as events:
            yield events


class View:
    """What handlers saw: name -> resourceVersion, plus every delete."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.deleted: list[tuple[str, bool]] = []

    def __call__(self, event: Event[Any]) -> None:
        name = event.raw["metadata"]["name"]
        if event.type.value == "DELETED":
            self.objects.pop(name, None)
            self.deleted.append((name, event.tombstone))
        else:
            self.objects[name] = event.raw["metadata"]["resourceVersion"]


async def server_view(client: KubeClient, namespace: str) -> dict[str, str]:
    page = await client.list(CONFIGMAPS, namespace)
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in page["items"]}


async def seed(client: KubeClient, namespace: str, count: int) -> None:
    await asyncio.gather(
        *(
            client.create(
                CONFIGMAPS,
                {"metadata": {"name": f"cm-{i:03}", "namespace": namespace}},
            )
            for i in range(count)
        )
    )


async def test_apiserver_restart_then_410_relists_and_converges_without_loss_or_phantom(
    private_cluster: Any, private_namespace: str, clients: Callable[..., Awaitable[KubeClient]]
) -> None:
    ns = private_namespace
    writer = await clients(private_cluster.kubeconfig, qps=200, burst=200)
    await seed(writer, ns, 60)
    reader = await clients(private_cluster.kubeconfig)
    gate = Gate(RestListWatch(reader, CONFIGMAPS, namespace=ns, read_timeout=10))
    informer: SharedInformer[Any] = SharedInformer(
        gate, reflector_settings=ReflectorSettings(page_size=25, backoff_cap=2)
    )
    view = View()
    informer.add_handler(view)
    stop = asyncio.Event()
    task = asyncio.ensure_future(informer.run(stop))

    async def converged() -> bool:
        server = await server_view(writer, ns)
        cache = {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"]
            for o in informer.store.objects()
        }
        return server == cache == view.objects

    try:
        assert await informer.wait_for_sync(30)

        # 1. Restart kube-apiserver under a live watch; writes resume once it is back.
        await asyncio.to_thread(private_cluster.restart_apiserver)
        await writer.create(CONFIGMAPS, {"metadata": {"name": "after-restart", "namespace": ns}})
        await writer.delete(CONFIGMAPS, "cm-000", ns)
        await eventually(converged, 60, "the informer converges after an apiserver restart")
        assert informer.reflector.stats.errors >= 1 or informer.reflector.stats.watches >= 2

        # 2. Force a 410: keep the informer away while objects change, compact etcd and
        # restart the apiserver (its watch cache starts anew), then let it resume from its
        # now-ancient resourceVersion.
        gate.open.clear()
        # Step 1 may itself have ended in a relist (the restarted apiserver's watch cache
        # can answer 410), so count only the deletes this step makes the informer see.
        deleted_before = len(view.deleted)
        await asyncio.to_thread(private_cluster.restart_apiserver)
        stale = informer.reflector.last_resource_version
        await asyncio.gather(
            *(writer.delete(CONFIGMAPS, f"cm-{i:03}", ns) for i in range(1, 11)),
            *(
                writer.merge_patch(CONFIGMAPS, f"cm-{i:03}", {"data": {"v": "2"}}, ns)
                for i in range(11, 21)
            ),
            *(
                writer.create(CONFIGMAPS, {"metadata": {"name": f"late-{i}", "namespace": ns}})
                for i in range(10)
            ),
        )
        await asyncio.to_thread(private_cluster.compact_etcd)
        expired_before = informer.reflector.stats.relists_on_expired
        gate.open.set()
        await eventually(converged, 60, "the informer relists after 410 and converges")
        assert stale in gate.watch_versions, "it resumed from the old resourceVersion"
        assert informer.reflector.stats.relists_on_expired > expired_before
        tombstoned = sorted(name for name, tomb in view.deleted[deleted_before:] if tomb)
        assert tombstoned == [f"cm-{i:03}" for i in range(1, 11)], "deletes seen on relist"
        assert informer.get_raw(f"{ns}/cm-015")["data"]["v"] == "2"  # type: ignore[index]
    finally:
        gate.open.set()
        stop.set()
        await task


async def test_a_frozen_apiserver_is_detected_by_the_read_timeout_and_recovered(
    private_cluster: Any, private_namespace: str, clients: Callable[..., Awaitable[KubeClient]]
) -> None:
    ns = private_namespace
    client = await clients(private_cluster.kubeconfig, request_timeout=5, connect_timeout=2)
    informer: SharedInformer[Any] = SharedInformer(
        RestListWatch(client, CONFIGMAPS, namespace=ns, read_timeout=2, list_timeout=5),
        reflector_settings=ReflectorSettings(min_watch_timeout=300, backoff_cap=2),
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(informer.run(stop))
    stats = informer.reflector.stats
    pid = private_cluster.apiserver_pid()
    try:
        assert await informer.wait_for_sync(30)
        errors_before = stats.errors
        os.kill(pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:

            async def detected() -> bool:
                return stats.errors > errors_before

            await eventually(detected, 15, "the stalled watch is noticed")
            noticed_after = time.monotonic() - frozen_at
        finally:
            os.kill(pid, signal.SIGCONT)
        print(f"frozen apiserver noticed after {noticed_after:.2f}s ({stats.last_error})")
        assert "Timeout" in stats.last_error, stats.last_error
        # Silence alone is an idle end (re-watch at once); the re-watch to the frozen server
        # then times out (no response within the read timeout, or no TLS handshake within
        # the connect timeout), and that is the error.
        bound = 2 + 2 + 1.5  # the idle end, the re-watch's own timeout, slack
        assert noticed_after < bound, f"timeouts 2s + 2s, noticed after {noticed_after:.1f}s"

        await client.create(CONFIGMAPS, {"metadata": {"name": "after-thaw", "namespace": ns}})

        async def recovered() -> bool:
            return informer.get_raw(f"{ns}/after-thaw") is not None

        await eventually(recovered, 30, "the informer sees changes after the apiserver thaws")
    finally:
        stop.set()
        await task
