"""Controllers follow the devices."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import Domain

Converter = Callable[..., Domain]


def test_usb_none_scsi_and_virtio_serial_by_default(to_domain: Converter) -> None:
    assert [(c.type, c.index, c.model) for c in to_domain().devices.controllers] == [
        ("usb", "0", "none"),
        ("scsi", "0", "virtio-non-transitional"),  # for hotplugged disks, as upstream
        ("virtio-serial", "0", "virtio-non-transitional"),
    ]


def test_no_scsi_controller_when_hotplug_is_disabled(to_domain: Converter) -> None:
    domain = to_domain({"devices": {"disableHotplug": True}})
    assert [c.type for c in domain.devices.controllers] == ["usb", "virtio-serial"]


def test_a_scsi_disk_brings_the_controller_even_without_hotplug(to_domain: Converter) -> None:
    domain = to_domain(
        {"devices": {"disableHotplug": True, "disks": [{"name": "s", "disk": {"bus": "scsi"}}]}},
        volumes=[{"name": "s", "emptyDisk": {"capacity": "1Gi"}}],
    )
    assert [c.type for c in domain.devices.controllers] == ["usb", "scsi", "virtio-serial"]


def test_the_scsi_controller_follows_virtio_transitional(to_domain: Converter) -> None:
    domain = to_domain({"devices": {"useVirtioTransitional": True}})
    scsi = next(c for c in domain.devices.controllers if c.type == "scsi")
    assert scsi.model == "virtio-transitional"


def test_usb_disk_brings_xhci(to_domain: Converter) -> None:
    domain = to_domain(
        {"devices": {"disks": [{"name": "u", "disk": {"bus": "usb"}}]}},
        volumes=[{"name": "u", "emptyDisk": {"capacity": "1Gi"}}],
    )
    assert domain.devices.controllers[0].model == "qemu-xhci"
