"""EventRecorder on the real API server: events appear, repeats aggregate into a count."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kube_runtime import CONFIGMAPS, EVENTS, EventRecorder, KubeClient


async def test_events_are_recorded_and_repeats_bump_the_count(
    private_cluster: Any, private_namespace: str, clients: Callable[..., Awaitable[KubeClient]]
) -> None:
    client = await clients(private_cluster.kubeconfig)
    obj = await client.create(
        CONFIGMAPS, {"metadata": {"name": "subject", "namespace": private_namespace}}
    )
    recorder = EventRecorder(client, "virt-controller")
    for _ in range(3):
        await recorder.event(obj, "Normal", "SuccessfulCreate", "Created launcher pod")
    await recorder.event(obj, "Warning", "SyncFailed", "something broke")
    page = await client.list(EVENTS, private_namespace)
    events = {(e["reason"], e["type"]): e for e in page["items"]}
    created = events[("SuccessfulCreate", "Normal")]
    assert created["count"] == 3
    assert created["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert created["source"]["component"] == "virt-controller"
    assert events[("SyncFailed", "Warning")]["count"] == 1
    assert len(page["items"]) == 2
