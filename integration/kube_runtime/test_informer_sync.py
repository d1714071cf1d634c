"""An informer over 1000 ConfigMaps on the real API server: paginated sync, then changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kube_runtime import (
    CONFIGMAPS,
    Event,
    KubeClient,
    ReflectorSettings,
    RestListWatch,
    SharedInformer,
)

LABEL = "kube-runtime.test/informer=1"


async def eventually(predicate: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"within {within}s: {what}")
        await asyncio.sleep(0.2)


async def server_view(client: KubeClient, namespace: str) -> dict[str, str]:
    """name -> resourceVersion of every labelled ConfigMap, as the server lists them now."""
    view: dict[str, str] = {}
    token = None
    while True:
        page = await client.list(
            CONFIGMAPS, namespace, label_selector=LABEL, limit=500, continue_token=token
        )
        for item in page["items"]:
            view[item["metadata"]["name"]] = item["metadata"]["resourceVersion"]
        token = page["metadata"].get("continue")
        if not token:
            return view


def cm(namespace: str, name: str, value: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kube-runtime.test/informer": "1"},
        },
        "data": {"v": value},
    }


async def bounded(calls: list[Awaitable[Any]], limit: int = 32) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[Any]) -> None:
        async with gate:
            await call

    await asyncio.gather(*(one(c) for c in calls))


async def test_informer_over_1000_objects_syncs_paginated_then_follows_changes(
    private_cluster: Any, private_namespace: str, clients: Callable[..., Awaitable[KubeClient]]
) -> None:
    namespace = private_namespace
    writer = await clients(private_cluster.kubeconfig, qps=500, burst=500)
    await bounded(
        [writer.create(CONFIGMAPS, cm(namespace, f"cm-{i:04}", "0")) for i in range(1000)]
    )
    # Something the selector must keep out of the cache.
    await writer.create(CONFIGMAPS, {"metadata": {"name": "unlabelled", "namespace": namespace}})

    reader = await clients(private_cluster.kubeconfig)
    source = RestListWatch(reader, CONFIGMAPS, namespace=namespace, label_selector=LABEL)
    pages: list[int] = []
    original = source.list_page

    async def counting_list_page(*, limit: int, continue_token: str) -> Any:
        page = await original(limit=limit, continue_token=continue_token)
        pages.append(len(page.items))
        return page

    source.list_page = counting_list_page  # type: ignore[method-assign]
    informer: SharedInformer[Any] = SharedInformer(
        source, name="cm", reflector_settings=ReflectorSettings(page_size=100)
    )
    handler_view: dict[str, str] = {}
    deletes: list[str] = []

    def track(event: Event[Any]) -> None:
        name = event.raw["metadata"]["name"]
        if event.type.value == "DELETED":
            handler_view.pop(name, None)
            deletes.append(name)
        else:
            handler_view[name] = event.raw["metadata"]["resourceVersion"]

    informer.add_handler(track)
    stop = asyncio.Event()
    task = asyncio.ensure_future(informer.run(stop))
    try:
        assert await informer.wait_for_sync(60)
        # Paginated; with a selector the server may end with an empty page.
        assert pages[:10] == [100] * 10, pages
        assert sum(pages) == 1000
        assert len(informer.store) == 1000
        assert "unlabelled" not in handler_view

        await bounded(
            [writer.create(CONFIGMAPS, cm(namespace, f"new-{i:03}", "0")) for i in range(100)]
            + [
                writer.merge_patch(CONFIGMAPS, f"cm-{i:04}", {"data": {"v": "1"}}, namespace)
                for i in range(0, 200, 2)
            ]
            + [writer.delete(CONFIGMAPS, f"cm-{i:04}", namespace) for i in range(900, 1000)]
        )

        async def converged() -> bool:
            server = await server_view(writer, namespace)
            cache = {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in informer.store.objects()
            }
            return cache == server == handler_view

        await eventually(converged, 60, "cache and handler view equal the server's list")
        assert len(informer.store) == 1000
        assert sorted(deletes) == [f"cm-{i:04}" for i in range(900, 1000)]
        assert informer.get_raw(f"{namespace}/cm-0002")["data"]["v"] == "1"  # type: ignore[index]
        assert informer.reflector.stats.lists == 1
    finally:
        stop.set()
        await task
