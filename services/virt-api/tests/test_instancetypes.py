"""Instancetypes in virt-api: VM admission refuses conflicts with their field path but not a
missing instancetype; expand-spec and expand-vm-spec return the expanded VM, as upstream."""

from __future__ import annotations

import base64
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from kubevirt_api.admission import ClusterConfig
from virt_api import AdmissionContext, FrontProxyConfig, SubresourceContext, build_app

U1_SMALL = "/apis/instancetype.kubevirt.io/v1beta1/virtualmachineclusterinstancetypes/u1.small"
FEDORA = "/apis/instancetype.kubevirt.io/v1beta1/namespaces/ns1/virtualmachinepreferences/fedora"
VM_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines/vm1"


def seed(api: Any) -> None:
    api.objects[U1_SMALL] = {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClusterInstancetype",
        "metadata": {"name": "u1.small", "uid": "it-uid", "generation": 1},
        "spec": {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}},
    }
    api.objects[FEDORA] = {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachinePreference",
        "metadata": {"name": "fedora", "uid": "p-uid", "generation": 1},
        "spec": {"devices": {"preferredDiskBus": "virtio"}},
    }


def vm(domain: dict[str, Any] | None = None, itype: str = "u1.small") -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "vm1", "namespace": "ns1"},
        "spec": {
            "runStrategy": "Halted",
            "instancetype": {"name": itype},
            "preference": {"name": "fedora", "kind": "VirtualMachinePreference"},
            "template": {
                "spec": {
                    "domain": domain or {"devices": {}},
                    "volumes": [{"name": "root", "containerDisk": {"image": "img:1"}}],
                }
            },
        },
    }


async def review(api: Any, no_handler: Any, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    """virt-api's answer to a VM CREATE review posted to the webhook at `path`."""

    async def config() -> ClusterConfig:
        return ClusterConfig()

    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r1",
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachine"},
            "resource": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "operation": "CREATE",
            "namespace": "ns1",
            "object": obj,
            "userInfo": {"username": "alice"},
        },
    }
    app = build_app(
        AdmissionContext(cluster_config=config, api=api.client),
        SubresourceContext(api.client, FrontProxyConfig(), no_handler),
    )
    async with TestClient(TestServer(app)) as client:
        response = await client.post(path, json=body)
        answer: dict[str, Any] = (await response.json())["response"]
        return answer


async def admit(api: Any, no_handler: Any, obj: dict[str, Any]) -> dict[str, Any]:
    return await review(api, no_handler, "/virtualmachines-validate", obj)


async def test_a_conflicting_vm_is_refused_with_the_field_path(
    fake_api: Any, no_handler: Any
) -> None:
    seed(fake_api)
    answer = await admit(
        fake_api, no_handler, vm({"devices": {}, "cpu": {"sockets": 2}, "memory": {"guest": "1Gi"}})
    )
    assert answer["allowed"] is False
    causes = answer["status"]["details"]["causes"]
    assert [c["field"] for c in causes] == [
        "spec.template.spec.domain.cpu.sockets",
        "spec.template.spec.domain.memory.guest",
    ]
    assert causes[0]["message"] == (
        "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type"
    )
    assert causes[0]["type"] == "FieldValueInvalid"


async def test_a_vm_that_fits_its_instancetype_is_admitted(fake_api: Any, no_handler: Any) -> None:
    seed(fake_api)
    assert (await admit(fake_api, no_handler, vm()))["allowed"] is True


async def test_a_missing_instancetype_does_not_refuse_the_vm(
    fake_api: Any, no_handler: Any
) -> None:
    answer = await admit(fake_api, no_handler, vm({"devices": {}, "memory": {"guest": "1Gi"}}))
    assert answer["allowed"] is True


async def test_expand_spec_returns_the_stored_vm_expanded(proxied: Any, fake_api: Any) -> None:
    seed(fake_api)
    fake_api.objects[VM_PATH] = vm()
    async with proxied.session.get(proxied.url("virtualmachines", "vm1", "expand-spec")) as got:
        assert got.status == 200
        expanded = await got.json()
    assert "instancetype" not in expanded["spec"]
    assert "preference" not in expanded["spec"]
    domain = expanded["spec"]["template"]["spec"]["domain"]
    assert domain["cpu"] == {"sockets": 1, "cores": 1, "threads": 1}
    assert domain["memory"] == {"guest": "2Gi"}
    assert domain["devices"]["disks"] == [{"name": "root", "disk": {"bus": "virtio"}}]


