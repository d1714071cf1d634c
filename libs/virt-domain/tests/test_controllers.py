"""Controllers follow the devices."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import Domain

Converter = Callable[..., Domain]


def test_usb_none_and_virtio_serial_by_default(to_domain: Converter) -> None:
    assert [(c.type, c.model) for c in to_domain().devices.controllers] == [
        ("usb", "none"),
        ("virtio-serial", "virtio-non-transitional"),
    ]


def test_usb_disk_brings_xhci(to_domain: Converter) -> None:
    domain = to_domain(
        {"devices": {"disks": [{"name": "u", "disk": {"bus": "usb"}}]}},
        volumes=[{"name": "u", "emptyDisk": {"capacity": "1Gi"}}],
    )
    assert domain.devices.controllers[0].model == "qemu-xhci"
