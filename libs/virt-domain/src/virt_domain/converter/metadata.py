"""Name, UUID and the KubeVirt metadata block of the domain."""

from __future__ import annotations

import uuid

from ..errors import ConversionError
from ..schema import QEMU_NAMESPACE, Domain, GracePeriodMetadata, KubeVirtMetadata, Metadata
from .context import Context

__all__ = ["configure", "derived_firmware_uuid", "firmware_uuid"]

# KubeVirt derives a VM's firmware UUID from its name in this namespace; using the same
# one keeps a guest's SMBIOS UUID stable when it moves between implementations.
_FIRMWARE_UUID_NAMESPACE = uuid.UUID("6a1a24a1-4061-4607-8bf4-a3963d0c5895")

_DEFAULT_GRACE_PERIOD = 30


def derived_firmware_uuid(name: str) -> str:
    """The firmware UUID of a VMI named ``name`` that does not set one."""
    return str(uuid.uuid5(_FIRMWARE_UUID_NAMESPACE, name))


def firmware_uuid(ctx: Context) -> str:
    """``spec.domain.firmware.uuid``, else one derived from the VMI name (stable)."""
    firmware = ctx.domain_spec.firmware
    if firmware is not None and firmware.uuid:
        try:
            return str(uuid.UUID(firmware.uuid))
        except ValueError:
            raise ConversionError(
                "spec.domain.firmware.uuid", f"{firmware.uuid!r} is not a UUID"
            ) from None
    return derived_firmware_uuid(ctx.name)


def configure(ctx: Context, domain: Domain) -> None:
    """Name the domain ``<namespace>_<name>``, set its UUID and the KubeVirt metadata."""
    domain.name = f"{ctx.namespace}_{ctx.name}"
    domain.xmlns_qemu = QEMU_NAMESPACE
    domain.uuid = firmware_uuid(ctx)
    grace = ctx.vmi.spec.termination_grace_period_seconds
    domain.metadata = Metadata(
        kubevirt=KubeVirtMetadata(
            uid=ctx.uid,
            grace_period=GracePeriodMetadata(
                deletion_grace_period_seconds=_DEFAULT_GRACE_PERIOD if grace is None else grace
            ),
        )
    )
