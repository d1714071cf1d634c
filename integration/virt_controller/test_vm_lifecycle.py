"""A VM's VMI and launcher pod follow its run strategy on the real control plane."""

from __future__ import annotations

from typing import Any

from kube_runtime import PODS, VIRTUAL_MACHINE_INSTANCES, VIRTUAL_MACHINES, KubeClient


def vm_body(name: str, namespace: str, run_strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runStrategy": run_strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "domain": {
                        "devices": {},
                        "resources": {"requests": {"memory": "128Mi"}},
                    },
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }


async def _vmi_phase(client: KubeClient, namespace: str, name: str, kv: Any) -> str:
    vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, name, namespace)
    return str(((vmi or {}).get("status") or {}).get("phase") or "")


async def test_always_schedules_then_stop_removes_vmi_and_pod(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("vm1", namespace, "Always"))

    async def scheduled() -> Any:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "vm1", namespace)
        if vmi and vmi.get("status", {}).get("phase") == "Scheduled":
            return vmi
        return None

    vmi = await kv.eventually(scheduled, what="VMI Scheduled")
    node = vmi["status"]["nodeName"]
    assert node in kv.node_names
    assert vmi["metadata"]["labels"]["kubevirt.io/nodeName"] == node
    owner = vmi["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["controller"]) == ("VirtualMachine", True)
    pods = await kv.launcher_pods(client, namespace)
    assert len(pods) == 1
    pod = pods[0]
    assert pod["spec"]["nodeName"] == node
    assert pod["metadata"]["ownerReferences"][0]["uid"] == vmi["metadata"]["uid"]
    assert pod["metadata"]["labels"]["kubevirt.io/created-by"] == vmi["metadata"]["uid"]
    assert vmi["status"]["activePods"] == {pod["metadata"]["uid"]: node}
    # The readiness gate follows the kubelet's admission of the pod (played here).
    name = pod["metadata"]["name"]
    admitted = {"status": {"phase": "Pending", "startTime": "2026-12-06T00:00:00Z"}}
    await client.merge_patch(PODS, name, admitted, namespace, subresource="status")

    async def gate() -> Any:
        current = await client.get(PODS, name, namespace)
        conditions = current["status"].get("conditions") or ()
        unpaused = "kubevirt.io/virtual-machine-unpaused"
        return [c["status"] for c in conditions if c["type"] == unpaused] or None

    assert await kv.eventually(gate, what="the readiness gate") == ["True"]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits["devices.kubevirt.io/kvm"] == "1"
    phases = [p["phase"] for p in vmi["status"]["phaseTransitionTimestamps"]]
    assert phases == ["Pending", "Scheduling", "Scheduled"]

    async def vm_status(field: str, value: Any) -> Any:
        vm = await client.get(VIRTUAL_MACHINES, "vm1", namespace)
        status = vm.get("status") or {}
        return status if status.get(field) == value else None

    status = await kv.eventually(lambda: vm_status("printableStatus", "Starting"))
    assert status["created"] is True

    await client.merge_patch(
        VIRTUAL_MACHINES, "vm1", {"spec": {"runStrategy": "Halted"}}, namespace
    )

    async def all_gone() -> bool:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "vm1", namespace)
        return vmi is None and not await kv.launcher_pods(client, namespace)

    await kv.eventually(all_gone, what="VMI and launcher pod deleted")
    status = await kv.eventually(lambda: vm_status("printableStatus", "Stopped"))
    assert status["created"] is False


async def test_pod_with_launcher_labels_but_no_owner_is_ignored(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("vm2", namespace, "Always"))

    async def vmi_uid() -> str:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "vm2", namespace)
        return str(((vmi or {}).get("metadata") or {}).get("uid") or "")

    uid = await kv.eventually(vmi_uid, what="VMI created")
    await kv.eventually(
        lambda: _is(client, namespace, "vm2", "Scheduled", kv), what="VMI Scheduled"
    )
    impostor = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "impostor",
            "namespace": namespace,
            "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": uid},
        },
        "spec": {"containers": [{"name": "c", "image": "none"}], "nodeName": "elsewhere"},
    }
    await client.create(PODS, impostor)
    # The VMI's own pod is deleted: a controller matching by labels would adopt the impostor.
    pods = [
        p for p in await kv.launcher_pods(client, namespace) if p["metadata"]["name"] != "impostor"
    ]
    await client.delete(PODS, pods[0]["metadata"]["name"], namespace)
    await kv.eventually(lambda: _is(client, namespace, "vm2", "Failed", kv, or_gone=True))
    vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "vm2", namespace)
    assert vmi is None or vmi["metadata"]["uid"] != uid or vmi["status"]["nodeName"] != "elsewhere"
    pod = await client.get(PODS, "impostor", namespace)
    assert pod["metadata"].get("deletionTimestamp") is None, (
        "the controller touched a pod it does not own"
    )


async def _is(
    client: KubeClient, namespace: str, name: str, phase: str, kv: Any, or_gone: bool = False
) -> bool:
    vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, name, namespace)
    if vmi is None:
        return or_gone
    return bool((vmi.get("status") or {}).get("phase") == phase)


async def test_deleting_the_vm_removes_vmi_and_pod(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("doomed", namespace, "Always"))
    await kv.eventually(
        lambda: _is(client, namespace, "doomed", "Scheduled", kv), what="VMI Scheduled"
    )
    await client.delete(VIRTUAL_MACHINES, "doomed", namespace, propagation="Foreground")

    async def all_gone() -> bool:
        vm = await kv.get_or_none(client, VIRTUAL_MACHINES, "doomed", namespace)
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "doomed", namespace)
        return vm is None and vmi is None and not await kv.launcher_pods(client, namespace)

    await kv.eventually(all_gone, what="VM, VMI and pod deleted")


async def test_failed_pod_fails_the_vmi(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(
        VIRTUAL_MACHINE_INSTANCES,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "fragile", "namespace": namespace},
            "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}},
        },
    )
    await kv.eventually(
        lambda: _is(client, namespace, "fragile", "Scheduled", kv), what="VMI Scheduled"
    )
    (pod,) = await kv.launcher_pods(client, namespace)
    # What the kubelet reports when the compute container dies.
    await client.merge_patch(
        PODS,
        pod["metadata"]["name"],
        {"status": {"phase": "Failed"}},
        namespace,
        subresource="status",
    )
    await kv.eventually(lambda: _is(client, namespace, "fragile", "Failed", kv), what="VMI Failed")
    vmi = await client.get(VIRTUAL_MACHINE_INSTANCES, "fragile", namespace)
    assert vmi["status"]["reason"] == "PodFailed"
    assert vmi["status"]["phaseTransitionTimestamps"][-1]["phase"] == "Failed"
