"""An informer over an idle resource stays live: a silent watch is not an error.

The KubeVirt CR is one of the quiet resources of issue #12 (with VMIRS and VMIM): nothing
changes for minutes and the API server sends no bookmark (its watch cache has seen no
event of that kind), so each watch goes silent until the client's read timeout. That end
must re-watch at once, not back off. (No webhook judges KubeVirt CRs, so the test can
create one without a running VMI, which a VMIM would need.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from kube_runtime import (
    Event,
    KubeClient,
    ReflectorSettings,
    RestListWatch,
    SharedInformer,
    WatchEnd,
)
from kubevirt_api.resources import KUBEVIRTS

READ_TIMEOUT = 2.0  # shorter than the server's timeout: every idle watch ends by it
SERVER_TIMEOUT = 3  # the reflector asks for 3..5 s


async def eventually(predicate: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"within {within}s: {what}")
        await asyncio.sleep(0.05)


async def test_an_idle_informer_rewatches_without_back_off_and_sees_a_new_object_at_once(
    private_cluster: Any,
    private_crds: list[str],
    private_namespace: str,
    clients: Callable[..., Awaitable[KubeClient]],
) -> None:
    assert any(n.endswith("/kubevirts.kubevirt.io") for n in private_crds)
    ns = private_namespace
    client = await clients(private_cluster.kubeconfig)
    informer: SharedInformer[Any] = SharedInformer(
        RestListWatch(client, KUBEVIRTS, namespace=ns, read_timeout=READ_TIMEOUT),
        name="kubevirt",
        reflector_settings=ReflectorSettings(min_watch_timeout=SERVER_TIMEOUT),
    )
    arrived = asyncio.Event()
    arrived_at = 0.0

    def on_event(event: Event[Any]) -> None:
        nonlocal arrived_at
        if event.type.value == "ADDED" and event.raw["metadata"]["name"] == "after-idle":
            arrived_at = time.monotonic()
            arrived.set()

    informer.add_handler(on_event)
    stats = informer.reflector.stats
    stop = asyncio.Event()
    with structlog.testing.capture_logs() as logs:
        task = asyncio.ensure_future(informer.run(stop))
        try:
            assert await informer.wait_for_sync(30)
            synced_at = time.monotonic()
            # Idle for at least 3x the read timeout: three watches end in silence, each
            # followed by a re-watch at once (with back-off these alone would take > 10 s).
            await eventually(
                lambda: sum(stats.ends.values()) >= 3,
                3 * READ_TIMEOUT + 3,
                "three idle watch ends, each re-watched at once",
            )
            idle_for = time.monotonic() - synced_at

            created_at = time.monotonic()
            await client.create(
                KUBEVIRTS,
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "KubeVirt",
                    "metadata": {"name": "after-idle", "namespace": ns},
                    "spec": {},
                },
            )
            left = 1.0 - (time.monotonic() - created_at)
            try:
                await asyncio.wait_for(arrived.wait(), max(left, 0.0))
            except TimeoutError:
                raise AssertionError(
                    f"the new KubeVirt CR did not reach the handler within 1 s (stats: {stats})"
                ) from None
        finally:
            stop.set()
            await task
    latency = arrived_at - created_at
    mine = [e for e in logs if e.get("reflector") == "kubevirt"]
    print(
        f"idle {idle_for:.1f}s: {dict(stats.ends)}, {stats.watches} watches; "
        f"new object seen {latency * 1000:.0f} ms after its create request"
    )
    assert stats.ends[WatchEnd.READ_TIMEOUT] >= 1, "the read timeout fired on a silent watch"
    assert stats.errors == 0, stats.last_error
    assert stats.lists == 1, "idle ends re-watch from the last version, they do not relist"
    assert not [e for e in mine if e["log_level"] not in ("debug", "info")], mine
    assert all(e["log_level"] == "debug" for e in mine if e["event"] == "watch ended, re-watching")
