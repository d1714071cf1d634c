"""A migration may only be created for a VMI that exists, runs and is not migrating."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from kubevirt_api.admission import ClusterConfig
from virt_api import AdmissionContext, FrontProxyConfig, SubresourceContext, build_app

VMI_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vmi1"


def review() -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "m1",
            "kind": {
                "group": "kubevirt.io",
                "version": "v1",
                "kind": "VirtualMachineInstanceMigration",
            },
            "resource": {
                "group": "kubevirt.io",
                "version": "v1",
                "resource": "virtualmachineinstancemigrations",
            },
            "operation": "CREATE",
            "namespace": "ns1",
            "object": {
                "kind": "VirtualMachineInstanceMigration",
                "metadata": {"generateName": "m-"},
                "spec": {"vmiName": "vmi1"},
            },
            "userInfo": {"username": "alice"},
        },
    }


async def admit(api: Any, no_handler: Any) -> dict[str, Any]:
    async def config() -> ClusterConfig:
        return ClusterConfig()

    app = build_app(
        AdmissionContext(cluster_config=config, api=api.client),
        SubresourceContext(api.client, FrontProxyConfig(), no_handler),
    )
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/migration-validate-create", json=review())
        answer: dict[str, Any] = (await response.json())["response"]
        return answer


async def test_missing_vmi_is_denied(fake_api: Any, no_handler: Any) -> None:
    answer = await admit(fake_api, no_handler)
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["field"] == "spec.vmiName"
    assert "does not exist" in answer["status"]["message"]


async def test_not_running_vmi_is_denied(fake_api: Any, no_handler: Any) -> None:
    fake_api.objects[VMI_PATH] = {"status": {"phase": "Scheduling"}}
    answer = await admit(fake_api, no_handler)
    assert "is Scheduling" in answer["status"]["message"]


async def test_migrating_vmi_is_denied_and_running_one_allowed(
    fake_api: Any, no_handler: Any
) -> None:
    fake_api.objects[VMI_PATH] = {
        "status": {"phase": "Running", "migrationState": {"completed": False, "targetNode": "n2"}}
    }
    assert "already being migrated" in (await admit(fake_api, no_handler))["status"]["message"]
    fake_api.objects[VMI_PATH] = {"status": {"phase": "Running"}}
    assert (await admit(fake_api, no_handler))["allowed"] is True
