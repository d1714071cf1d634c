"""The QEMU guest agent's virtio-serial channel."""

from __future__ import annotations

from ..devices import Channel, ChannelTarget
from ..schema import Domain
from .context import Context

__all__ = ["GUEST_AGENT_CHANNEL", "configure"]

GUEST_AGENT_CHANNEL = "org.qemu.guest_agent.0"


def configure(ctx: Context, domain: Domain) -> None:
    """Add the guest agent channel; libvirt picks the host socket path."""
    domain.devices.channels.append(
        Channel(type="unix", target=ChannelTarget(name=GUEST_AGENT_CHANNEL, type="virtio"))
    )
