"""The memory balloon (or ``model='none'`` when autoattach is off)."""

from __future__ import annotations

from ..devices import MemBalloon, MemBalloonStats
from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Add a virtio balloon with stats and free page reporting as the options say."""
    if ctx.devices.autoattach_mem_balloon is False:
        domain.devices.memballoon = MemBalloon(model="none")
        return
    period = ctx.options.memballoon_stats_period
    domain.devices.memballoon = MemBalloon(
        model=ctx.virtio_model,
        stats=MemBalloonStats(period=period) if period > 0 else None,
        free_page_reporting="on" if ctx.options.free_page_reporting else "off",
    )
