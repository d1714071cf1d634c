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
