"""Input devices: tablets on the virtio or USB bus."""

from __future__ import annotations

from ..devices import Alias, Input
from ..errors import ConversionError
from ..layout import check_component
from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """One ``<input>`` per ``devices.inputs`` entry, aliased ``ua-<name>``."""
    for index, source in enumerate(ctx.devices.inputs or ()):
        path = f"spec.domain.devices.inputs[{index}]"
        check_component(f"{path}.name", source.name)
        bus = str(source.bus) if source.bus else "usb"
        if bus not in ("virtio", "usb"):
            raise ConversionError(
                f"{path}.bus", f"unsupported input bus {bus!r}; valid: virtio, usb"
            )
        kind = str(source.type) if source.type else "tablet"
        if kind != "tablet":
            raise ConversionError(f"{path}.type", f"unsupported input type {kind!r}; valid: tablet")
        domain.devices.inputs.append(
            Input(
                type=kind,
                bus=bus,
                alias=Alias.of_user_device(source.name),
                model="virtio" if bus == "virtio" else None,
            )
        )
