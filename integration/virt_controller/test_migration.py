"""Live migration's control-plane side on a real control plane, playing the others' parts:
the kubelet (the target pod runs) and virt-handler (the VMI's migrationState fields the
handlers own). The migration walks Pending -> ... -> Succeeded, is cancelled before and
after hand-off, times out while its target pod stays Pending, and records the matched
MigrationPolicy at hand-off."""

from __future__ import annotations

import contextlib
from typing import Any

from kube_runtime import PODS, VIRTUAL_MACHINE_INSTANCES, ApiError, KubeClient, Resource
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_MIGRATIONS as MIGRATIONS

POLICIES = Resource(
    "migrations.kubevirt.io", "v1alpha1", "migrationpolicies", "MigrationPolicy", namespaced=False
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
STAMP = "2026-01-01T12:00:00Z"


async def running_vmi(
    client: KubeClient, namespace: str, kv: Any, name: str, **spec: Any
) -> dict[str, Any]:
    """A VMI whose launcher pod is bound, reported Running as virt-handler would."""
    await client.create(
        VIRTUAL_MACHINE_INSTANCES,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": namespace, "labels": {"workload": "db"}},
            "spec": {
                "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                **spec,
            },
        },
    )

    async def scheduled() -> Any:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, name, namespace)
        return vmi if vmi and (vmi.get("status") or {}).get("phase") == "Scheduled" else None

    await kv.eventually(scheduled, what=f"VMI {name} Scheduled")
    migratable = {"type": "LiveMigratable", "status": "True"}
    await client.merge_patch(
        VIRTUAL_MACHINE_INSTANCES,
        name,
        {"status": {"phase": "Running", "conditions": [migratable]}},
        namespace,
    )
    return dict(await client.get(VIRTUAL_MACHINE_INSTANCES, name, namespace))


async def create_migration(
    client: KubeClient, namespace: str, name: str, vmi: str, **annotations: str
) -> dict[str, Any]:
    """A migration as virt-api's mutating webhook leaves it (selector label, finalizer)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"kubevirt.io/vmi-name": vmi},
        "finalizers": ["kubevirt.io/migrationJobFinalize"],
    }
    if annotations:
        metadata["annotations"] = annotations
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": metadata,
        "spec": {"vmiName": vmi},
    }
    return dict(await client.create(MIGRATIONS, body))


async def phase_of(client: KubeClient, namespace: str, name: str, want: str, kv: Any) -> Any:
    async def probe() -> Any:
        mig = await kv.get_or_none(client, MIGRATIONS, name, namespace)
        status = (mig or {}).get("status") or {}
        return mig if status.get("phase") == want else None

    return await kv.eventually(probe, what=f"migration {name} {want}")


async def target_pod(client: KubeClient, namespace: str, mig_uid: str, kv: Any) -> Any:
    async def probe() -> Any:
        for pod in await kv.launcher_pods(client, namespace):
            if pod["metadata"]["labels"].get("kubevirt.io/migrationJobUID") == mig_uid:
                return pod
        return None

    return await kv.eventually(probe, what="the migration's target pod")


async def kubelet_runs(client: KubeClient, pod: dict[str, Any], kv: Any) -> None:
    """What the target node's kubelet reports once the pod's containers run."""
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]

    async def bound() -> Any:
        current = await client.get(PODS, name, namespace)
        return current if current["spec"].get("nodeName") else None

    await kv.eventually(bound, what=f"pod {name} bound")
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "compute",
                "ready": True,
                "restartCount": 0,
                "image": "virt-launcher",
                "imageID": "",
                "state": {"running": {"startedAt": STAMP}},
            }
        ],
    }
    await client.patch_status(PODS, name, status, namespace)


async def handler_reports(
    client: KubeClient, namespace: str, vmi: str, state: dict[str, Any], **status: Any
) -> None:
    """virt-handler's part: the migrationState fields the handlers own (and nodeName)."""
    patch = {"status": {"migrationState": state, **status}}
    await client.merge_patch(VIRTUAL_MACHINE_INSTANCES, vmi, patch, namespace)


