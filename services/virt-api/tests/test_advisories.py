"""Upstream advisory classes, seen from virt-api (docs/security.md has the table).

- Paths a VMI names in an image or on the host never hold `..` (CVE-2022-1798,
  GHSA-cvx8-ppmc-78hm; GHSA-qv98-3369-g364): refused at admission with the field path.
- A user's VMI update cannot change what the node mounts (volumes, their images, host
  paths): only KubeVirt's components may change a VMI's spec.
- Oversized or deeply nested bodies get a 4xx, never a 5xx.
The aggregated API's client-certificate and X-Remote-* checks are in test_frontproxy.py.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from virt_api.webhooks import MAX_REVIEW_BYTES

VMI: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {"name": "v", "namespace": "ns"},
    "spec": {
        "domain": {
            "devices": {"disks": [{"name": "root", "disk": {}}]},
            "resources": {"requests": {"memory": "64Mi"}},
        },
        "volumes": [{"name": "root", "containerDisk": {"image": "img"}}],
    },
}


def review(obj: Any, operation: str = "CREATE", old: Any = None, user: str = "alice") -> Any:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachineInstance"},
            "resource": {
                "group": "kubevirt.io",
                "version": "v1",
                "resource": "virtualmachineinstances",
            },
            "operation": operation,
            "namespace": "ns",
            "object": obj,
            "oldObject": old,
            "userInfo": {"username": user},
        },
    }


async def answer(client: TestClient[Any, Any], path: str, body: Any) -> Any:
    response = await client.post(path, json=body)
    assert response.status == 200
    return (await response.json())["response"]


def with_kernel_boot(vmi: Any, kernel: str, initrd: str) -> Any:
    vmi["spec"]["domain"]["firmware"] = {
        "kernelBoot": {"container": {"image": "kernel", "kernelPath": kernel, "initrdPath": initrd}}
    }
    return vmi


TRAVERSALS = [
    (
        lambda v: with_kernel_boot(v, "/boot/../../../etc/shadow", "/boot/initrd"),
        "spec.domain.firmware.kernelBoot.container.kernelPath",
    ),
    (
        lambda v: with_kernel_boot(v, "/boot/vmlinuz", "/boot/../../proc/self/environ"),
        "spec.domain.firmware.kernelBoot.container.initrdPath",
    ),
    (
        lambda v: (
            v["spec"]["volumes"][0]["containerDisk"].update(path="/disk/../../etc/passwd") or v
        ),
        "spec.volumes[0].containerDisk.path",
    ),
]


@pytest.mark.parametrize(("edit", "field"), TRAVERSALS, ids=["kernelPath", "initrdPath", "disk"])
async def test_a_path_with_dot_dot_is_refused_by_field(
    webhook_client: TestClient[Any, Any], edit: Any, field: str
) -> None:
    vmi = edit(copy.deepcopy(VMI))

    refused = await answer(webhook_client, "/virtualmachineinstances-validate-create", review(vmi))

    assert refused["allowed"] is False
    causes = {c["field"]: c["message"] for c in refused["status"]["details"]["causes"]}
    assert field in causes, causes
    assert "'..'" in causes[field]


MOUNT_CHANGES = {
    "another image": lambda s: s["volumes"][0]["containerDisk"].update(image="attacker/img"),
    "a host disk": lambda s: s["volumes"].append(
        {"name": "host", "hostDisk": {"path": "/var/lib/kubelet/x.img", "type": "Disk"}}
    ),
    "a claim": lambda s: s["volumes"].append(
        {"name": "pvc", "persistentVolumeClaim": {"claimName": "someone-elses"}}
    ),
}


@pytest.mark.parametrize("change", sorted(MOUNT_CHANGES))
async def test_a_users_update_cannot_change_what_the_node_mounts(
    webhook_client: TestClient[Any, Any], change: str
) -> None:
    new = copy.deepcopy(VMI)
    MOUNT_CHANGES[change](new["spec"])

    refused = await answer(
        webhook_client, "/virtualmachineinstances-validate-update", review(new, "UPDATE", VMI)
    )

    assert refused["allowed"] is False
    assert refused["status"]["details"]["causes"][0]["field"] == "spec"


async def test_an_oversized_review_is_a_400(webhook_client: TestClient[Any, Any]) -> None:
    vmi = copy.deepcopy(VMI)
    vmi["metadata"]["annotations"] = {"a": "x" * (MAX_REVIEW_BYTES + 1)}

    response = await webhook_client.post(
        "/virtualmachineinstances-validate-create",
        data=json.dumps(review(vmi)),
        headers={"Content-Type": "application/json"},
    )

    assert response.status == 400
    assert "limited to" in (await response.json())["message"]


@pytest.mark.parametrize("depth", [500, 990, 100_000])
async def test_a_deeply_nested_review_is_never_a_5xx(
    webhook_client: TestClient[Any, Any], depth: int
) -> None:
    # Nested past the parser's stack (100 000) is not JSON to us; below it, the rules
    # must cope with whatever depth the API server passes on.
    nested = "{" + '"x":{' * depth + "}" * depth + "}"
    text = json.dumps(review(copy.deepcopy(VMI))).replace(
        '"spec": {', '"spec": {"x": ' + nested + ", ", 1
    )

    response = await webhook_client.post(
        "/virtualmachineinstances-validate-create",
        data=text,
        headers={"Content-Type": "application/json"},
    )

    assert response.status in (200, 400)
    if response.status == 200:
        verdict = (await response.json())["response"]
        assert verdict["allowed"] or verdict["status"]["code"] < 500, verdict
