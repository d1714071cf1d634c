"""``<clock>``: UTC (with optional offset) or a named timezone, and timers."""

from __future__ import annotations

from ..schema import Clock, Domain, Timer
from .context import Context

__all__ = ["configure"]


def _yes_no(value: bool | None) -> str:
    return "no" if value is False else "yes"


def configure(ctx: Context, domain: Domain) -> None:
    """Translate ``spec.domain.clock``; no clock element when the VMI has none."""
    source = ctx.domain_spec.clock
    if source is None:
        return
    clock = Clock()
    if source.utc is not None:
        clock.offset = "utc"
        offset = source.utc.offset_seconds
        clock.adjustment = "reset" if offset is None else str(offset)
    elif source.timezone:
        clock.offset = "timezone"
        clock.timezone = source.timezone
    timer = source.timer
    if timer is not None:
        if timer.rtc is not None:
            clock.timers.append(
                Timer(
                    name="rtc",
                    tickpolicy=timer.rtc.tick_policy or None,
                    present=_yes_no(timer.rtc.present),
                    track=timer.rtc.track or None,
                )
            )
        if timer.pit is not None:
            clock.timers.append(
                Timer(
                    name="pit",
                    tickpolicy=timer.pit.tick_policy or None,
                    present=_yes_no(timer.pit.present),
                )
            )
        if timer.kvm is not None:
            clock.timers.append(Timer(name="kvmclock", present=_yes_no(timer.kvm.present)))
        if timer.hpet is not None:
            clock.timers.append(
                Timer(
                    name="hpet",
                    tickpolicy=timer.hpet.tick_policy or None,
                    present=_yes_no(timer.hpet.present),
                )
            )
        if timer.hyperv is not None:
            clock.timers.append(Timer(name="hypervclock", present=_yes_no(timer.hyperv.present)))
    domain.clock = clock
