"""The memory balloon."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import ConverterOptions, Domain

Converter = Callable[..., Domain]


def test_balloon_with_stats_and_free_page_reporting(to_domain: Converter) -> None:
    balloon = to_domain(options=ConverterOptions(memballoon_stats_period=5)).devices.memballoon
    assert balloon is not None
    assert balloon.stats is not None
    assert (balloon.model, balloon.stats.period, balloon.free_page_reporting) == (
        "virtio-non-transitional",
        5,
        "on",
    )


def test_balloon_off(to_domain: Converter) -> None:
    balloon = to_domain({"devices": {"autoattachMemBalloon": False}}).devices.memballoon
    assert balloon is not None
    assert (balloon.model, balloon.stats) == ("none", None)


def test_no_stats_when_period_is_zero(to_domain: Converter) -> None:
    balloon = to_domain(
        options=ConverterOptions(memballoon_stats_period=0, free_page_reporting=False)
    ).devices.memballoon
    assert balloon is not None
    assert (balloon.stats, balloon.free_page_reporting) == (None, "off")
