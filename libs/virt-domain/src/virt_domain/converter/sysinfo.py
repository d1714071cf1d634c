"""SMBIOS sysinfo: the firmware UUID and serial, cluster SMBIOS strings, chassis."""

from __future__ import annotations

from ..schema import Domain, SysInfo, SysInfoEntry, SysInfoSection
from .context import Context
from .metadata import firmware_uuid

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Fill ``<sysinfo type='smbios'>``; the guest reads its UUID and serial from it."""
    firmware = ctx.domain_spec.firmware
    system = [SysInfoEntry(name="uuid", value=firmware_uuid(ctx))]
    if firmware is not None and firmware.serial:
        system.append(SysInfoEntry(name="serial", value=firmware.serial))
    smbios = ctx.options.smbios
    if smbios is not None:
        system.extend(
            SysInfoEntry(name=name, value=value)
            for name, value in (
                ("manufacturer", smbios.manufacturer),
                ("family", smbios.family),
                ("product", smbios.product),
                ("sku", smbios.sku),
                ("version", smbios.version),
            )
        )
    chassis = ctx.domain_spec.chassis
    # libvirt's schema refuses empty sections, so only non-empty ones are written.
    domain.sysinfo = SysInfo(
        type="smbios",
        system=SysInfoSection(entries=system),
        chassis=None
        if chassis is None
        else SysInfoSection(
            entries=[
                SysInfoEntry(name="manufacturer", value=chassis.manufacturer or ""),
                SysInfoEntry(name="version", value=chassis.version or ""),
                SysInfoEntry(name="serial", value=chassis.serial or ""),
                SysInfoEntry(name="asset", value=chassis.asset or ""),
                SysInfoEntry(name="sku", value=chassis.sku or ""),
            ]
        ),
    )
