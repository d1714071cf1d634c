"""TPM and sound devices."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain

Converter = Callable[..., Domain]


def test_tpm(to_domain: Converter) -> None:
    (tpm,) = to_domain({"devices": {"tpm": {"persistent": True}}}).devices.tpms
    assert (tpm.model, tpm.backend.type, tpm.backend.version, tpm.backend.persistent_state) == (
        "tpm-tis",
        "emulator",
        "2.0",
        "yes",
    )
    assert to_domain({"devices": {"tpm": {"enabled": False}}}).devices.tpms == []


def test_sound(to_domain: Converter) -> None:
    (card,) = to_domain({"devices": {"sound": {"name": "s"}}}).devices.sound_cards
    assert (card.model, card.alias.name if card.alias else None) == ("ich9", "ua-s")
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"sound": {"name": "s", "model": "sb16"}}})
    assert info.value.field == "spec.domain.devices.sound.model"
