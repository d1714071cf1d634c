"""VMIs on a node whose virt-handler heartbeat went stale are failed (NodeUnresponsive)."""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
from typing import Any

from kube_runtime import NODES, VIRTUAL_MACHINE_INSTANCES, ApiError, KubeClient


def _stamp(age: dt.timedelta) -> str:
    return (dt.datetime.now(dt.UTC) - age).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_stale_heartbeat_fails_the_nodes_vmis(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    stale_node = f"kvc-stale-{secrets.token_hex(3)}"
    try:
        await _run(client, namespace, kv, stale_node)
    finally:
        with contextlib.suppress(ApiError):
            await client.delete(NODES, stale_node)


async def _run(client: KubeClient, namespace: str, kv: Any, stale: str) -> None:
    await kv.add_fake_node(client, stale, **{"kubevirt.io/heartbeat": _stamp(dt.timedelta())})
    await client.create(
        VIRTUAL_MACHINE_INSTANCES,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "stranded", "namespace": namespace},
            "spec": {
                "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                "nodeSelector": {"kubernetes.io/hostname": stale},
            },
        },
    )

    async def phase_is(phase: str) -> Any:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "stranded", namespace)
        return vmi if vmi and (vmi.get("status") or {}).get("phase") == phase else None

    vmi = await kv.eventually(lambda: phase_is("Scheduled"), what="VMI Scheduled on the node")
    assert vmi["status"]["nodeName"] == stale
    # virt-handler stopped beating an hour ago (the controller runs with a 30 s timeout).
    await client.merge_patch(
        NODES,
        stale,
        {"metadata": {"annotations": {"kubevirt.io/heartbeat": _stamp(dt.timedelta(hours=1))}}},
    )
    failed = await kv.eventually(lambda: phase_is("Failed"), what="VMI Failed")
    assert failed["status"]["reason"] == "NodeUnresponsive"
    node = await client.get(NODES, stale)
    assert node["metadata"]["labels"]["kubevirt.io/schedulable"] == "false"
