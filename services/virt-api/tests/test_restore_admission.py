"""A VirtualMachineRestore is refused while another restores the same VM, or from a failed
snapshot; a snapshot that does not exist yet is waited for, not refused (upstream's rules)."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from kubevirt_api.admission import ClusterConfig
from virt_api import AdmissionContext, FrontProxyConfig, SubresourceContext, build_app

RESTORES_PATH = "/apis/snapshot.kubevirt.io/v1beta1/namespaces/ns1/virtualmachinerestores"
SNAPSHOT_PATH = "/apis/snapshot.kubevirt.io/v1beta1/namespaces/ns1/virtualmachinesnapshots/snap"


def review(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r1",
            "kind": {
                "group": "snapshot.kubevirt.io",
                "version": "v1beta1",
                "kind": "VirtualMachineRestore",
            },
            "resource": {
                "group": "snapshot.kubevirt.io",
                "version": "v1beta1",
                "resource": "virtualmachinerestores",
            },
            "operation": "CREATE",
            "namespace": "ns1",
            "object": {
                "apiVersion": "snapshot.kubevirt.io/v1beta1",
                "kind": "VirtualMachineRestore",
                "metadata": {"name": "restore"},
                "spec": {
                    "target": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm"},
                    "virtualMachineSnapshotName": "snap",
                    **spec,
                },
            },
            "userInfo": {"username": "alice"},
        },
    }


async def admit(api: Any, no_handler: Any, body: dict[str, Any]) -> dict[str, Any]:
    async def config() -> ClusterConfig:
        return ClusterConfig()

    app = build_app(
        AdmissionContext(cluster_config=config, api=api.client),
        SubresourceContext(api.client, FrontProxyConfig(), no_handler),
    )
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/virtualmachinerestores-validate", json=body)
        answer: dict[str, Any] = (await response.json())["response"]
        return answer


def other(name: str, target: str, complete: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"target": {"name": target}},
        "status": {"complete": complete},
    }


async def test_a_restore_for_a_snapshot_not_yet_made_is_admitted(
    fake_api: Any, no_handler: Any
) -> None:
    fake_api.objects[RESTORES_PATH] = {"items": []}
    assert (await admit(fake_api, no_handler, review()))["allowed"] is True


async def test_a_second_restore_of_the_same_vm_is_refused(fake_api: Any, no_handler: Any) -> None:
    fake_api.objects[RESTORES_PATH] = {
        "items": [
            other("done", "vm", True),
            other("elsewhere", "other-vm", False),
            other("busy", "vm", False),
        ]
    }
    fake_api.objects[SNAPSHOT_PATH] = {"status": {"phase": "Succeeded"}}
    answer = await admit(fake_api, no_handler, review())
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["field"] == "spec.target"
    assert 'VirtualMachineRestore "busy" in progress for VM vm' in answer["status"]["message"]


async def test_a_failed_snapshot_cannot_be_restored(fake_api: Any, no_handler: Any) -> None:
    fake_api.objects[RESTORES_PATH] = {"items": []}
    fake_api.objects[SNAPSHOT_PATH] = {"status": {"phase": "Failed"}}
    answer = await admit(fake_api, no_handler, review())
    assert answer["allowed"] is False
    assert "has failed" in answer["status"]["message"]


async def test_the_offline_rules_come_first(fake_api: Any, no_handler: Any) -> None:
    answer = await admit(fake_api, no_handler, review(targetReadinessPolicy="Later"))
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["field"] == "spec.targetReadinessPolicy"
    assert not [c for c in fake_api.calls if c[1] == RESTORES_PATH]
