"""Clock offset and timers."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import Domain

Converter = Callable[..., Domain]


def test_no_clock_element_without_a_clock(to_domain: Converter) -> None:
    assert to_domain().clock is None


def test_utc_resets_and_offset_adjusts(to_domain: Converter) -> None:
    reset = to_domain({"clock": {"utc": {}}}).clock
    shifted = to_domain({"clock": {"utc": {"offsetSeconds": 3600}}}).clock
    assert reset is not None
    assert shifted is not None
    assert (reset.offset, reset.adjustment) == ("utc", "reset")
    assert (shifted.offset, shifted.adjustment) == ("utc", "3600")


def test_timezone(to_domain: Converter) -> None:
    clock = to_domain({"clock": {"timezone": "Europe/Paris"}}).clock
    assert clock is not None
    assert (clock.offset, clock.timezone) == ("timezone", "Europe/Paris")


def test_timers(to_domain: Converter) -> None:
    clock = to_domain(
        {
            "clock": {
                "utc": {},
                "timer": {
                    "hpet": {"present": False},
                    "rtc": {"tickPolicy": "catchup"},
                    "hyperv": {},
                },
            }
        }
    ).clock
    assert clock is not None
    assert [(t.name, t.present, t.tickpolicy) for t in clock.timers] == [
        ("rtc", "yes", "catchup"),
        ("hpet", "no", None),
        ("hypervclock", "yes", None),
    ]
