"""What `kubectl describe vm` shows on a real control plane: upstream's Events, conditions
and printableStatus. No kubelet runs here, so the tests play its part in the pod's status
(an image that cannot be pulled, a pod that runs and is Ready)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kube_runtime import EVENTS, PODS, VIRTUAL_MACHINE_INSTANCES, VIRTUAL_MACHINES, KubeClient

STAMP = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def vm_body(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "spec": {
                    "domain": {
                        "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
                        "resources": {"requests": {"memory": "64Mi"}},
                    },
                    "volumes": [
                        {
                            "name": "root",
                            "containerDisk": {"image": "registry:5000/no/such-image:v0"},
                        }
                    ],
                    "terminationGracePeriodSeconds": 0,
                }
            },
        },
    }


async def _events_of(client: KubeClient, namespace: str, kind: str, name: str) -> set[Any]:
    body = await client.list(EVENTS, namespace)
    return {
        (e["type"], e["reason"], e["message"])
        for e in body.get("items") or ()
        if e["involvedObject"].get("kind") == kind and e["involvedObject"].get("name") == name
    }


async def _launcher_pod(client: KubeClient, namespace: str, kv: Any) -> dict[str, Any]:
    async def bound() -> Any:
        pods = await kv.launcher_pods(client, namespace)
        return pods[0] if pods and pods[0]["spec"].get("nodeName") else None

    pod: dict[str, Any] = await kv.eventually(bound, what="the launcher pod bound")
    return pod


def _pulling(reason: str, message: str) -> dict[str, Any]:
    waiting = {"waiting": {"reason": reason, "message": message}}
    return {
        "phase": "Pending",
        "initContainerStatuses": [
            {
                "name": "volumeroot-init",
                "ready": False,
                "restartCount": 0,
                "image": "registry:5000/no/such-image:v0",
                "imageID": "",
                "state": waiting,
            }
        ],
    }


async def test_an_image_that_cannot_be_pulled_shows_on_the_vm_with_upstreams_events(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("nopull", namespace))
    pod = await _launcher_pod(client, namespace, kv)
    name = pod["metadata"]["name"]
    message = 'failed to pull "registry:5000/no/such-image:v0": not found'
    await client.patch_status(PODS, name, _pulling("ErrImagePull", message), namespace)

    async def printable(value: str) -> Any:
        vm = await client.get(VIRTUAL_MACHINES, "nopull", namespace)
        status = vm.get("status") or {}
        return status if status.get("printableStatus") == value else None

    status = await kv.eventually(lambda: printable("ErrImagePull"), what="VM ErrImagePull")
    conditions = {c["type"]: c for c in status["conditions"]}
    synced = conditions["Synchronized"]
    assert (synced["status"], synced["reason"], synced["message"]) == (
        "False",
        "ErrImagePull",
        message,
    )
    ready = conditions["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "GuestNotRunning")

    # The kubelet backs off: so does the VM's status.
    backoff = 'Back-off pulling image "registry:5000/no/such-image:v0"'
    await client.patch_status(PODS, name, _pulling("ImagePullBackOff", backoff), namespace)
    await kv.eventually(lambda: printable("ImagePullBackOff"), what="VM ImagePullBackOff")

    vmi = await client.get(VIRTUAL_MACHINE_INSTANCES, "nopull", namespace)
    (synced,) = [c for c in vmi["status"]["conditions"] if c["type"] == "Synchronized"]
    assert synced["reason"] == "ImagePullBackOff"

    async def events() -> Any:
        vm_events = await _events_of(client, namespace, "VirtualMachine", "nopull")
        vmi_events = await _events_of(client, namespace, "VirtualMachineInstance", "nopull")
        started = (
            "Normal",
            "SuccessfulCreate",
            "Started the virtual machine by creating the new virtual machine instance nopull",
        )
        created = ("Normal", "SuccessfulCreate", f"Created virtual machine pod {name}")
        return started in vm_events and created in vmi_events

    await kv.eventually(events, what="SuccessfulCreate events on the VM and the VMI")


async def test_a_stopped_vm_records_the_deletions_and_ready_says_the_vmi_is_gone(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("stopme", namespace))
    pod = await _launcher_pod(client, namespace, kv)
    vmi = await client.get(VIRTUAL_MACHINE_INSTANCES, "stopme", namespace)
    vmi_uid = vmi["metadata"]["uid"]
    await client.merge_patch(
        VIRTUAL_MACHINES, "stopme", {"spec": {"runStrategy": "Halted"}}, namespace
    )

    async def stopped() -> Any:
        vm = await client.get(VIRTUAL_MACHINES, "stopme", namespace)
        status = vm.get("status") or {}
        ready = [c for c in status.get("conditions") or () if c["type"] == "Ready"]
        if status.get("printableStatus") == "Stopped" and ready:
            return ready[0]
        return None

    ready = await kv.eventually(stopped, what="VM Stopped")
    assert (ready["status"], ready["reason"]) == ("False", "VMINotExists")

    async def events() -> Any:
        vm_events = await _events_of(client, namespace, "VirtualMachine", "stopme")
        vmi_events = await _events_of(client, namespace, "VirtualMachineInstance", "stopme")
        stopped = (
            "Normal",
            "SuccessfulDelete",
            f"Stopped the virtual machine by deleting the virtual machine instance {vmi_uid}",
        )
        deleted = (
            "Normal",
            "SuccessfulDelete",
            f"Deleted virtual machine pod {pod['metadata']['name']}",
        )
        return stopped in vm_events and deleted in vmi_events

    await kv.eventually(events, what="SuccessfulDelete events on the VM and the VMI")
