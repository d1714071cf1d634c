"""Firmware: BIOS, EFI (secure boot, persistence), direct kernel boot."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain, LauncherLayout

Converter = Callable[..., Domain]

LAYOUT = LauncherLayout()


def test_no_firmware_means_seabios_defaults(to_domain: Converter) -> None:
    domain = to_domain()
    assert (domain.os.loader, domain.os.nvram, domain.os.bios, domain.os.kernel) == (
        None,
        None,
        None,
        None,
    )


def test_bios_on_serial(to_domain: Converter) -> None:
    domain = to_domain({"firmware": {"bootloader": {"bios": {"useSerial": True}}}})
    assert domain.os.bios is not None
    assert domain.os.bios.useserial == "yes"


def test_efi_without_secure_boot(to_domain: Converter) -> None:
    domain = to_domain({"firmware": {"bootloader": {"efi": {"secureBoot": False}}}})
    assert domain.os.loader is not None
    assert (domain.os.loader.path, domain.os.loader.secure, domain.os.loader.type) == (
        LAYOUT.efi.code,
        "no",
        "pflash",
    )
    assert domain.os.nvram is not None
    assert domain.os.nvram.template == LAYOUT.efi.vars
    assert domain.os.nvram.path == f"{LAYOUT.nvram_dir}/vm_VARS.fd"
    assert domain.features is not None
    assert domain.features.smm is False


def test_efi_secure_boot_is_the_default_and_turns_smm_on(to_domain: Converter) -> None:
    domain = to_domain({"firmware": {"bootloader": {"efi": {}}}})
    assert domain.os.loader is not None
    assert (domain.os.loader.path, domain.os.loader.secure) == (LAYOUT.efi.secure_code, "yes")
    assert domain.os.nvram is not None
    assert domain.os.nvram.template == LAYOUT.efi.secure_vars
    assert domain.features is not None
    assert domain.features.smm is True


def test_persistent_efi_keeps_vars_in_the_persistent_dir(to_domain: Converter) -> None:
    domain = to_domain({"firmware": {"bootloader": {"efi": {"persistent": True}}}})
    assert domain.os.nvram is not None
    assert domain.os.nvram.path == f"{LAYOUT.persistent_nvram_dir}/vm_VARS.fd"


def test_efi_paths_follow_the_layout(to_domain: Converter) -> None:
    layout = LauncherLayout(nvram_dir="/run/x/nvram")
    domain = to_domain({"firmware": {"bootloader": {"efi": {"secureBoot": False}}}}, layout=layout)
    assert domain.os.nvram is not None
    assert domain.os.nvram.path == "/run/x/nvram/vm_VARS.fd"


def test_kernel_boot(to_domain: Converter) -> None:
    domain = to_domain(
        {
            "firmware": {
                "kernelBoot": {
                    "kernelArgs": "console=ttyS0",
                    "container": {
                        "image": "k:1",
                        "kernelPath": "/boot/vmlinuz",
                        "initrdPath": "/boot/initrd.img",
                    },
                }
            }
        },
        layout=LauncherLayout(kernel_boot_dir="/kb"),
    )
    assert (domain.os.kernel, domain.os.initrd, domain.os.cmdline) == (
        "/kb/boot/vmlinuz",
        "/kb/boot/initrd.img",
        "console=ttyS0",
    )


@pytest.mark.parametrize(
    ("container", "field"),
    [
        (
            {"image": "k", "kernelPath": "/boot/../../etc/shadow"},
            "spec.domain.firmware.kernelBoot.container.kernelPath",
        ),
        (
            {"image": "k", "kernelPath": "boot/vmlinuz"},
            "spec.domain.firmware.kernelBoot.container.kernelPath",
        ),
        (
            {"image": "k", "kernelPath": "/vmlinuz", "initrdPath": "../initrd"},
            "spec.domain.firmware.kernelBoot.container.initrdPath",
        ),
        ({"image": "k"}, "spec.domain.firmware.kernelBoot.container"),
    ],
)
def test_bad_kernel_boot_paths_are_refused(
    to_domain: Converter, container: dict[str, str], field: str
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain({"firmware": {"kernelBoot": {"container": container}}})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("domain", "field"),
    [
        (
            {"firmware": {"kernelBoot": {"kernelArgs": "x"}}},
            "spec.domain.firmware.kernelBoot.container",
        ),
        (
            {"firmware": {"bootloader": {"efi": {}}}, "features": {"smm": {"enabled": False}}},
            "spec.domain.features.smm",
        ),
        ({"firmware": {"bootloader": {"efi": {}, "bios": {}}}}, "spec.domain.firmware.bootloader"),
    ],
)
def test_inconsistent_firmware_is_refused(
    to_domain: Converter, domain: dict[str, object], field: str
) -> None:
    with pytest.raises(ConversionError) as info:
        to_domain(domain)
    assert info.value.field == field


def test_paused_start_gets_a_boot_menu(to_domain: Converter) -> None:
    menu = to_domain(startStrategy="Paused").os.bootmenu
    assert menu is not None
    assert (menu.enable, menu.timeout) == ("yes", 10000)
    assert to_domain().os.bootmenu is None
