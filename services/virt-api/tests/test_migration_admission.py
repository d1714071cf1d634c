"""A migration may only be created for a VMI that exists, is not final, is not
LiveMigratable=False and has no unfinished migration (upstream's rules and messages)."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from kubevirt_api.admission import ClusterConfig
from virt_api import AdmissionContext, FrontProxyConfig, SubresourceContext, build_app

VMI_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vmi1"
MIGRATIONS_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstancemigrations"


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
    assert 'the VMI "ns1/vmi1" does not exist' in answer["status"]["message"]


async def test_final_vmi_is_denied(fake_api: Any, no_handler: Any) -> None:
    fake_api.objects[VMI_PATH] = {"status": {"phase": "Succeeded"}}
    answer = await admit(fake_api, no_handler)
    assert "Cannot migrate VMI in finalized state." in answer["status"]["message"]


async def test_not_live_migratable_vmi_is_denied_with_its_reason(
    fake_api: Any, no_handler: Any
) -> None:
    condition = {
        "type": "LiveMigratable",
        "status": "False",
        "reason": "InterfaceNotLiveMigratable",
        "message": "cannot migrate VMI which does not use masquerade",
    }
    fake_api.objects[VMI_PATH] = {"status": {"phase": "Running", "conditions": [condition]}}
    answer = await admit(fake_api, no_handler)
    assert answer["status"]["message"].endswith(
        "Cannot migrate VMI, Reason: InterfaceNotLiveMigratable, "
        "Message: cannot migrate VMI which does not use masquerade"
    )


async def test_an_in_flight_migration_denies_a_second(fake_api: Any, no_handler: Any) -> None:
    fake_api.objects[VMI_PATH] = {"status": {"phase": "Running"}}
    fake_api.objects[MIGRATIONS_PATH] = {
        "items": [
            {"metadata": {"uid": "old"}, "status": {"phase": "Failed"}},
            {"metadata": {"uid": "busy"}, "status": {"phase": "Running"}},
        ]
    }
    answer = await admit(fake_api, no_handler)
    assert (
        "in-flight migration detected. Active migration job (busy) is currently already in "
        "progress for VMI vmi1."
    ) in answer["status"]["message"]
    lists = [q for m, p, _, q in fake_api.calls if m == "GET" and p == MIGRATIONS_PATH]
    assert lists[0]["labelSelector"] == "kubevirt.io/vmi-name=vmi1"


async def test_a_vmi_with_only_finished_migrations_may_migrate(
    fake_api: Any, no_handler: Any
) -> None:
    fake_api.objects[VMI_PATH] = {"status": {"phase": "Running"}}
    fake_api.objects[MIGRATIONS_PATH] = {"items": [{"status": {"phase": "Succeeded"}}]}
    assert (await admit(fake_api, no_handler))["allowed"] is True
