"""Domain type: ``kvm``, or ``qemu`` (TCG) when the options say to emulate."""

from __future__ import annotations

from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Choose the accelerator from `ConverterOptions.use_emulation` (never probed here)."""
    domain.type = "qemu" if ctx.options.use_emulation else "kvm"