async def test_expand_vm_spec_refuses_conflicts_and_missing_objects_with_400(
    proxied: Any, fake_api: Any
) -> None:
    seed(fake_api)
    url = f"{proxied.base}/apis/subresources.kubevirt.io/v1/namespaces/ns1/expand-vm-spec"
    conflicting = vm({"devices": {}, "memory": {"guest": "1Gi"}})
    async with proxied.session.put(url, json=conflicting) as got:
        assert got.status == 400
        assert (await got.json())["message"] == (
            "VM field(s) spec.template.spec.domain.memory.guest conflicts with selected instance type"
        )
    async with proxied.session.put(url, json=vm(itype="ghost")) as got:
        assert got.status == 400
        assert (await got.json())["message"] == (
            'virtualmachineclusterinstancetypes.instancetype.kubevirt.io "ghost" not found'
        )
    async with proxied.session.put(url, json=vm()) as got:
        assert got.status == 200
        assert (await got.json())["spec"]["template"]["spec"]["domain"]["memory"] == {
            "guest": "2Gi"
        }


async def test_the_vm_mutator_takes_the_preferred_machine_type_before_its_defaults(
    fake_api: Any, no_handler: Any
) -> None:
    seed(fake_api)
    fake_api.objects[FEDORA]["spec"]["machine"] = {"preferredMachineType": "pc-q35-9.0"}
    fake_api.objects[FEDORA]["spec"]["preferredArchitecture"] = "arm64"

    answer = await review(fake_api, no_handler, "/virtualmachines-mutate", vm())
    patch = json.loads(base64.b64decode(answer["patch"]))
    values = {op["path"]: op.get("value") for op in patch}
    template = values.get("/spec/template/spec") or {}
    machine = values.get("/spec/template/spec/domain/machine") or template["domain"]["machine"]
    assert machine == {"type": "pc-q35-9.0"}
    arch = values.get("/spec/template/spec/architecture") or template["architecture"]
    assert arch == "arm64"


PVC_PATH = "/api/v1/namespaces/ns1/persistentvolumeclaims/root-disk"


def patched(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """`obj` with the review's JSON patch applied (add/replace/remove on objects)."""
    out = json.loads(json.dumps(obj))
    for op in json.loads(base64.b64decode(answer["patch"])):
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"][1:].split("/")
        ]
        target = out
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if op["op"] == "remove":
            del target[last]
        else:
            target[last] = op["value"]
    return out


def inferring_vm(policy: str | None = None) -> dict[str, Any]:
    body = vm()
    matcher: dict[str, Any] = {"inferFromVolume": "root"}
    if policy:
        matcher["inferFromVolumeFailurePolicy"] = policy
    body["spec"]["instancetype"] = dict(matcher)
    body["spec"]["preference"] = dict(matcher)
    body["spec"]["template"]["spec"]["volumes"] = [
        {"name": "root", "persistentVolumeClaim": {"claimName": "root-disk"}}
    ]
    return body


async def test_the_vm_mutator_infers_the_matchers_from_the_pvcs_labels(
    fake_api: Any, no_handler: Any
) -> None:
    seed(fake_api)
    # A Pending PVC is enough: only its labels are read.
    fake_api.objects[PVC_PATH] = {
        "metadata": {
            "name": "root-disk",
            "labels": {
                "instancetype.kubevirt.io/default-instancetype": "u1.small",
                "instancetype.kubevirt.io/default-preference": "fedora",
                "instancetype.kubevirt.io/default-preference-kind": "VirtualMachinePreference",
            },
        },
        "status": {"phase": "Pending"},
    }
    answer = await review(fake_api, no_handler, "/virtualmachines-mutate", inferring_vm())
    assert answer["allowed"] is True
    spec = patched(inferring_vm(), answer)["spec"]
    assert spec["instancetype"] == {"name": "u1.small"}
    assert spec["preference"] == {"name": "fedora", "kind": "VirtualMachinePreference"}


async def test_a_failed_inference_is_refused_with_400_or_ignored(
    fake_api: Any, no_handler: Any
) -> None:
    seed(fake_api)
    fake_api.objects[PVC_PATH] = {"metadata": {"name": "root-disk"}}
    refused = await review(fake_api, no_handler, "/virtualmachines-mutate", inferring_vm())
    assert refused["allowed"] is False
    assert refused["status"]["code"] == 400
    assert refused["status"]["message"] == (
        "unable to find required instancetype.kubevirt.io/default-instancetype label on the volume"
    )
    ignored = await review(fake_api, no_handler, "/virtualmachines-mutate", inferring_vm("Ignore"))
    assert ignored["allowed"] is True
    spec = patched(inferring_vm("Ignore"), ignored)["spec"]
    assert "instancetype" not in spec
    assert "preference" not in spec
