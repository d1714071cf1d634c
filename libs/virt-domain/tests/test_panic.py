"""Panic devices."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def test_panic_devices(to_domain: Converter) -> None:
    domain = to_domain({"devices": {"panicDevices": [{"model": "hyperv"}, {"model": "isa"}]}})
    assert [p.model for p in domain.devices.panic_devices] == ["hyperv", "isa"]
    assert '<panic model="hyperv"></panic>' in domain.to_xml()


@pytest.mark.parametrize("model", ["s390", "pvpanic"])
def test_unknown_or_unavailable_panic_model(to_domain: Converter, model: str) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"panicDevices": [{"model": model}]}})
    assert info.value.field == "spec.domain.devices.panicDevices[0].model"
