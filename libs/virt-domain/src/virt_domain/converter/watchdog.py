"""The i6300esb watchdog."""

from __future__ import annotations

from ..devices import Alias, Watchdog
from ..errors import ConversionError
from ..layout import check_component
from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Add the watchdog of ``devices.watchdog`` (x86: i6300esb, default action reset)."""
    source = ctx.devices.watchdog
    if source is None:
        return
    path = "spec.domain.devices.watchdog"
    check_component(f"{path}.name", source.name)
    if source.diag288 is not None:
        raise ConversionError(f"{path}.diag288", "diag288 is an s390x watchdog; use i6300esb")
    action = source.i6300esb.action if source.i6300esb is not None else None
    domain.devices.watchdogs.append(
        Watchdog(
            model="i6300esb",
            action=str(action) if action else "reset",
            alias=Alias.of_user_device(source.name),
        )
    )
