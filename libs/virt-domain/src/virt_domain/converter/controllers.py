"""Controllers: USB (only when something sits on it), SCSI, virtio-serial.

The SCSI controller is there unless ``devices.disableHotplug`` (as upstream): hotplugged
disks go on its bus by default, and a controller cannot be added to a running guest.
"""

from __future__ import annotations

from ..devices import Controller
from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Add the controllers the converted devices need (run after disks and inputs)."""
    buses = {disk.target.bus for disk in domain.devices.disks if disk.target is not None}
    inputs = {device.bus for device in domain.devices.inputs}
    usb = "usb" in buses or "usb" in inputs
    devices = domain.devices.controllers
    devices.append(Controller(type="usb", index="0", model="qemu-xhci" if usb else "none"))
    if "scsi" in buses or ctx.devices.disable_hotplug is not True:
        devices.append(Controller(type="scsi", index="0", model=ctx.virtio_model))
    if ctx.devices.autoattach_serial_console is not False or domain.devices.channels:
        devices.append(Controller(type="virtio-serial", index="0", model=ctx.virtio_model))
