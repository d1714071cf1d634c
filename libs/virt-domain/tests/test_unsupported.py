"""What needs an absent component is refused by field, never silently dropped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


@pytest.mark.parametrize(
    ("domain", "spec", "metadata", "field"),
    [
        (
            {"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/x"}]}},
            {},
            None,
            "spec.domain.devices.gpus",
        ),
        (
            {"devices": {"hostDevices": [{"name": "h", "deviceName": "x/y"}]}},
            {},
            None,
            "spec.domain.devices.hostDevices",
        ),
        (
            {"devices": {"filesystems": [{"name": "f", "virtiofs": {}}]}},
            {},
            None,
            "spec.domain.devices.filesystems",
        ),
        (
            None,
            {},
            {"annotations": {"hooks.kubevirt.io/hookSidecars": "[]"}},
            "metadata.annotations[hooks.kubevirt.io/hookSidecars]",
        ),
    ],
)
def test_refused(
    to_domain: Converter,
    domain: dict[str, Any] | None,
    spec: dict[str, Any],
    metadata: dict[str, Any] | None,
    field: str,
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain(domain, metadata=metadata, **spec)
    assert info.value.field == field
    assert info.value.message