async def vmi_state(client: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    vmi = await client.get(VIRTUAL_MACHINE_INSTANCES, name, namespace)
    return dict((vmi.get("status") or {}).get("migrationState") or {})


async def gone(client: KubeClient, resource: Resource, name: str, namespace: str, kv: Any) -> None:
    async def probe() -> bool:
        return await kv.get_or_none(client, resource, name, namespace) is None

    await kv.eventually(probe, what=f"{resource.plural}/{name} gone")


async def walk_to_running(
    client: KubeClient, namespace: str, kv: Any, vmi: str, mig: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Create a migration and play kubelet and handlers up to Running: (migration, target)."""
    migration = await create_migration(client, namespace, mig, vmi)
    target = await target_pod(client, namespace, migration["metadata"]["uid"], kv)
    await kubelet_runs(client, target, kv)
    await phase_of(client, namespace, mig, "PreparingTarget", kv)
    await handler_reports(client, namespace, vmi, {"targetNodeAddress": "10.95.0.24"})
    await phase_of(client, namespace, mig, "TargetReady", kv)
    await handler_reports(client, namespace, vmi, {"startTimestamp": STAMP, "mode": "PreCopy"})
    await phase_of(client, namespace, mig, "Running", kv)
    return migration, target


async def test_target_pod_avoids_the_source_node(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    vmi = await running_vmi(client, namespace, kv, "mover")
    source = vmi["status"]["nodeName"]
    migration = await create_migration(client, namespace, "move-1", "mover")
    mig = await phase_of(client, namespace, "move-1", "Scheduling", kv)
    assert mig["status"]["migrationState"]["sourcePod"]
    target = await target_pod(client, namespace, migration["metadata"]["uid"], kv)
    assert target["metadata"]["ownerReferences"][0]["uid"] == vmi["metadata"]["uid"]
    anti = target["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert anti[0]["labelSelector"]["matchLabels"] == {
        "kubevirt.io/created-by": vmi["metadata"]["uid"]
    }
    await kubelet_runs(client, target, kv)
    await phase_of(client, namespace, "move-1", "PreparingTarget", kv)
    bound = await client.get(PODS, target["metadata"]["name"], namespace)
    assert bound["spec"]["nodeName"] != source
    assert bound["spec"]["nodeName"] in kv.node_names
    # The VMI keeps its own pod; both are active.
    current = await client.get(VIRTUAL_MACHINE_INSTANCES, "mover", namespace)
    assert current["status"]["phase"] == "Running"
    assert current["status"]["nodeName"] == source
    assert len(await kv.launcher_pods(client, namespace)) == 2


async def test_the_phase_walk_to_succeeded_records_the_policy_at_hand_off(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.merge_patch(NAMESPACES, namespace, {"metadata": {"labels": {"team": "dbs"}}})
    policy = f"slow-{namespace}"
    await client.create(
        POLICIES,
        {
            "apiVersion": "migrations.kubevirt.io/v1alpha1",
            "kind": "MigrationPolicy",
            "metadata": {"name": policy},
            "spec": {
                "selectors": {
                    "virtualMachineInstanceSelector": {"workload": "db"},
                    "namespaceSelector": {"team": "dbs"},
                },
                "bandwidthPerMigration": "1Mi",
                "completionTimeoutPerGiB": 5,
            },
        },
    )
    try:
        vmi = await running_vmi(client, namespace, kv, "walker")
        source = vmi["status"]["nodeName"]
        migration, target = await walk_to_running(client, namespace, kv, "walker", "walk")
        uid = migration["metadata"]["uid"]
        handed = await client.get(VIRTUAL_MACHINE_INSTANCES, "walker", namespace)
        state = handed["status"]["migrationState"]
        target_node = state["targetNode"]
        assert state["migrationUid"] == uid
        assert state["sourceNode"] == source
        assert target_node != source
        assert state["targetPod"] == target["metadata"]["name"]
        assert state["sourcePod"]
        assert state["migrationPolicyName"] == policy
        assert state["migrationConfiguration"]["bandwidthPerMigration"] == "1Mi"
        assert state["migrationConfiguration"]["completionTimeoutPerGiB"] == 5
        assert state["migrationConfiguration"]["progressTimeout"] == 150
        assert handed["metadata"]["labels"]["kubevirt.io/migrationTargetNodeName"] == target_node
        # The handlers finish: the guest runs on the target node.
        await handler_reports(
            client,
            namespace,
            "walker",
            {"endTimestamp": STAMP, "completed": True, "targetNodeDomainDetected": True},
            nodeName=target_node,
        )
        done = await phase_of(client, namespace, "walk", "Succeeded", kv)
        phases = [p["phase"] for p in done["status"]["phaseTransitionTimestamps"]]
        assert phases == [
            "Pending",
            "Scheduling",
            "Scheduled",
            "PreparingTarget",
            "TargetReady",
            "Running",
            "Succeeded",
        ]

        async def copied() -> Any:
            mig = await client.get(MIGRATIONS, "walk", namespace)
            final = (mig.get("status") or {}).get("migrationState") or {}
            return mig if final.get("completed") and not mig["metadata"].get("finalizers") else None

        final = (await kv.eventually(copied, what="final state copied, finalizer released"))[
            "status"
        ]["migrationState"]
        assert final["migrationUid"] == uid
        assert final["targetNode"] == target_node
        assert final["migrationPolicyName"] == policy
        # The source pod ends (kubelet); the VMI stays Running, its pod the target one.
        source_pod = state["sourcePod"]
        await client.patch_status(PODS, source_pod, {"phase": "Succeeded"}, namespace)
        current = await client.get(VIRTUAL_MACHINE_INSTANCES, "walker", namespace)
        assert current["status"]["phase"] == "Running"
        assert current["status"]["nodeName"] == target_node
        events = await client.list(
            Resource("", "v1", "events", "Event"),
            namespace,
            field_selector="involvedObject.name=walk",
        )
        reasons = {e["reason"] for e in events["items"]}
        assert {"SuccessfulCreate", "SuccessfulHandOver", "SuccessfulMigration"} <= reasons
    finally:
        with contextlib.suppress(ApiError):
            await client.delete(POLICIES, policy)


async def test_a_cancel_before_hand_off_fails_and_removes_the_target_pod(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await running_vmi(client, namespace, kv, "early")
    migration = await create_migration(client, namespace, "early-cancel", "early")
    target = await target_pod(client, namespace, migration["metadata"]["uid"], kv)
    await phase_of(client, namespace, "early-cancel", "Scheduling", kv)
    await client.delete(MIGRATIONS, "early-cancel", namespace)
    await gone(client, MIGRATIONS, "early-cancel", namespace, kv)
    await gone(client, PODS, target["metadata"]["name"], namespace, kv)
    assert "migrationState" not in (
        await client.get(VIRTUAL_MACHINE_INSTANCES, "early", namespace)
    ).get("status", {})


async def test_a_cancel_after_hand_off_aborts_through_the_handlers(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    vmi = await running_vmi(client, namespace, kv, "late")
    source = vmi["status"]["nodeName"]
    _, target = await walk_to_running(client, namespace, kv, "late", "late-cancel")
    await client.delete(MIGRATIONS, "late-cancel", namespace)

    async def abort_asked() -> Any:
        return (await vmi_state(client, namespace, "late")).get("abortRequested") is True

    await kv.eventually(abort_asked, what="abortRequested on the VMI")

    async def condition_set() -> bool:
        # The finalizer holds the migration; its condition is a write of its own, after
        # the VMI's, and may be retried on a conflict.
        mig = await client.get(MIGRATIONS, "late-cancel", namespace)
        conditions = {c["type"]: c["status"] for c in mig["status"].get("conditions") or ()}
        return conditions.get("migrationAbortRequested") == "True"

    await kv.eventually(condition_set, what="migrationAbortRequested on the migration")
    # The source handler aborted libvirt's job.
    await handler_reports(
        client,
        namespace,
        "late",
        {
            "abortStatus": "Succeeded",
            "failed": True,
            "endTimestamp": STAMP,
            "failureReason": "Live migration has been aborted",
        },
    )
    await gone(client, MIGRATIONS, "late-cancel", namespace, kv)
    await gone(client, PODS, target["metadata"]["name"], namespace, kv)
    current = await client.get(VIRTUAL_MACHINE_INSTANCES, "late", namespace)
    assert current["status"]["phase"] == "Running"
    assert current["status"]["nodeName"] == source


async def test_a_target_pod_pending_past_its_timeout_fails_the_migration(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await running_vmi(client, namespace, kv, "stuck")
    migration = await create_migration(
        client,
        namespace,
        "stuck-1",
        "stuck",
        **{"kubevirt.io/migrationPendingPodTimeoutSeconds": "3"},
    )
    target = await target_pod(client, namespace, migration["metadata"]["uid"], kv)
    failed = await phase_of(client, namespace, "stuck-1", "Failed", kv)
    await gone(client, PODS, target["metadata"]["name"], namespace, kv)
    assert [p["phase"] for p in failed["status"]["phaseTransitionTimestamps"]][-1] == "Failed"
    events = await client.list(
        Resource("", "v1", "events", "Event"),
        namespace,
        field_selector="involvedObject.name=stuck-1",
    )
    messages = {e["message"] for e in events["items"]}
    assert (
        f"pending pod {namespace}/{target['metadata']['name']} timeout period exceeded" in messages
    )


async def test_an_evicted_vmi_is_evacuated_by_a_migration(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    vmi = await running_vmi(client, namespace, kv, "evicted", evictionStrategy="LiveMigrate")
    node = vmi["status"]["nodeName"]
    # What virt-api's eviction webhook does when `kubectl drain` evicts the launcher pod.
    await client.merge_patch(
        VIRTUAL_MACHINE_INSTANCES, "evicted", {"status": {"evacuationNodeName": node}}, namespace
    )

    async def evacuation() -> Any:
        listed = await client.list(MIGRATIONS, namespace)
        return [m for m in listed["items"] if m["spec"]["vmiName"] == "evicted"]

    (mig,) = await kv.eventually(evacuation, what="an evacuation migration")
    assert mig["metadata"]["annotations"] == {"kubevirt.io/evacuationMigration": node}
    assert mig["metadata"]["name"].startswith("kubevirt-evacuation-")
    await phase_of(client, namespace, mig["metadata"]["name"], "Scheduling", kv)
