"""VMI updates by KubeVirt's components: volumes and disks change only as hotplug allows."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubevirt_api.admission import (
    check_hotplug_disk,
    validate_hotplug_storage,
    validate_vmi_update,
)
from kubevirt_api.admission.causes import FieldPath
from kubevirt_api.hotplug import is_hotplug_volume


def plugged(vmi: dict[str, Any], name: str = "data", **disk: Any) -> dict[str, Any]:
    """A copy of `vmi` with hotpluggable claim `name` and its disk (scsi unless given)."""
    new = copy.deepcopy(vmi)
    new["spec"]["volumes"].append(
        {"name": name, "persistentVolumeClaim": {"claimName": name, "hotpluggable": True}}
    )
    target = {} if {"disk", "lun", "cdrom"} & set(disk) else {"disk": {"bus": "scsi"}}
    new["spec"]["domain"]["devices"]["disks"].append({"name": name, **target, **disk})
    return new


def messages(new: dict[str, Any], old: dict[str, Any]) -> dict[str, str]:
    return {c.field: c.message for c in validate_vmi_update(new, old, trusted=True)}


def test_a_trusted_update_may_add_and_remove_a_hotplug_volume(vmi: dict[str, Any]) -> None:
    added = plugged(vmi, serial="abc")
    assert validate_vmi_update(added, vmi, trusted=True) == []
    assert validate_vmi_update(vmi, added, trusted=True) == []
    virtio = plugged(vmi, disk={"bus": "virtio"})
    assert validate_vmi_update(virtio, vmi, trusted=True) == []
    lun = plugged(vmi, lun={"bus": "scsi"})
    assert validate_vmi_update(lun, vmi, trusted=True) == []


def test_users_still_cannot_change_the_spec(vmi: dict[str, Any]) -> None:
    (cause,) = validate_vmi_update(plugged(vmi), vmi)
    assert cause.field == "spec"


def test_a_permanent_volume_may_not_be_removed_or_changed(vmi: dict[str, Any]) -> None:
    removed = copy.deepcopy(vmi)
    removed["spec"]["volumes"] = []
    removed["spec"]["domain"]["devices"]["disks"] = []
    assert "permanent volume root was removed" in messages(removed, vmi)["spec.volumes"]
    changed = copy.deepcopy(vmi)
    changed["spec"]["volumes"][0]["containerDisk"]["image"] = "other"
    assert messages(changed, vmi) == {"spec.volumes[0]": "permanent volume root, changed"}
    disk = copy.deepcopy(vmi)
    disk["spec"]["domain"]["devices"]["disks"][0]["disk"]["bus"] = "sata"
    assert messages(disk, vmi) == {"spec.domain.devices.disks[0]": "permanent disk root, changed"}


def test_a_plugged_volume_and_its_disk_are_fixed(vmi: dict[str, Any]) -> None:
    old = plugged(vmi)
    claim = copy.deepcopy(old)
    claim["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"] = "other"
    assert messages(claim, old) == {"spec.volumes[1]": "hotplug volume data, changed"}
    bus = copy.deepcopy(old)
    bus["spec"]["domain"]["devices"]["disks"][1]["disk"]["bus"] = "virtio"
    assert messages(bus, old) == {"spec.domain.devices.disks[1]": "hotplug disk data, changed"}


def test_a_volume_migration_may_change_the_source(vmi: dict[str, Any]) -> None:
    old = plugged(vmi)
    new = copy.deepcopy(old)
    new["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"] = "moved"
    new["status"] = {"migratedVolumes": [{"volumeName": "data"}]}
    assert validate_vmi_update(new, old, trusted=True) == []


def test_a_new_volume_must_be_a_hotpluggable_claim(vmi: dict[str, Any]) -> None:
    new = plugged(vmi)
    del new["spec"]["volumes"][1]["persistentVolumeClaim"]["hotpluggable"]
    assert "not hotpluggable" in messages(new, vmi)["spec.volumes[1]"]
    empty = copy.deepcopy(vmi)
    empty["spec"]["volumes"].append({"name": "scratch", "emptyDisk": {"capacity": "1Gi"}})
    empty["spec"]["domain"]["devices"]["disks"].append({"name": "scratch", "disk": {}})
    assert messages(empty, vmi) == {"spec.volumes[1]": "volume scratch is not a PVC or DataVolume"}


def test_a_data_volume_is_refused_naming_cdi(vmi: dict[str, Any]) -> None:
    new = plugged(vmi)
    new["spec"]["volumes"][1] = {"name": "data", "dataVolume": {"name": "dv", "hotpluggable": True}}
    assert "CDI" in messages(new, vmi)["spec.volumes[1].dataVolume"]


def test_each_hotplug_volume_needs_its_disk(vmi: dict[str, Any]) -> None:
    new = plugged(vmi)
    new["spec"]["domain"]["devices"]["disks"].pop()
    assert "doesn't have a matching disk" in messages(new, vmi)["spec.volumes[1].name"]
    orphan = plugged(vmi)
    orphan["spec"]["volumes"].pop()
    assert "has no volume" in messages(orphan, vmi)["spec.domain.devices.disks[1].name"]


def test_a_memory_dump_volume_needs_no_disk(vmi: dict[str, Any]) -> None:
    new = copy.deepcopy(vmi)
    new["spec"]["volumes"].append({"name": "dump", "memoryDump": {"claimName": "dump"}})
    assert validate_vmi_update(new, vmi, trusted=True) == []


@pytest.mark.parametrize(
    ("disk", "field", "text"),
    [
        ({"disk": {"bus": "sata"}}, "disk.bus", "requires bus to be 'scsi' or 'virtio'. [sata]"),
        ({"disk": {}}, "disk.bus", "[] is not permitted"),
        ({"lun": {"bus": "virtio"}}, "lun.bus", "for LUN [data] requires bus to be 'scsi'"),
        ({"cdrom": {"bus": "scsi"}}, "", "requires diskDevice of type 'disk' or 'lun'"),
        (
            {"disk": {"bus": "scsi"}, "dedicatedIOThread": True},
            "dedicatedIOThread",
            "requires virtio bus for IOThreads",
        ),
        ({"disk": {"bus": "scsi"}, "bootOrder": 0}, "bootOrder", "boot order > 0"),
        ({"disk": {"bus": "scsi"}, "cache": "unsafe"}, "cache", "cache 'unsafe'"),
    ],
)
def test_a_new_hotplug_disk_is_checked(
    vmi: dict[str, Any], disk: dict[str, Any], field: str, text: str
) -> None:
    got = messages(plugged(vmi, **disk), vmi)
    where = "spec.domain.devices.disks[1]" + (f".{field}" if field else "")
    assert text in got[where]


def test_a_boot_order_above_zero_is_allowed_as_upstream(vmi: dict[str, Any]) -> None:
    assert messages(plugged(vmi, disk={"bus": "scsi"}, bootOrder=2), vmi) == {}


def test_check_hotplug_disk_names_the_field_it_is_given() -> None:
    (cause,) = check_hotplug_disk(None, "x", FieldPath("disk"), "AddVolume request")
    assert (cause.field, cause.message) == (
        "disk",
        "AddVolume request for [x] requires the disk field to be set.",
    )


def test_what_counts_as_a_hotplug_volume() -> None:
    assert is_hotplug_volume({"persistentVolumeClaim": {"claimName": "c", "hotpluggable": True}})
    assert is_hotplug_volume({"memoryDump": {"claimName": "c"}})
    assert not is_hotplug_volume({"persistentVolumeClaim": {"claimName": "c"}})
    assert not is_hotplug_volume({"containerDisk": {"image": "i"}})


def test_garbage_never_raises() -> None:
    for junk in ({"spec": 5}, {"spec": {"volumes": "x"}}, {"spec": {"volumes": [1, None]}}, {}):
        validate_hotplug_storage(junk, {"spec": {"domain": []}})


def test_a_vm_template_may_carry_a_hotplugged_claim(vm: dict[str, Any]) -> None:
    # The VM addvolume subresource (declarative hotplug) writes the volume into the template.
    from kubevirt_api.admission import ClusterConfig, validate_vm

    template = vm["spec"]["template"]["spec"]
    template["volumes"].append(
        {"name": "data", "persistentVolumeClaim": {"claimName": "data", "hotpluggable": True}}
    )
    template["domain"]["devices"]["disks"].append(
        {"name": "data", "disk": {"bus": "scsi"}, "serial": "data"}
    )
    assert validate_vm(vm, ClusterConfig()) == []


def test_other_spec_changes_are_not_held_to_the_volume_rules(vmi: dict[str, Any]) -> None:
    # A VMI admitted long ago with a stray volume: a CPU change must not trip over it.
    vmi["spec"]["volumes"].append({"name": "stray", "emptyDisk": {"capacity": "1Gi"}})
    new = copy.deepcopy(vmi)
    new["spec"]["domain"]["cpu"] = {"sockets": 2}
    assert validate_vmi_update(new, vmi, trusted=True) == []
