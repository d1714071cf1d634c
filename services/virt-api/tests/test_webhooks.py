"""Webhook routes: upstream paths, validation denials, mutation patches, bad bodies."""

from __future__ import annotations

import base64
import json
from typing import Any

from aiohttp.test_utils import TestClient
from virt_api.webhooks import WEBHOOKS

VMI: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "v"},
    "spec": {
        "domain": {
            "devices": {"disks": [{"name": "root", "disk": {}}]},
            "resources": {"requests": {"memory": "64Mi"}},
        },
        "volumes": [{"name": "root", "containerDisk": {"image": "img"}}],
    },
}


def review(kind: str, obj: Any, operation: str = "CREATE", old: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": kind},
            "resource": {"group": "kubevirt.io", "version": "v1", "resource": kind.lower() + "s"},
            "operation": operation,
            "object": obj,
            "oldObject": old,
            "userInfo": {"username": "alice"},
        },
    }


def test_paths_and_names_are_upstreams() -> None:
    paths = {w.path: w.name for w in WEBHOOKS}
    assert (
        paths["/virtualmachineinstances-validate-create"]
        == "virtualmachineinstances-create-validator.kubevirt.io"
    )
    assert paths["/virtualmachines-mutate"] == "virtualmachines-mutator.kubevirt.io"
    assert paths["/status-validate"] == "kubevirt-crd-status-validator.kubevirt.io"
    assert len(paths) == len(WEBHOOKS)


async def test_valid_vmi_is_allowed(webhook_client: TestClient[Any, Any]) -> None:
    response = await webhook_client.post(
        "/virtualmachineinstances-validate-create", json=review("VirtualMachineInstance", VMI)
    )
    body = await response.json()
    assert response.status == 200
    assert body["response"] == {"uid": "uid-1", "allowed": True}


async def test_invalid_vmi_is_denied_with_field_paths(webhook_client: TestClient[Any, Any]) -> None:
    bad = json.loads(json.dumps(VMI))
    bad["spec"]["domain"]["devices"]["disks"][0]["disk"] = {"bus": "ide"}
    bad["spec"]["hostname"] = "UPPER"
    response = await webhook_client.post(
        "/virtualmachineinstances-validate-create", json=review("VirtualMachineInstance", bad)
    )
    status = (await response.json())["response"]["status"]
    fields = {c["field"] for c in status["details"]["causes"]}
    assert fields == {"spec.domain.devices.disks[0].disk.bus", "spec.hostname"}
    assert status["code"] == 422


async def test_vm_mutation_patches_defaults(webhook_client: TestClient[Any, Any]) -> None:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {},
        "spec": {"template": {"spec": VMI["spec"]}},
    }
    response = await webhook_client.post(
        "/virtualmachines-mutate", json=review("VirtualMachine", vm)
    )
    answer = (await response.json())["response"]
    patch = json.loads(base64.b64decode(answer["patch"]))
    assert {"op": "add", "path": "/spec/runStrategy", "value": "Halted"} in patch
    assert {
        "op": "add",
        "path": "/spec/template/spec/domain/machine",
        "value": {"type": "q35"},
    } in patch


async def test_a_created_vmi_is_admitted_pending_with_the_controllers_finalizer(
    webhook_client: TestClient[Any, Any],
) -> None:
    """As upstream's mutator: the create carries what the VMI controller's first write did."""

    async def patched(vmi: Any, operation: str = "CREATE") -> dict[str, Any]:
        old = vmi if operation == "UPDATE" else None
        response = await webhook_client.post(
            "/virtualmachineinstances-mutate",
            json=review("VirtualMachineInstance", vmi, operation, old),
        )
        answer = (await response.json())["response"]
        assert answer["allowed"] is True, answer
        ops = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []
        return {op["path"]: op.get("value") for op in ops}

    ops = await patched(VMI)
    assert ops["/metadata/finalizers"] == ["foregroundDeleteVirtualMachine"]
    status = ops["/status"]
    assert status["phase"] == "Pending"
    (stamp,) = status["phaseTransitionTimestamps"]
    assert stamp["phase"] == "Pending"
    assert stamp["phaseTransitionTimestamp"].endswith("Z")
    # An update leaves phase and finalizers to their owners.
    running = {**VMI, "status": {"phase": "Running"}}
    assert not {p for p in await patched(running, "UPDATE") if "status" in p or "final" in p}


