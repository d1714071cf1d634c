"""``<os><type>``: architecture and machine type; SMBIOS from sysinfo."""

from __future__ import annotations

from ..errors import ConversionError
from ..schema import Domain, SMBios
from .context import Context

__all__ = ["DEFAULT_MACHINE_TYPE", "configure"]

DEFAULT_MACHINE_TYPE = "q35"
_ARCHITECTURES = {"": "x86_64", "amd64": "x86_64", "x86_64": "x86_64"}


def configure(ctx: Context, domain: Domain) -> None:
    """x86_64 only; machine type from ``spec.domain.machine.type`` (default q35)."""
    arch = ctx.vmi.spec.architecture or ""
    if arch not in _ARCHITECTURES:
        raise ConversionError(
            "spec.architecture",
            f"unsupported architecture {arch!r}; this converter builds amd64 guests",
        )
    machine = ctx.domain_spec.machine
    machine_type = (machine.type if machine is not None else None) or DEFAULT_MACHINE_TYPE
    if "q35" not in machine_type:
        raise ConversionError(
            "spec.domain.machine.type",
            f"unsupported machine type {machine_type!r}; use q35 or a versioned pc-q35-*",
        )
    domain.os.type.arch = _ARCHITECTURES[arch]
    domain.os.type.machine = machine_type
    domain.os.type.os = "hvm"
    domain.os.smbios = SMBios(mode="sysinfo")
