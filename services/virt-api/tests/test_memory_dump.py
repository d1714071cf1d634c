"""memorydump/removememorydump on VMs: the status patch sent, and every refusal's status
and upstream's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_runtime import ApiError

VM_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines/vm1"
VMI_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vm1"
PVC_PATH = "/api/v1/namespaces/ns1/persistentvolumeclaims/"
REQUEST = "/status/memoryDumpRequest"
RBAC = "src/virt_operator/components/virt-api/rbac.yaml"


def seed_vm(api: Any, request: dict[str, Any] | None = None) -> None:
    status: dict[str, Any] = {"printableStatus": "Running"}
    if request is not None:
        status["memoryDumpRequest"] = request
    api.objects[VM_PATH] = {
        "metadata": {"name": "vm1"},
        "spec": {"runStrategy": "Always", "template": {"spec": {}}},
        "status": status,
    }


def seed_vmi(api: Any, phase: str = "Running", memory: str | None = "1Gi") -> None:
    resources = {"requests": {"memory": memory}} if memory is not None else {}
    api.objects[VMI_PATH] = {
        "metadata": {"name": "vm1"},
        "spec": {"domain": {"resources": resources}},
        "status": {"phase": phase},
    }


def seed_pvc(api: Any, name: str = "dump", size: str = "2Gi", **spec: Any) -> None:
    api.objects[PVC_PATH + name] = {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
            **spec,
        },
    }


def seed_all(api: Any, request: dict[str, Any] | None = None) -> None:
    seed_vm(api, request)
    seed_vmi(api)
    seed_pvc(api)


async def put(proxied: Any, action: str, body: Any) -> tuple[int, str]:
    kwargs = {"json": body} if body is not None else {}
    async with proxied.session.put(proxied.url("virtualmachines", "vm1", action), **kwargs) as r:
        answer = await r.json() if r.status != 202 else {}
        return r.status, answer.get("message", "")


async def test_memorydump_adds_an_associating_request_to_the_vm_status(
    proxied: Any, fake_api: Any
) -> None:
    seed_all(fake_api)
    assert await put(proxied, "memorydump", {"claimName": "dump"}) == (202, "")
    ((path, ops, _),) = fake_api.patches()
    assert path == VM_PATH + "/status"
    assert ops == [
        {"op": "test", "path": REQUEST, "value": None},
        {"op": "add", "path": REQUEST, "value": {"claimName": "dump", "phase": "Associating"}},
    ]


@pytest.mark.parametrize("phase", ["Completed", "Failed"])
async def test_a_finished_dump_is_replaced_and_its_claim_reused_when_none_is_given(
    proxied: Any, fake_api: Any, phase: str
) -> None:
    old = {"claimName": "dump", "phase": phase, "fileName": "vm1-dump-1.memory.dump"}
    seed_all(fake_api, old)
    assert await put(proxied, "memorydump", {}) == (202, "")
    ((_, ops, _),) = fake_api.patches()
    assert ops == [
        {"op": "test", "path": REQUEST, "value": old},
        {"op": "replace", "path": REQUEST, "value": {"claimName": "dump", "phase": "Associating"}},
    ]


async def test_the_callers_phase_and_remove_are_ignored(proxied: Any, fake_api: Any) -> None:
    seed_all(fake_api)
    body = {"claimName": "dump", "phase": "Completed", "remove": True}
    assert await put(proxied, "memorydump", body) == (202, "")
    ((_, ops, _),) = fake_api.patches()
    assert ops[1]["value"] == {"claimName": "dump", "phase": "Associating"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (None, "Request with no body"),
        ({"claimName": 3}, "claimName must be a string"),
        ({"claimName": "dump", "dryRun": ["All"]}, "dryRun is not supported by memorydump"),
        ({}, "Memory dump requires claim name to be set"),
        ({"claimName": ""}, "Memory dump requires claim name to be set"),
    ],
)
async def test_bad_bodies_are_400(proxied: Any, fake_api: Any, body: Any, message: str) -> None:
    seed_all(fake_api)
    status, text = await put(proxied, "memorydump", body)
    assert status == 400
    assert message in text
    assert fake_api.patches() == []


async def test_a_body_that_is_not_json_is_400(proxied: Any, fake_api: Any) -> None:
    seed_all(fake_api)
    url = proxied.url("virtualmachines", "vm1", "memorydump")
    async with proxied.session.put(url, data=b"{nope") as response:
        assert response.status == 400
        assert "not JSON" in (await response.json())["message"]


async def test_a_second_claim_while_one_is_associated_is_a_conflict(
    proxied: Any, fake_api: Any
) -> None:
    seed_all(fake_api, {"claimName": "dump", "phase": "Completed"})
    seed_pvc(fake_api, "other")
    assert await put(proxied, "memorydump", {"claimName": "other"}) == (
        409,
        "can't request memory dump for pvc [other] while pvc [dump] is still associated "
        "as the memory dump pvc",
    )
    assert fake_api.patches() == []


@pytest.mark.parametrize(
    ("phase", "message"),
    [
        (
            "Dissociating",
            "can't dump memory for pvc [dump] a remove memory dump request is in progress",
        ),
        ("Associating", "memory dump request for pvc [dump] already in progress"),
        ("InProgress", "memory dump request for pvc [dump] already in progress"),
        ("Unmounting", "memory dump request for pvc [dump] already in progress"),
    ],
)
async def test_a_dump_under_way_is_a_conflict(
    proxied: Any, fake_api: Any, phase: str, message: str
) -> None:
    seed_all(fake_api, {"claimName": "dump", "phase": phase})
    assert await put(proxied, "memorydump", {"claimName": "dump"}) == (409, message)
    assert fake_api.patches() == []


async def test_the_vm_and_its_vmi_must_exist_and_run(proxied: Any, fake_api: Any) -> None:
    body = {"claimName": "dump"}
    assert await put(proxied, "memorydump", body) == (
        404,
        'virtualmachines.kubevirt.io "vm1" not found',
    )
    seed_vm(fake_api)
    seed_pvc(fake_api)
    assert await put(proxied, "memorydump", body) == (
        404,
        'virtualmachineinstances.kubevirt.io "vm1" not found',
    )
    seed_vmi(fake_api, "Scheduled")
    assert await put(proxied, "memorydump", body) == (409, "VMI is not running")
    assert fake_api.patches() == []


@pytest.mark.parametrize(
    ("pvc", "status", "message"),
    [
        ({"name": "missing"}, 404, 'persistentvolumeclaims "dump" not found'),
        ({"volumeMode": "Block"}, 409, "pvc should be filesystem pvc"),
        ({"accessModes": ["ReadOnlyMany"]}, 409, "pvc access mode can't be read only"),
        (
            {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"]},
            409,
            "pvc access mode can't be read only",
        ),
        # 1Gi memory: (1Gi + 100Mi) * 1.055, aligned up to 1Mi, is 1186Mi; the claim's size
        # is shown rounded up to kB, as upstream.
        ({"size": "1Gi"}, 409, "pvc size [1073742k] should be bigger then [1186Mi]"),
        ({"size": "1185Mi"}, 409, "pvc size [1242563k] should be bigger then [1186Mi]"),
        ({"resources": {}}, 409, "pvc size [0] should be bigger then [1186Mi]"),
    ],
)
async def test_the_claim_must_hold_the_dump(
    proxied: Any, fake_api: Any, pvc: dict[str, Any], status: int, message: str
) -> None:
    seed_vm(fake_api)
    seed_vmi(fake_api)
    seed_pvc(fake_api, **pvc)
    assert await put(proxied, "memorydump", {"claimName": "dump"}) == (status, message)
    assert fake_api.patches() == []


async def test_a_claim_of_exactly_the_expected_size_is_enough(proxied: Any, fake_api: Any) -> None:
    seed_vm(fake_api)
    seed_vmi(fake_api)
    seed_pvc(fake_api, size="1186Mi")
    assert await put(proxied, "memorydump", {"claimName": "dump"}) == (202, "")


async def test_a_decimal_memory_request_shows_the_expected_size_in_bytes(
    proxied: Any, fake_api: Any
) -> None:
    seed_vm(fake_api)
    seed_vmi(fake_api, memory="1G")
    seed_pvc(fake_api, size="1G")
    assert await put(proxied, "memorydump", {"claimName": "dump"}) == (
        409,
        "pvc size [1G] should be bigger then [1166016512]",
    )


async def test_a_concurrent_status_change_is_a_conflict_to_retry(
    proxied: Any, fake_api: Any
) -> None:
    seed_all(fake_api)
    fake_api.patch_error = ApiError(
        422, "Invalid", "testing value /status/memoryDumpRequest failed"
    )
    status, text = await put(proxied, "memorydump", {"claimName": "dump"})
    assert status == 409
    assert "retry" in text


async def test_removememorydump_marks_the_request_dissociating(proxied: Any, fake_api: Any) -> None:
    old = {"claimName": "dump", "phase": "Completed", "fileName": "f.memory.dump"}
    seed_vm(fake_api, old)
    assert await put(proxied, "removememorydump", None) == (202, "")
    ((path, ops, _),) = fake_api.patches()
    assert path == VM_PATH + "/status"
    assert ops == [
        {"op": "test", "path": REQUEST, "value": old},
        {
            "op": "replace",
            "path": REQUEST,
            "value": {"claimName": "dump", "phase": "Dissociating", "remove": True},
        },
    ]


async def test_removememorydump_needs_an_association_not_yet_removed(
    proxied: Any, fake_api: Any
) -> None:
    assert await put(proxied, "removememorydump", None) == (
        404,
        'virtualmachines.kubevirt.io "vm1" not found',
    )
    seed_vm(fake_api)
    assert await put(proxied, "removememorydump", None) == (
        409,
        "can't remove memory dump association for vm vm1, no association found",
    )
    seed_vm(fake_api, {"claimName": "dump", "phase": "Dissociating", "remove": True})
    assert await put(proxied, "removememorydump", None) == (
        409,
        "memory dump remove request for pvc [dump] already exists",
    )
    assert fake_api.patches() == []


async def test_discovery_and_openapi_list_the_memory_dump_subresources(proxied: Any) -> None:
    async with proxied.session.get(f"{proxied.base}/apis/subresources.kubevirt.io/v1") as response:
        resources = {r["name"]: r["verbs"] for r in (await response.json())["resources"]}
    for action in ("memorydump", "removememorydump"):
        assert resources[f"virtualmachines/{action}"] == ["update"]
        assert f"virtualmachineinstances/{action}" not in resources
    async with proxied.session.get(f"{proxied.base}/openapi/v2") as response:
        document = await response.json()
    base = "/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}"
    operation = document["paths"][f"{base}/memorydump"]["put"]
    assert operation["parameters"][-1]["schema"] == {
        "$ref": "#/definitions/v1.VirtualMachineMemoryDumpRequest"
    }
    assert "put" in document["paths"][f"{base}/removememorydump"]


def test_the_edit_role_lets_users_call_them() -> None:
    rbac = Path(__file__).resolve().parents[2] / "virt-operator" / RBAC
    roles = [d for d in yaml.safe_load_all(rbac.read_text()) if d and d["kind"] == "ClusterRole"]
    (edit,) = [r for r in roles if r["metadata"]["name"] == "kubevirt.io:edit-subresources"]
    updatable = {
        resource
        for rule in edit["rules"]
        if "update" in rule["verbs"]
        for resource in rule["resources"]
    }
    assert {"virtualmachines/memorydump", "virtualmachines/removememorydump"} <= updatable
