"""A VirtualMachineInstanceReplicaSet scales 0 -> 5 -> 2 through its scale subresource."""

from __future__ import annotations

from typing import Any

from kube_runtime import VIRTUAL_MACHINE_INSTANCES, KubeClient
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_REPLICASETS as SETS


def set_body(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"set": name}},
            "template": {
                "metadata": {"labels": {"set": name}},
                "spec": {
                    "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }


async def test_scale_zero_to_five_to_two(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(SETS, set_body("web", namespace, 0))

    async def status_is(replicas: int) -> Any:
        rs = await client.get(SETS, "web", namespace)
        status = rs.get("status") or {}
        return status if status.get("replicas") == replicas else None

    status = await kv.eventually(lambda: status_is(0), what="status.replicas 0")
    assert status["labelSelector"] == "set=web"

    async def scale_to(n: int) -> None:
        await client.merge_patch(
            SETS, "web", {"spec": {"replicas": n}}, namespace, subresource="scale"
        )

    async def vmis() -> list[dict[str, Any]]:
        body = await client.list(VIRTUAL_MACHINE_INSTANCES, namespace, label_selector="set=web")
        return [v for v in body["items"] if not v["metadata"].get("deletionTimestamp")]

    async def settled(n: int) -> Any:
        live = await vmis()
        scheduled = [v for v in live if (v.get("status") or {}).get("phase") == "Scheduled"]
        pods = await kv.launcher_pods(client, namespace)
        status = await status_is(n)
        if len(live) == n and len(scheduled) == n and len(pods) == n and status:
            return live
        return None

    await scale_to(5)
    live = await kv.eventually(lambda: settled(5), what="5 Scheduled VMIs with 5 pods")
    for vmi in live:
        owner = vmi["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("VirtualMachineInstanceReplicaSet", "web")
    scale = await client.get(SETS, "web", namespace)
    assert scale["spec"]["replicas"] == 5
    await scale_to(2)
    await kv.eventually(lambda: settled(2), what="2 VMIs left with 2 pods")
    scale_view = await client.request("GET", SETS.path(namespace, "web", "scale"))
    assert scale_view["spec"]["replicas"] == 2
    assert scale_view["status"]["replicas"] == 2
    assert scale_view["status"]["selector"] == "set=web"
