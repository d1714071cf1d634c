"""A sound card (ich9 or ac97)."""

from __future__ import annotations

from ..devices import Alias, SoundCard
from ..errors import ConversionError
from ..layout import check_component
from ..schema import Domain
from .context import Context

__all__ = ["configure"]

_MODELS = ("ich9", "ac97")


def configure(ctx: Context, domain: Domain) -> None:
    """Add the sound card of ``devices.sound`` (default ich9), aliased ``ua-<name>``."""
    source = ctx.devices.sound
    if source is None:
        return
    path = "spec.domain.devices.sound"
    name = check_component(f"{path}.name", source.name)
    model = source.model or "ich9"
    if model not in _MODELS:
        raise ConversionError(
            f"{path}.model", f"unknown model {model!r}; valid: {', '.join(_MODELS)}"
        )
    domain.devices.sound_cards.append(SoundCard(alias=Alias.of_user_device(name), model=model))
