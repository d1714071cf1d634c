"""An emulated TPM 2.0 (swtpm, run by libvirt)."""

from __future__ import annotations

from ..devices import TPM, TPMBackend
from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Add a TIS TPM 2.0 when ``devices.tpm`` is present (and not disabled)."""
    source = ctx.devices.tpm
    if source is None or source.enabled is False:
        return
    domain.devices.tpms.append(
        TPM(
            model="tpm-tis",
            backend=TPMBackend(
                type="emulator",
                version="2.0",
                persistent_state="yes" if source.persistent else None,
            ),
        )
    )
