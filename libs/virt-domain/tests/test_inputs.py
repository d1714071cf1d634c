"""Input devices."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def test_tablets_on_virtio_and_usb(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "devices": {
                "inputs": [
                    {"name": "t0", "type": "tablet", "bus": "virtio"},
                    {"name": "t1", "type": "tablet"},
                ]
            }
        }
    )
    assert [
        (i.type, i.bus, i.model, i.alias.name if i.alias else None) for i in domain.devices.inputs
    ] == [
        ("tablet", "virtio", "virtio", "ua-t0"),
        ("tablet", "usb", None, "ua-t1"),
    ]
    # A USB input needs a USB controller.
    assert domain.devices.controllers[0].model == "qemu-xhci"


def test_keyboard_is_refused(to_domain: Converter) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"inputs": [{"name": "k", "type": "keyboard", "bus": "usb"}]}})
    assert info.value.field == "spec.domain.devices.inputs[0].type"
