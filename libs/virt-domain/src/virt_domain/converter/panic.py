"""Panic notifier devices (pvpanic, hyperv)."""

from __future__ import annotations

from ..devices import PanicDevice
from ..errors import ConversionError
from ..schema import Domain
from .context import Context

__all__ = ["configure"]

_MODELS = ("hyperv", "isa")
# The launcher's libvirt (Debian 12: 9.0) predates the pvpanic PCI model.
_UNAVAILABLE = {"pvpanic": "the launcher's libvirt (9.0) has no pvpanic model; use isa"}


def configure(ctx: Context, domain: Domain) -> None:
    """One ``<panic>`` per ``devices.panicDevices`` entry."""
    for index, device in enumerate(ctx.devices.panic_devices or ()):
        field = f"spec.domain.devices.panicDevices[{index}].model"
        if device.model in _UNAVAILABLE:
            raise ConversionError(field, _UNAVAILABLE[device.model])
        if device.model is not None and device.model not in _MODELS:
            raise ConversionError(
                field,
                f"unsupported panic device model {device.model!r}; valid: {', '.join(_MODELS)}",
            )
        domain.devices.panic_devices.append(PanicDevice(model=device.model))
