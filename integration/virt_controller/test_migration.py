"""A migration of a running VMI gets a target launcher pod on another node, up to Scheduled."""

from __future__ import annotations

from typing import Any

from kube_runtime import PODS, VIRTUAL_MACHINE_INSTANCES, KubeClient
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_MIGRATIONS as MIGRATIONS


async def test_target_pod_avoids_the_source_node(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    vmi_body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "mover", "namespace": namespace},
        "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}},
    }
    await client.create(VIRTUAL_MACHINE_INSTANCES, vmi_body)

    async def scheduled() -> Any:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "mover", namespace)
        return vmi if vmi and (vmi.get("status") or {}).get("phase") == "Scheduled" else None

    vmi = await kv.eventually(scheduled, what="VMI Scheduled")
    source = vmi["status"]["nodeName"]
    # What virt-handler reports once the guest runs.
    await client.merge_patch(
        VIRTUAL_MACHINE_INSTANCES, "mover", {"status": {"phase": "Running"}}, namespace
    )
    migration = await client.create(
        MIGRATIONS,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": "move-1", "namespace": namespace},
            "spec": {"vmiName": "mover"},
        },
    )

    async def migration_scheduled() -> Any:
        mig = await client.get(MIGRATIONS, "move-1", namespace)
        status = mig.get("status") or {}
        return status if status.get("phase") == "Scheduled" else None

    status = await kv.eventually(migration_scheduled, what="VMIM Scheduled")
    state = status["migrationState"]
    assert state["sourceNode"] == source
    assert state["targetNode"] != source
    assert state["targetNode"] in kv.node_names
    phases = [p["phase"] for p in status["phaseTransitionTimestamps"]]
    assert phases[-1] == "Scheduled"
    target = await client.get(PODS, state["targetPod"], namespace)
    assert (
        target["metadata"]["labels"]["kubevirt.io/migrationJobUID"] == migration["metadata"]["uid"]
    )
    assert target["metadata"]["ownerReferences"][0]["uid"] == vmi["metadata"]["uid"]
    anti = target["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert anti[0]["labelSelector"]["matchLabels"] == {
        "kubevirt.io/created-by": vmi["metadata"]["uid"]
    }
    # The VMI keeps its own pod; both are active.
    current = await client.get(VIRTUAL_MACHINE_INSTANCES, "mover", namespace)
    assert current["status"]["phase"] == "Running"
    assert len(await kv.launcher_pods(client, namespace)) == 2
