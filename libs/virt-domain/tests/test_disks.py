"""Disks: targets, drivers, every volume source, and refusals by field path."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance
from virt_domain import ConversionError, ConverterOptions, Disk, Domain, LauncherLayout, convert
from virt_domain.converter.disks import device_name

Converter = Callable[..., Domain]
LAYOUT = LauncherLayout()


def _one(
    to_domain: Converter, volume: dict[str, Any], disk: dict[str, Any] | None = None, **kw: Any
) -> Disk:
    domain = to_domain(
        {"devices": {"disks": [{"name": "v", **(disk or {"disk": {"bus": "virtio"}})}]}},
        volumes=[{"name": "v", **volume}],
        **kw,
    )
    (only,) = domain.devices.disks
    return only


def test_device_names_follow_upstream() -> None:
    assert [device_name("vd", i) for i in (0, 1, 25, 26, 27, 701, 702)] == [
        "vda", "vdb", "vdz", "vdaa", "vdab", "vdzz", "vdaaa",
    ]  # fmt: skip


def test_targets_per_bus_family_in_disk_order(to_domain: Converter) -> None:
    disks = [
        {"name": "a", "disk": {"bus": "virtio"}},
        {"name": "b", "disk": {"bus": "sata"}},
        {"name": "c", "cdrom": {}},
        {"name": "d", "disk": {"bus": "virtio"}},
        {"name": "e"},
        {"name": "f", "disk": {"bus": "scsi"}},
    ]
    volumes = [{"name": n, "emptyDisk": {"capacity": "1Gi"}} for n in "abcdef"]
    domain = to_domain({"devices": {"disks": disks}}, volumes=volumes)
    targets = [(d.target.bus, d.target.dev) for d in domain.devices.disks if d.target]
    assert targets == [
        ("virtio", "vda"), ("sata", "sda"), ("sata", "sdb"), ("virtio", "vdb"), ("sata", "sdc"), ("scsi", "sdd"),
    ]  # fmt: skip
    scsi = domain.devices.disks[5]
    assert scsi.address is not None
    assert (scsi.address.type, scsi.address.controller, scsi.address.unit) == ("drive", "0", "3")
    assert [c.type for c in domain.devices.controllers] == ["usb", "scsi", "virtio-serial"]


def test_container_disk_is_an_overlay_over_the_image(to_domain: Converter) -> None:
    disk = _one(
        to_domain,
        {"containerDisk": {"image": "quay.io/x:1", "path": "/disk/fedora.img"}},
        options=ConverterOptions(container_disk_formats={"v": "raw"}),
    )
    assert disk.source is not None
    assert disk.source.file == LAYOUT.overlay_image("v")
    assert disk.driver is not None
    assert (disk.driver.type, disk.driver.error_policy, disk.driver.discard) == (
        "qcow2",
        "stop",
        "unmap",
    )
    assert disk.backing_store is not None
    assert disk.backing_store.format is not None
    assert disk.backing_store.format.type == "raw"
    assert disk.backing_store.source is not None
    assert disk.backing_store.source.file == f"{LAYOUT.container_disks_dir}/v/disk/fedora.img"
    assert (disk.model, disk.alias.name if disk.alias else None) == (
        "virtio-non-transitional",
        "ua-v",
    )


def test_container_disk_without_path_uses_the_layout_default(to_domain: Converter) -> None:
    disk = _one(to_domain, {"containerDisk": {"image": "x"}})
    assert disk.backing_store is not None
    assert disk.backing_store.source is not None
    assert disk.backing_store.source.file == f"{LAYOUT.container_disks_dir}/v/disk.img"
    assert disk.backing_store.format is not None
    assert disk.backing_store.format.type == "qcow2"


@pytest.mark.parametrize(
    ("volume", "block", "kind", "source"),
    [
        (
            {"persistentVolumeClaim": {"claimName": "c"}},
            False,
            "file",
            {"file": LAYOUT.filesystem_volume_image("v")},
        ),
        (
            {"persistentVolumeClaim": {"claimName": "c"}},
            True,
            "block",
            {"dev": "/dev/v", "name": "v"},
        ),
        ({"dataVolume": {"name": "dv"}}, True, "block", {"dev": "/dev/v", "name": "v"}),
        (
            {"hostDisk": {"path": "/data/img/disk.raw", "type": "Disk"}},
            False,
            "file",
            {"file": f"{LAYOUT.private_dir}/vmi-disks/v/disk.raw"},
        ),
        ({"emptyDisk": {"capacity": "1Gi"}}, False, "file", {"file": LAYOUT.empty_disk_image("v")}),
        (
            {"cloudInitNoCloud": {"userData": "#cloud-config"}},
            False,
            "file",
            {"file": "/var/run/kubevirt-private/cloud-init/ns/vm/noCloud.iso"},
        ),
        (
            {"cloudInitConfigDrive": {"userData": "#cloud-config"}},
            False,
            "file",
            {"file": "/var/run/kubevirt-private/cloud-init/ns/vm/configdrive.iso"},
        ),
        (
            {"configMap": {"name": "cm"}},
            False,
            "file",
            {"file": f"{LAYOUT.private_dir}/config-map-disks/v.iso"},
        ),
        (
            {"secret": {"secretName": "s"}},
            False,
            "file",
            {"file": f"{LAYOUT.private_dir}/secret-disks/v.iso"},
        ),
        (
            {"downwardAPI": {"fields": []}},
            False,
            "file",
            {"file": f"{LAYOUT.private_dir}/downwardapi-disks/v.iso"},
        ),
        (
            {"serviceAccount": {"serviceAccountName": "sa"}},
            False,
            "file",
            {"file": f"{LAYOUT.private_dir}/service-account-disk/service-account.iso"},
        ),
        (
            {"sysprep": {"secret": {"name": "s"}}},
            False,
            "file",
            {"file": f"{LAYOUT.private_dir}/sysprep-disks/v.iso"},
        ),
    ],
)
def test_every_volume_source_maps_to_a_layout_path(
    to_domain: Converter, volume: dict[str, Any], block: bool, kind: str, source: dict[str, str]
) -> None:
    options = ConverterOptions(block_volumes=frozenset({"v"} if block else set()))
    disk = _one(to_domain, volume, options=options)
    assert disk.type == kind
    assert disk.source is not None
    assert {k: v for k, v in dataclasses.asdict(disk.source).items() if v is not None} == source


def test_ephemeral_is_an_overlay_over_the_claim(to_domain: Converter) -> None:
    disk = _one(to_domain, {"ephemeral": {"persistentVolumeClaim": {"claimName": "c"}}})
    assert disk.backing_store is not None
    assert disk.backing_store.source is not None
    assert disk.backing_store.source.file == LAYOUT.filesystem_volume_image("v")
    assert disk.source is not None
    assert disk.source.file == LAYOUT.overlay_image("v")


def test_cdrom_defaults_readonly_closed_sata_without_discard(to_domain: Converter) -> None:
    disk = _one(to_domain, {"emptyDisk": {"capacity": "1Gi"}}, {"cdrom": {}})
    assert (disk.device, disk.readonly, disk.target.tray if disk.target else None) == (
        "cdrom",
        True,
        "closed",
    )
    assert disk.driver is not None
    assert disk.driver.discard is None


def test_cdrom_without_volume_is_an_empty_tray(to_domain: Converter) -> None:
    domain = to_domain({"devices": {"disks": [{"name": "tray", "cdrom": {"bus": "sata"}}]}})
    (disk,) = domain.devices.disks
    assert (disk.device, disk.source) == ("cdrom", None)


def test_driver_settings_boot_order_serial(to_domain: Converter) -> None:
    disk = _one(
        to_domain,
        {"emptyDisk": {"capacity": "1Gi"}},
        {
            "disk": {"bus": "virtio"},
            "cache": "writeback",
            "io": "threads",
            "errorPolicy": "report",
            "bootOrder": 2,
            "serial": "SN1",
        },
    )
    assert disk.driver is not None
    assert (disk.driver.cache, disk.driver.io, disk.driver.error_policy) == (
        "writeback",
        "threads",
        "report",
    )
    assert disk.boot is not None
    assert (disk.boot.order, disk.serial) == (2, "SN1")


@pytest.mark.parametrize("serial", ["\r", "SN 1", "é", "x" * 37])
def test_a_serial_admission_would_refuse_is_refused_by_field(
    to_domain: Converter, serial: str
) -> None:
    """A control character would not survive the domain XML (found by the fuzz test)."""
    with pytest.raises(ConversionError) as caught:
        _one(to_domain, {"emptyDisk": {"capacity": "1Gi"}}, {"disk": {}, "serial": serial})
    assert caught.value.field == "spec.domain.devices.disks[0].serial"


def test_block_multi_queue_sets_queues_to_vcpus(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "cpu": {"cores": 3},
            "devices": {
                "blockMultiQueue": True,
                "disks": [{"name": "v", "disk": {"bus": "virtio"}}],
            },
        },
        volumes=[{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
    )
    driver = domain.devices.disks[0].driver
    assert driver is not None
    assert driver.queues == 3


def test_shareable_disk_forces_cache_none(to_domain: Converter) -> None:
    disk = _one(
        to_domain,
        {"emptyDisk": {"capacity": "1Gi"}},
        {"disk": {"bus": "virtio"}, "shareable": True},
    )
    assert disk.shareable is True
    assert disk.driver is not None
    assert disk.driver.cache == "none"


def _unknown_bus_vmi(make_vmi: Callable[..., VirtualMachineInstance]) -> VirtualMachineInstance:
    vmi = make_vmi(
        {"devices": {"disks": [{"name": "v", "disk": {"bus": "virtio"}}]}},
        volumes=[{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
    )
    devices = vmi.spec.domain.devices
    assert devices.disks is not None
    disk = devices.disks[0]
    assert disk.disk is not None
    # The typed loader refuses "ide" already; the converter must hold on its own too.
    bad = dataclasses.replace(disk, disk=dataclasses.replace(disk.disk, bus="ide"))  # type: ignore[arg-type]
    domain = dataclasses.replace(
        vmi.spec.domain, devices=dataclasses.replace(devices, disks=(bad,))
    )
    return dataclasses.replace(vmi, spec=dataclasses.replace(vmi.spec, domain=domain))


def test_unknown_bus_is_refused(make_vmi: Callable[..., VirtualMachineInstance]) -> None:
    with pytest.raises(ConversionError) as info:
        convert(_unknown_bus_vmi(make_vmi))
    assert info.value.field == "spec.domain.devices.disks[0].disk.bus"
    assert "virtio, sata, scsi, usb" in info.value.message


@pytest.mark.parametrize(
    ("disks", "volumes", "field"),
    [
        ([{"name": "v", "disk": {}}], [], "spec.domain.devices.disks[0].name"),
        (
            [{"name": "v", "disk": {}}, {"name": "v", "disk": {}}],
            [{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
            "spec.domain.devices.disks[1].name",
        ),
        (
            [{"name": "a", "bootOrder": 1}, {"name": "b", "bootOrder": 1}],
            [
                {"name": "a", "emptyDisk": {"capacity": "1Gi"}},
                {"name": "b", "emptyDisk": {"capacity": "1Gi"}},
            ],
            "spec.domain.devices.disks[1].bootOrder",
        ),
        (
            [{"name": "v", "disk": {}}],
            [{"name": "v", "containerDisk": {"image": "x", "path": "/disk/../../etc/passwd"}}],
            "spec.volumes[0].containerDisk.path",
        ),
        (
            [{"name": "v", "disk": {}}],
            [{"name": "v", "containerDisk": {"image": "x", "path": "disk/img"}}],
            "spec.volumes[0].containerDisk.path",
        ),
        (
            [{"name": "v", "disk": {}}],
            [{"name": "v", "hostDisk": {"path": "../x", "type": "Disk"}}],
            "spec.volumes[0].hostDisk.path",
        ),
        ([{"name": "v", "disk": {}}], [{"name": "v", "downwardMetrics": {}}], "spec.volumes[0]"),
        (
            [{"name": "v", "disk": {}}],
            [{"name": "v", "memoryDump": {"claimName": "c"}}],
            "spec.volumes[0]",
        ),
        (
            [{"name": "v", "lun": {}}],
            [{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
            "spec.domain.devices.disks[0].lun",
        ),
        (
            [{"name": "v", "cdrom": {"bus": "virtio"}}],
            [{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
            "spec.domain.devices.disks[0].cdrom.bus",
        ),
        (
            [{"name": "v", "disk": {}, "cdrom": {}}],
            [{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
            "spec.domain.devices.disks[0]",
        ),
        (
            [{"name": "v", "disk": {}}],
            [
                {"name": "v", "emptyDisk": {"capacity": "1Gi"}},
                {"name": "v", "emptyDisk": {"capacity": "1Gi"}},
            ],
            "spec.volumes[1].name",
        ),
        (
            [{"name": "../v", "disk": {}}],
            [{"name": "../v", "emptyDisk": {"capacity": "1Gi"}}],
            "spec.domain.devices.disks[0].name",
        ),
        ([{"name": "v", "disk": {}}], [{"name": "v"}], "spec.volumes[0]"),
        (
            [{"name": "v", "disk": {}, "shareable": True, "cache": "writeback"}],
            [{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
            "spec.domain.devices.disks[0].cache",
        ),
    ],
)
def test_bad_disks_are_refused_with_their_field(
    to_domain: Converter, disks: list[dict[str, Any]], volumes: list[dict[str, Any]], field: str
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"disks": disks}}, volumes=volumes)
    assert info.value.field == field
    assert str(info.value).startswith(field + ": ")


def test_pci_address_and_block_sizes(to_domain: Converter) -> None:
    disk = _one(
        to_domain,
        {"emptyDisk": {"capacity": "1Gi"}},
        {
            "disk": {"bus": "virtio", "pciAddress": "0000:81:01.0"},
            "blockSize": {"custom": {"logical": 512, "physical": 4096}},
        },
    )
    assert disk.address is not None
    assert (disk.address.type, disk.address.domain, disk.address.bus, disk.address.slot, disk.address.function) == (
        "pci", "0x0000", "0x81", "0x01", "0x0",
    )  # fmt: skip
    assert disk.blockio is not None
    assert (disk.blockio.logical_block_size, disk.blockio.physical_block_size) == (512, 4096)


@pytest.mark.parametrize(
    ("disks", "field"),
    [
        (
            [{"name": "a", "disk": {"bus": "virtio", "pciAddress": "81:01.0"}}],
            "spec.domain.devices.disks[0].disk.pciAddress",
        ),
        (
            [{"name": "a", "disk": {"bus": "sata", "pciAddress": "0000:81:01.0"}}],
            "spec.domain.devices.disks[0].disk.pciAddress",
        ),
        (
            [
                {"name": "a", "disk": {"bus": "virtio", "pciAddress": "0000:81:01.0"}},
                {"name": "b", "disk": {"bus": "virtio", "pciAddress": "0000:81:01.0"}},
            ],
            "spec.domain.devices.disks[1].disk.pciAddress",
        ),
        (
            [{"name": "a", "blockSize": {"custom": {"logical": 1000}}}],
            "spec.domain.devices.disks[0].blockSize.custom.logical",
        ),
        (
            [{"name": "a", "blockSize": {"matchVolume": {}}}],
            "spec.domain.devices.disks[0].blockSize.matchVolume",
        ),
    ],
)
def test_bad_addresses_and_sizes(
    to_domain: Converter, disks: list[dict[str, Any]], field: str
) -> None:
    volumes = [{"name": d["name"], "emptyDisk": {"capacity": "1Gi"}} for d in disks]
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"disks": disks}}, volumes=volumes)
    assert info.value.field == field


def test_boot_order_shared_with_interfaces(to_domain: Converter) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain(
            {
                "devices": {
                    "interfaces": [{"name": "default", "masquerade": {}, "bootOrder": 1}],
                    "disks": [{"name": "v", "bootOrder": 1}],
                }
            },
            networks=[{"name": "default", "pod": {}}],
            volumes=[{"name": "v", "emptyDisk": {"capacity": "1Gi"}}],
        )
    assert info.value.field == "spec.domain.devices.disks[0].bootOrder"
    assert "interface ua-default" in info.value.message
