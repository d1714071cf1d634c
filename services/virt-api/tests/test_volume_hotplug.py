"""addvolume/removevolume on VMIs and VMs: the patch sent, and every refusal's status."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kube_runtime import ApiError

VM_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachines/vm1"
VMI_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vm1"
ROOT_VOLUME = {"name": "root", "containerDisk": {"image": "img"}}
ROOT_DISK = {"name": "root", "disk": {"bus": "virtio"}}
PLUGGED_VOLUME = {
    "name": "data",
    "persistentVolumeClaim": {"claimName": "data", "hotpluggable": True},
}
PLUGGED_DISK = {"name": "data", "disk": {"bus": "scsi"}}
ADD = {
    "name": "data",
    "disk": {"disk": {"bus": "scsi"}, "serial": "s1"},
    "volumeSource": {"persistentVolumeClaim": {"claimName": "data"}},
}


def spec(*, plugged: bool = False) -> dict[str, Any]:
    return {
        "domain": {"devices": {"disks": [ROOT_DISK, *([PLUGGED_DISK] if plugged else [])]}},
        "volumes": [ROOT_VOLUME, *([PLUGGED_VOLUME] if plugged else [])],
    }


def seed_vmi(
    api: Any, phase: str = "Running", *, owned: bool = False, plugged: bool = False
) -> None:
    meta: dict[str, Any] = {"name": "vm1"}
    if owned:
        meta["ownerReferences"] = [
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "name": "vm1",
                "controller": True,
            }
        ]
    api.objects[VMI_PATH] = {
        "metadata": meta,
        "spec": spec(plugged=plugged),
        "status": {"phase": phase},
    }


def seed_vm(api: Any, *, plugged: bool = False) -> None:
    api.objects[VM_PATH] = {
        "metadata": {"name": "vm1"},
        "spec": {"runStrategy": "Always", "template": {"spec": spec(plugged=plugged)}},
    }


async def put(proxied: Any, resource: str, action: str, body: Any) -> tuple[int, str]:
    kwargs = {"json": body} if body is not None else {}
    async with proxied.session.put(proxied.url(resource, "vm1", action), **kwargs) as response:
        answer = await response.json() if response.status != 202 else {}
        return response.status, answer.get("message", "")


async def test_addvolume_on_a_vmi_patches_its_spec_behind_tests(
    proxied: Any, fake_api: Any
) -> None:
    seed_vmi(fake_api)
    assert await put(proxied, "virtualmachineinstances", "addvolume", ADD) == (202, "")
    ((path, ops, query),) = fake_api.patches()
    assert path == VMI_PATH
    assert "dryRun" not in query
    assert ops == [
        {"op": "test", "path": "/spec/volumes", "value": [ROOT_VOLUME]},
        {"op": "replace", "path": "/spec/volumes", "value": [ROOT_VOLUME, PLUGGED_VOLUME]},
        {"op": "test", "path": "/spec/domain/devices/disks", "value": [ROOT_DISK]},
        {
            "op": "replace",
            "path": "/spec/domain/devices/disks",
            "value": [ROOT_DISK, {"name": "data", "disk": {"bus": "scsi"}, "serial": "s1"}],
        },
    ]


async def test_addvolume_on_a_vm_patches_its_template(proxied: Any, fake_api: Any) -> None:
    seed_vm(fake_api)
    body = {**ADD, "dryRun": ["All"]}
    assert await put(proxied, "virtualmachines", "addvolume", body) == (202, "")
    ((path, ops, query),) = fake_api.patches()
    assert path == VM_PATH
    assert query["dryRun"] == "All"
    assert [op["path"] for op in ops] == [
        "/spec/template/spec/volumes",
        "/spec/template/spec/volumes",
        "/spec/template/spec/domain/devices/disks",
        "/spec/template/spec/domain/devices/disks",
    ]
    assert ops[1]["value"][-1] == PLUGGED_VOLUME


async def test_lists_that_are_absent_are_added_behind_null_tests(
    proxied: Any, fake_api: Any
) -> None:
    fake_api.objects[VMI_PATH] = {
        "metadata": {},
        "spec": {"domain": {}},
        "status": {"phase": "Running"},
    }
    assert await put(proxied, "virtualmachineinstances", "addvolume", ADD) == (202, "")
    ((_, ops, _),) = fake_api.patches()
    assert ops == [
        {"op": "test", "path": "/spec/volumes", "value": None},
        {"op": "add", "path": "/spec/volumes", "value": [PLUGGED_VOLUME]},
        {"op": "test", "path": "/spec/domain/devices", "value": None},
        {
            "op": "add",
            "path": "/spec/domain/devices",
            "value": {"disks": [{"name": "data", "disk": {"bus": "scsi"}, "serial": "s1"}]},
        },
    ]


async def test_removevolume_takes_out_the_volume_and_its_disk(proxied: Any, fake_api: Any) -> None:
    for resource, seed in (("virtualmachineinstances", seed_vmi), ("virtualmachines", seed_vm)):
        seed(fake_api, plugged=True)
        assert await put(proxied, resource, "removevolume", {"name": "data"}) == (202, "")
    vmi_ops, vm_ops = (ops for _, ops, _ in fake_api.patches())
    assert vmi_ops[1] == {"op": "replace", "path": "/spec/volumes", "value": [ROOT_VOLUME]}
    assert vmi_ops[3] == {
        "op": "replace",
        "path": "/spec/domain/devices/disks",
        "value": [ROOT_DISK],
    }
    assert vm_ops[3]["path"] == "/spec/template/spec/domain/devices/disks"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"disk": {}, "volumeSource": {}}, "AddVolumeOptions requires name to be set"),
        ({"name": "d", "volumeSource": {}}, "AddVolumeOptions requires disk to not be nil"),
        (
            {"name": "d", "disk": {"disk": {}}},
            "AddVolumeOptions requires VolumeSource to not be nil",
        ),
        (
            {**ADD, "volumeSource": {"dataVolume": {"name": "dv"}}},
            "volumeSource.dataVolume: DataVolumes need CDI",
        ),
        (
            {**ADD, "volumeSource": {"persistentVolumeClaim": {}}},
            "volumeSource.persistentVolumeClaim.claimName is required",
        ),
        (
            {**ADD, "volumeSource": {"containerDisk": {"image": "i"}}},
            "volumeSource must set exactly persistentVolumeClaim",
        ),
        (
            {**ADD, "disk": {"disk": {"bus": "sata"}}},
            "disk.disk.bus: AddVolume request for disk [data] requires bus to be 'scsi' or 'virtio'",
        ),
        (
            {**ADD, "disk": {"cdrom": {}}},
            "AddVolume request for [data] requires diskDevice of type 'disk' or 'lun'",
        ),
        ({**ADD, "dryRun": "All"}, "dryRun must be a list"),
    ],
)
async def test_bad_add_options_are_400_naming_the_field(
    proxied: Any, fake_api: Any, body: dict[str, Any], message: str
) -> None:
    seed_vmi(fake_api)
    status, text = await put(proxied, "virtualmachineinstances", "addvolume", body)
    assert status == 400
    assert message in text
    assert fake_api.patches() == []


async def test_a_call_without_a_body_or_a_name_is_400(proxied: Any, fake_api: Any) -> None:
    seed_vm(fake_api)
    assert await put(proxied, "virtualmachines", "removevolume", None) == (
        400,
        "Request with no body, a new name is expected as the request body",
    )
    assert await put(proxied, "virtualmachines", "removevolume", {}) == (
        400,
        "RemoveVolumeOptions requires name to be set",
    )


async def test_names_and_claims_in_use_are_conflicts(proxied: Any, fake_api: Any) -> None:
    seed_vmi(fake_api, plugged=True)
    assert await put(proxied, "virtualmachineinstances", "addvolume", ADD) == (
        409,
        "Unable to add volume [data] because volume with that name already exists",
    )
    other_name = {**ADD, "name": "again"}
    assert await put(proxied, "virtualmachineinstances", "addvolume", other_name) == (
        409,
        "Unable to add volume source [data] because it already exists",
    )
    assert fake_api.patches() == []


async def test_only_existing_hotplug_volumes_can_be_removed(proxied: Any, fake_api: Any) -> None:
    seed_vm(fake_api)
    assert await put(proxied, "virtualmachines", "removevolume", {"name": "nope"}) == (
        409,
        "Unable to remove volume [nope] because it does not exist",
    )
    assert await put(proxied, "virtualmachines", "removevolume", {"name": "root"}) == (
        409,
        "Unable to remove volume [root] because it is not hotpluggable",
    )
    assert fake_api.patches() == []


async def test_a_volume_can_be_removed_by_its_claim_name(proxied: Any, fake_api: Any) -> None:
    seed_vmi(fake_api, plugged=True)
    fake_api.objects[VMI_PATH]["spec"]["volumes"][1] = {
        "name": "disk1",
        "persistentVolumeClaim": {"claimName": "data", "hotpluggable": True},
    }
    fake_api.objects[VMI_PATH]["spec"]["domain"]["devices"]["disks"][1]["name"] = "disk1"
    assert await put(proxied, "virtualmachineinstances", "removevolume", {"name": "data"}) == (
        202,
        "",
    )
    ((_, ops, _),) = fake_api.patches()
    assert ops[1]["value"] == [ROOT_VOLUME]
    assert ops[3]["value"] == [ROOT_DISK]


async def test_the_vmi_must_exist_run_and_stand_alone(proxied: Any, fake_api: Any) -> None:
    status, text = await put(proxied, "virtualmachineinstances", "addvolume", ADD)
    assert (status, text) == (404, 'virtualmachineinstances.kubevirt.io "vm1" not found')
    seed_vmi(fake_api, "Scheduled")
    assert await put(proxied, "virtualmachineinstances", "addvolume", ADD) == (
        409,
        "VMI is not running",
    )
    seed_vmi(fake_api, owned=True)
    status, text = await put(proxied, "virtualmachineinstances", "addvolume", ADD)
    assert status == 400
    assert text.startswith("VMI ns1/vm1 is owned by a VM")
    status, text = await put(proxied, "virtualmachines", "addvolume", ADD)
    assert (status, text) == (404, 'virtualmachines.kubevirt.io "vm1" not found')
    assert fake_api.patches() == []


@pytest.mark.parametrize("subresource_gates", [frozenset({"HotplugVolumes"})])
async def test_the_legacy_gate_allows_a_vm_owned_vmi(proxied: Any, fake_api: Any) -> None:
    seed_vmi(fake_api, owned=True)
    assert await put(proxied, "virtualmachineinstances", "addvolume", ADD) == (202, "")


async def test_a_concurrent_change_is_a_conflict_to_retry(proxied: Any, fake_api: Any) -> None:
    seed_vmi(fake_api)
    fake_api.patch_error = ApiError(
        422, "Invalid", "the server rejected our request: testing value /spec/volumes failed"
    )
    status, text = await put(proxied, "virtualmachineinstances", "addvolume", ADD)
    assert status == 409
    assert "retry" in text


async def test_an_admission_denial_reaches_the_caller(proxied: Any, fake_api: Any) -> None:
    seed_vmi(fake_api)
    denial = 'admission webhook "virtualmachineinstances-update-validator.kubevirt.io" denied'
    fake_api.patch_error = ApiError(422, "Invalid", denial)
    assert await put(proxied, "virtualmachineinstances", "addvolume", ADD) == (422, denial)


async def test_the_add_leaves_the_callers_options_intact(proxied: Any, fake_api: Any) -> None:
    seed_vm(fake_api)
    body = copy.deepcopy(ADD)
    body["volumeSource"]["persistentVolumeClaim"]["readOnly"] = True
    assert await put(proxied, "virtualmachines", "addvolume", body) == (202, "")
    ((_, ops, _),) = fake_api.patches()
    assert ops[1]["value"][-1]["persistentVolumeClaim"] == {
        "claimName": "data",
        "readOnly": True,
        "hotpluggable": True,
    }


async def test_discovery_and_openapi_list_the_volume_subresources(proxied: Any) -> None:
    async with proxied.session.get(f"{proxied.base}/apis/subresources.kubevirt.io/v1") as response:
        resources = {r["name"]: r["verbs"] for r in (await response.json())["resources"]}
    for resource in ("virtualmachines", "virtualmachineinstances"):
        for action in ("addvolume", "removevolume"):
            assert resources[f"{resource}/{action}"] == ["update"]
    async with proxied.session.get(f"{proxied.base}/openapi/v2") as response:
        document = await response.json()
    base = "/apis/subresources.kubevirt.io/v1/namespaces/{namespace}"
    operation = document["paths"][f"{base}/virtualmachineinstances/{{name}}/addvolume"]["put"]
    assert operation["parameters"][-1]["schema"] == {"$ref": "#/definitions/v1.AddVolumeOptions"}
    assert "502" not in operation["responses"]  # served by virt-api, not relayed
