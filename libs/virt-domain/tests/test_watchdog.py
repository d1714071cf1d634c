"""The i6300esb watchdog."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def test_watchdog_with_action(to_domain: Converter) -> None:
    (watchdog,) = to_domain(
        {"devices": {"watchdog": {"name": "w", "i6300esb": {"action": "poweroff"}}}}
    ).devices.watchdogs
    assert (watchdog.model, watchdog.action, watchdog.alias.name if watchdog.alias else None) == (
        "i6300esb",
        "poweroff",
        "ua-w",
    )


def test_default_action_is_reset(to_domain: Converter) -> None:
    (watchdog,) = to_domain({"devices": {"watchdog": {"name": "w"}}}).devices.watchdogs
    assert watchdog.action == "reset"


def test_s390x_watchdog_is_refused(to_domain: Converter) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"watchdog": {"name": "w", "diag288": {}}}})
    assert info.value.field == "spec.domain.devices.watchdog.diag288"