async def test_wrong_kind_for_path_is_denied(webhook_client: TestClient[Any, Any]) -> None:
    response = await webhook_client.post(
        "/virtualmachines-validate", json=review("VirtualMachineInstance", VMI)
    )
    answer = (await response.json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["field"] == "kind"


async def test_garbage_gets_400_not_500(webhook_client: TestClient[Any, Any]) -> None:
    for data, headers in (
        (b"{not json", {"Content-Type": "application/json"}),
        (b"[]", {"Content-Type": "application/json"}),
        (b"{}", {"Content-Type": "text/plain"}),
        (b"[" * 200000, {"Content-Type": "application/json"}),
    ):
        response = await webhook_client.post(
            "/virtualmachines-validate", data=data, headers=headers
        )
        assert response.status == 400
        assert (await response.json())["reason"] == "BadRequest"


async def test_vmi_spec_change_is_denied_for_users(webhook_client: TestClient[Any, Any]) -> None:
    new = json.loads(json.dumps(VMI))
    new["spec"]["hostname"] = "other"
    response = await webhook_client.post(
        "/virtualmachineinstances-validate-update",
        json=review("VirtualMachineInstance", new, "UPDATE", VMI),
    )
    answer = (await response.json())["response"]
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["field"] == "spec"


async def test_kubevirt_cr_in_own_namespace_wins(fake_api: Any) -> None:
    from virt_api.clusterconfig import ClusterConfigSource

    fake_api.objects["/apis/kubevirt.io/v1/kubevirts"] = {
        "items": [
            {"metadata": {"namespace": "a-first"}, "spec": {}},
            {
                "metadata": {"namespace": "kubevirt"},
                "spec": {
                    "configuration": {"developerConfiguration": {"featureGates": ["HostDisk"]}}
                },
            },
        ]
    }
    config = await ClusterConfigSource(fake_api.client)()
    assert config.gate("HostDisk")


async def test_large_review_arriving_in_chunks_is_read_whole(
    webhook_client: TestClient[Any, Any],
) -> None:
    big = json.loads(json.dumps(VMI))
    big["metadata"]["annotations"] = {f"note-{i}": "x" * 200 for i in range(2000)}  # ~450 KB
    data = json.dumps(review("VirtualMachineInstance", big)).encode()

    async def chunks() -> Any:
        for start in range(0, len(data), 8192):
            yield data[start : start + 8192]

    response = await webhook_client.post(
        "/virtualmachineinstances-validate-create",
        data=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status == 200
    assert (await response.json())["response"]["allowed"] is True


async def test_metrics_count_reviews_by_result(webhook_client: TestClient[Any, Any]) -> None:
    await webhook_client.post(
        "/virtualmachineinstances-validate-create", json=review("VirtualMachineInstance", VMI)
    )
    bad = json.loads(json.dumps(VMI))
    bad["spec"]["hostname"] = "UPPER"
    await webhook_client.post(
        "/virtualmachineinstances-validate-create", json=review("VirtualMachineInstance", bad)
    )
    text = await (await webhook_client.get("/metrics")).text()
    name = 'webhook="virtualmachineinstances-create-validator.kubevirt.io"'
    lines = [
        line
        for line in text.splitlines()
        if line.startswith("kubevirt_virt_api_admission_reviews_total") and name in line
    ]
    counts = {
        ("allowed" if 'result="allowed"' in line else "denied"): float(line.rsplit(" ", 1)[1])
        for line in lines
    }
    assert counts == {"allowed": 1.0, "denied": 1.0}


async def test_virt_api_may_hotplug_a_claim_but_nothing_else(
    fake_api: Any, admission: Any, no_handler: Any
) -> None:
    # The addvolume subresource patches the VMI with virt-api's own ServiceAccount, which
    # counts as KubeVirt's by default; its change is held to the hotplug rules.
    from aiohttp.test_utils import TestServer
    from virt_api import FrontProxyConfig, SubresourceContext, build_app
    from virt_api.server import DEFAULT_KUBEVIRT_USERS

    user = "system:serviceaccount:kubevirt:kubevirt-apiserver"
    assert user in DEFAULT_KUBEVIRT_USERS
    app = build_app(
        admission(users=frozenset(DEFAULT_KUBEVIRT_USERS)),
        SubresourceContext(fake_api.client, FrontProxyConfig(), no_handler),
    )
    plugged = json.loads(json.dumps(VMI))
    plugged["spec"]["volumes"].append(
        {"name": "d", "persistentVolumeClaim": {"claimName": "d", "hotpluggable": True}}
    )
    plugged["spec"]["domain"]["devices"]["disks"].append({"name": "d", "disk": {"bus": "scsi"}})
    swapped = json.loads(json.dumps(VMI))
    swapped["spec"]["volumes"][0]["containerDisk"]["image"] = "other"
    async with TestClient(TestServer(app)) as client:
        answers = []
        for new in (plugged, swapped):
            body = review("VirtualMachineInstance", new, "UPDATE", VMI)
            body["request"]["userInfo"] = {"username": user}
            response = await client.post("/virtualmachineinstances-validate-update", json=body)
            answers.append((await response.json())["response"])
    assert answers[0]["allowed"] is True
    assert answers[1]["allowed"] is False
    (cause,) = answers[1]["status"]["details"]["causes"]
    assert cause == {
        "type": "FieldValueForbidden",
        "field": "spec.volumes[0]",
        "message": "permanent volume root, changed",
    }
