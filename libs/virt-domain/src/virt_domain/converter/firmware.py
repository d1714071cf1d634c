"""Firmware: BIOS (optionally on serial), EFI with or without secure boot and
persistence, direct kernel boot; boot menu when starting paused."""

from __future__ import annotations

from kubevirt_api.models import EFI

from ..errors import ConversionError
from ..layout import check_image_path
from ..schema import Domain, Loader, NVRam, OSBios, OSBootMenu
from .context import Context

__all__ = ["configure", "uses_efi", "uses_secure_boot"]


def _efi(ctx: Context) -> EFI | None:
    firmware = ctx.domain_spec.firmware
    if firmware is None or firmware.bootloader is None:
        return None
    return firmware.bootloader.efi


def uses_efi(ctx: Context) -> bool:
    """The VMI boots through EFI firmware."""
    return _efi(ctx) is not None


def uses_secure_boot(ctx: Context) -> bool:
    """EFI with secure boot (on unless ``secureBoot: false``)."""
    efi = _efi(ctx)
    return efi is not None and efi.secure_boot is not False


def configure(ctx: Context, domain: Domain) -> None:
    """Fill ``<os>``'s loader, nvram, bios and kernel/initrd/cmdline; boot menu if paused."""
    if ctx.vmi.spec.start_strategy == "Paused":
        # A VMI started paused gets time to reach the boot menu once unpaused (10 s).
        domain.os.bootmenu = OSBootMenu(enable="yes", timeout=10000)
    firmware = ctx.domain_spec.firmware
    if firmware is None:
        return
    path = "spec.domain.firmware"
    bootloader = firmware.bootloader
    if bootloader is not None and bootloader.bios is not None and bootloader.efi is not None:
        raise ConversionError(f"{path}.bootloader", "choose one of bios or efi, not both")
    chosen_efi = _efi(ctx)
    if chosen_efi is not None:
        efi = ctx.layout.efi
        secure = uses_secure_boot(ctx)
        features = ctx.domain_spec.features
        if (
            secure
            and features is not None
            and features.smm is not None
            and features.smm.enabled is False
        ):
            raise ConversionError(
                "spec.domain.features.smm",
                "secure boot needs SMM: enable it or set secureBoot: false",
            )
        persistent = bool(chosen_efi.persistent)
        domain.os.loader = Loader(
            readonly="yes",
            secure="yes" if secure else "no",
            type="pflash",
            path=efi.secure_code if secure else efi.code,
        )
        domain.os.nvram = NVRam(
            template=efi.secure_vars if secure else efi.vars,
            path=ctx.layout.nvram(ctx.name, persistent),
        )
    elif bootloader is not None and bootloader.bios is not None and bootloader.bios.use_serial:
        domain.os.bios = OSBios(useserial="yes")
    kernel_boot = firmware.kernel_boot
    if kernel_boot is not None:
        container = kernel_boot.container
        if container is None:
            raise ConversionError(
                f"{path}.kernelBoot.container",
                "required: the kernel and initrd come from a kernel boot container",
            )
        if not container.kernel_path and not container.initrd_path:
            raise ConversionError(
                f"{path}.kernelBoot.container", "give kernelPath, initrdPath or both"
            )
        if container.kernel_path:
            check_image_path(f"{path}.kernelBoot.container.kernelPath", container.kernel_path)
            domain.os.kernel = ctx.layout.kernel_boot_artifact(container.kernel_path)
        if container.initrd_path:
            check_image_path(f"{path}.kernelBoot.container.initrdPath", container.initrd_path)
            domain.os.initrd = ctx.layout.kernel_boot_artifact(container.initrd_path)
        if kernel_boot.kernel_args:
            domain.os.cmdline = kernel_boot.kernel_args
