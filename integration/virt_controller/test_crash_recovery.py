"""kill -9 of virt-controller in the middle of creating launcher pods: the restarted one
converges to exactly one launcher pod per VMI."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kube_runtime import VIRTUAL_MACHINE_INSTANCES, KubeClient
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_REPLICASETS as SETS

REPLICAS = 40


async def test_kill_during_churn_converges_without_duplicates(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceReplicaSet",
        "metadata": {"name": "churn", "namespace": namespace},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"set": "churn"}},
            "template": {
                "metadata": {"labels": {"set": "churn"}},
                "spec": {
                    "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }
    await client.create(SETS, body)

    async def some_pods() -> bool:
        pods = await kv.launcher_pods(client, namespace)
        return len(pods) > 0

    await kv.eventually(some_pods, what="the first launcher pods")
    controller.kill()
    pods_at_kill = len(await kv.launcher_pods(client, namespace))
    # More churn while it is down: the set grows and one VMI goes away.
    await client.merge_patch(SETS, "churn", {"spec": {"replicas": REPLICAS + 5}}, namespace)
    controller.start()

    async def converged() -> Any:
        vmis = (await client.list(VIRTUAL_MACHINE_INSTANCES, namespace))["items"]
        live = [v for v in vmis if not v["metadata"].get("deletionTimestamp")]
        scheduled = [v for v in live if (v.get("status") or {}).get("phase") == "Scheduled"]
        if len(live) != REPLICAS + 5 or len(scheduled) != len(live):
            return None
        return live

    live = await kv.eventually(converged, within=120, what="all VMIs Scheduled after restart")
    pods = await kv.launcher_pods(client, namespace)
    owners = Counter(p["metadata"]["ownerReferences"][0]["uid"] for p in pods)
    assert set(owners) == {v["metadata"]["uid"] for v in live}
    duplicates = {uid: n for uid, n in owners.items() if n > 1}
    assert not duplicates, f"VMIs with more than one launcher pod: {duplicates}"
    assert len(pods) == REPLICAS + 5
    assert pods_at_kill < REPLICAS + 5
