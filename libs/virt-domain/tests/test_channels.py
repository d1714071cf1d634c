"""The guest agent channel."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import Domain

Converter = Callable[..., Domain]


def test_guest_agent_channel_and_its_controller(to_domain: Converter) -> None:
    domain = to_domain({"devices": {"autoattachSerialConsole": False}})
    (channel,) = domain.devices.channels
    assert channel.target is not None
    assert (channel.type, channel.target.name, channel.target.type, channel.source) == (
        "unix",
        "org.qemu.guest_agent.0",
        "virtio",
        None,
    )
    assert [c.type for c in domain.devices.controllers] == ["usb", "scsi", "virtio-serial"]
