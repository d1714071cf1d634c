"""Watches that outlive their server timeout keep working (shared cluster, no faults)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kube_runtime import CONFIGMAPS, KubeClient, ReflectorSettings, RestListWatch, SharedInformer


async def eventually(predicate: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"within {within}s: {what}")
        await asyncio.sleep(0.1)


async def test_an_idle_watch_outlives_its_server_timeout_and_still_sees_changes(
    private_cluster: Any, private_namespace: str, clients: Callable[..., Awaitable[KubeClient]]
) -> None:
    client = await clients(private_cluster.kubeconfig)
    # The server ends each watch after 2..4 s; nothing changes meanwhile.
    informer: SharedInformer[Any] = SharedInformer(
        RestListWatch(client, CONFIGMAPS, namespace=private_namespace, read_timeout=30),
        reflector_settings=ReflectorSettings(min_watch_timeout=2),
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(informer.run(stop))
    try:
        assert await informer.wait_for_sync(30)
        stats = informer.reflector.stats
        await eventually(lambda: stats.watches >= 4, 30, "three server-side watch timeouts")
        await client.create(
            CONFIGMAPS, {"metadata": {"name": "after-idle", "namespace": private_namespace}}
        )
        await eventually(
            lambda: informer.get_raw(f"{private_namespace}/after-idle") is not None,
            10,
            "the object created after the idle period reaches the cache",
        )
        assert stats.lists == 1, "timeouts re-watch from the last version, they do not relist"
        assert stats.errors == 0, stats.last_error
    finally:
        stop.set()
        await task
