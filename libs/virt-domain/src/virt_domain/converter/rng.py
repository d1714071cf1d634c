"""A virtio RNG fed from the host's /dev/urandom."""

from __future__ import annotations

from ..devices import Rng, RngBackend
from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Add the RNG device when ``devices.rng`` is present."""
    if ctx.devices.rng is None:
        return
    domain.devices.rng = Rng(
        model=ctx.virtio_model, backend=RngBackend(model="random", source="/dev/urandom")
    )
