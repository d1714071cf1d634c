"""Hotplugged volumes: a disk while their image is in the pod, none otherwise; kept targets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from virt_domain import ConversionError, ConverterOptions, Disk, Domain, LauncherLayout

Converter = Callable[..., Domain]
LAYOUT = LauncherLayout()
ROOT_DISK = {"name": "root", "disk": {"bus": "virtio"}, "bootOrder": 1}
ROOT_VOLUME = {"name": "root", "containerDisk": {"image": "quay.io/x:1"}}


def _claim(name: str, hotpluggable: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "persistentVolumeClaim": {"claimName": f"c-{name}", "hotpluggable": hotpluggable},
    }


def _convert(
    to_domain: Converter,
    disks: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    present: set[str],
    **spec: Any,
) -> dict[str, Disk]:
    domain = to_domain(
        {"devices": {"disks": [ROOT_DISK, *disks]}},
        volumes=[ROOT_VOLUME, *volumes],
        options=ConverterOptions(hotplug_volumes=frozenset(present)),
        **spec,
    )
    return {d.alias.user_device or "": d for d in domain.devices.disks if d.alias}


def _dev(disk: Disk) -> tuple[str, str]:
    assert disk.target is not None
    return disk.target.bus, disk.target.dev


def _file(disk: Disk) -> str | None:
    assert disk.source is not None
    return disk.source.file


def test_a_present_hotplugged_claim_is_a_raw_file_on_the_scsi_bus(to_domain: Converter) -> None:
    disks = _convert(
        to_domain, [{"name": "data", "serial": "D1", "bootOrder": 2}], [_claim("data")], {"data"}
    )
    data = disks["data"]
    assert (data.type, data.device) == ("file", "disk")
    assert _file(data) == "/var/run/kubevirt/hotplug-disks/data.img"
    assert data.driver is not None
    assert data.driver.type == "raw"
    assert _dev(data) == ("scsi", "sda")
    assert data.address is not None
    assert (data.address.type, data.address.controller, data.address.unit) == ("drive", "0", "0")
    assert data.serial == "D1"
    assert data.boot is None  # never booted from, whatever the disk says
    assert disks["root"].boot is not None


def test_a_hotpluggable_data_volume_is_one_too(to_domain: Converter) -> None:
    volume = {"name": "dv", "dataVolume": {"name": "dv", "hotpluggable": True}}
    disks = _convert(to_domain, [{"name": "dv", "disk": {}}], [volume], {"dv"})
    assert _file(disks["dv"]) == LAYOUT.hotplug_disk_image("dv")


def test_an_absent_hotplugged_volume_has_no_disk_and_no_error(to_domain: Converter) -> None:
    disks = _convert(to_domain, [{"name": "data"}], [_claim("data")], set())
    assert set(disks) == {"root"}


def test_the_disk_may_ask_for_virtio(to_domain: Converter) -> None:
    disks = _convert(
        to_domain, [{"name": "data", "disk": {"bus": "virtio"}}], [_claim("data")], {"data"}
    )
    assert _dev(disks["data"]) == ("virtio", "vdb")


@pytest.mark.parametrize(
    ("disk", "field"),
    [
        ({"disk": {"bus": "sata"}}, "spec.domain.devices.disks[1].disk.bus"),
        ({"cdrom": {"bus": "scsi"}}, "spec.domain.devices.disks[1].cdrom"),
    ],
)
def test_a_hotplugged_disk_needs_a_hotplug_bus(
    to_domain: Converter, disk: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConversionError) as info:
        _convert(to_domain, [{"name": "data", **disk}], [_claim("data")], {"data"})
    assert info.value.field == field


def test_a_claim_that_is_not_hotpluggable_stays_a_pod_volume(to_domain: Converter) -> None:
    disks = _convert(to_domain, [{"name": "data"}], [_claim("data", hotpluggable=False)], {"data"})
    assert _file(disks["data"]) == LAYOUT.filesystem_volume_image("data")
    assert _dev(disks["data"]) == ("sata", "sda")


def test_an_absent_hotplugged_disk_keeps_its_target_free(to_domain: Converter) -> None:
    disks = _convert(
        to_domain,
        [{"name": "first"}, {"name": "second"}],
        [_claim("first"), _claim("second")],
        {"second"},
    )
    assert _dev(disks["second"]) == ("scsi", "sdb")


def test_targets_the_vmi_status_reports_are_kept(to_domain: Converter) -> None:
    # "second" was attached as sdb while "first" waited; "first" came later and is sda.
    status = {
        "volumeStatus": [
            {"name": "root", "target": "vda"},
            {"name": "second", "target": "sda"},
        ]
    }
    domain = to_domain(
        {"devices": {"disks": [ROOT_DISK, {"name": "first"}, {"name": "second"}]}},
        volumes=[ROOT_VOLUME, _claim("first"), _claim("second")],
        options=ConverterOptions(hotplug_volumes=frozenset({"first", "second"})),
        status=status,
    )
    targets = {
        d.alias.user_device: (d.target.dev if d.target else "", d.address.unit if d.address else "")
        for d in domain.devices.disks
        if d.alias
    }
    assert targets["second"] == ("sda", "0")
    assert targets["first"] == ("sdb", "1")
    assert targets["root"][0] == "vda"


def test_a_reported_target_of_another_family_is_not_kept(to_domain: Converter) -> None:
    domain = to_domain(
        {"devices": {"disks": [ROOT_DISK, {"name": "data"}]}},
        volumes=[ROOT_VOLUME, _claim("data")],
        options=ConverterOptions(hotplug_volumes=frozenset({"data"})),
        status={"volumeStatus": [{"name": "data", "target": "vdc"}]},
    )
    assert _dev(domain.devices.disks[1]) == ("scsi", "sda")


def test_a_memory_dump_volume_makes_no_disk_and_is_no_error(to_domain: Converter) -> None:
    # virt-controller adds it to the running VMI; the handler binds it as a directory.
    dump = {"name": "dump", "memoryDump": {"claimName": "dump", "hotpluggable": True}}
    disks = _convert(to_domain, [], [dump], set())
    assert sorted(disks) == ["root"]
