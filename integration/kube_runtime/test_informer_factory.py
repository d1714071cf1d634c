"""InformerFactory: two controllers asking for the same watch share one informer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kube_runtime import CONFIGMAPS, InformerFactory, KubeClient


async def test_one_shared_informer_feeds_both_subscribers_and_their_indexes(
    private_cluster: Any, private_namespace: str, clients: Callable[..., Awaitable[KubeClient]]
) -> None:
    client = await clients(private_cluster.kubeconfig)
    factory = InformerFactory(client)
    first = factory.informer(CONFIGMAPS, namespace=private_namespace)
    second = factory.informer(
        CONFIGMAPS,
        namespace=private_namespace,
        indexers={"team": lambda o: [(o["metadata"].get("labels") or {}).get("team", "")]},
    )
    assert first is second
    other = factory.informer(CONFIGMAPS, namespace=private_namespace, label_selector="team=b")
    assert other is not first

    seen_a: list[str] = []
    seen_b: list[str] = []
    first.add_handler(lambda e: seen_a.append(e.key))
    second.add_handler(lambda e: seen_b.append(e.key))
    stop = asyncio.Event()
    factory.start(stop)
    try:
        assert await factory.wait_for_sync(30)
        await client.create(
            CONFIGMAPS,
            {
                "metadata": {
                    "name": "shared",
                    "namespace": private_namespace,
                    "labels": {"team": "b"},
                }
            },
        )
        key = f"{private_namespace}/shared"
        deadline = time.monotonic() + 20
        while not (key in seen_a and key in seen_b and other.get_raw(key) is not None):
            assert time.monotonic() < deadline, "both subscribers see the new object"
            await asyncio.sleep(0.1)
        assert [o["metadata"]["name"] for o in first.store.by_index("team", "b")] == ["shared"]
        assert first.reflector.stats.lists == 1, "one list for both subscribers"
    finally:
        stop.set()
        await factory.join()


async def test_many_open_watches_on_one_client_do_not_starve_requests(
    private_cluster: Any, private_namespace: str, clients: Callable[..., Awaitable[KubeClient]]
) -> None:
    # Each watch pins a connection; kubernetes_asyncio's default pool (5 x CPUs) would
    # leave no connection for this list once 20 watches are open.
    client = await clients(private_cluster.kubeconfig)
    factory = InformerFactory(client)
    informers = [
        factory.informer(CONFIGMAPS, namespace=private_namespace, label_selector=f"shard={i}")
        for i in range(20)
    ]
    stop = asyncio.Event()
    factory.start(stop)
    try:
        assert await factory.wait_for_sync(30)
        deadline = time.monotonic() + 20
        while sum(i.reflector.stats.watches for i in informers) < 20:
            assert time.monotonic() < deadline, "every informer opens its watch"
            await asyncio.sleep(0.1)
        page = await asyncio.wait_for(client.list(CONFIGMAPS, private_namespace), 10)
        assert page["kind"] == "ConfigMapList"
    finally:
        stop.set()
        await factory.join()
