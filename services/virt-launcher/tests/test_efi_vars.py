"""The EFI variable store's directory is made before the domain is defined; a persistent
store already on the backend-storage claim must be a regular file (no link followed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain.layout import LauncherLayout
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.disks import prepare_efi_vars


def _vmi(**efi: Any) -> VirtualMachineInstance:
    return load(
        VirtualMachineInstance,
        {
            "metadata": {"name": "a", "namespace": "ns", "uid": "u"},
            "spec": {"domain": {"devices": {}, "firmware": {"bootloader": {"efi": efi}}}},
        },
    )


def _layout(tmp_path: Path) -> LauncherLayout:
    return LauncherLayout(
        nvram_dir=str(tmp_path / "private" / "nvram"),
        persistent_nvram_dir=str(tmp_path / "state"),
    )


def test_the_stores_directory_is_made_and_nothing_else(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    prepare_efi_vars(_vmi(secureBoot=False), layout)
    assert os.path.isdir(layout.nvram_dir)
    assert os.listdir(layout.nvram_dir) == []  # libvirt copies the template itself
    assert not os.path.exists(layout.persistent_nvram_dir)


def test_a_persistent_store_is_kept(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    os.makedirs(layout.persistent_nvram_dir)
    store = Path(layout.nvram("a", persistent=True))
    store.write_bytes(b"vars")
    prepare_efi_vars(_vmi(secureBoot=False, persistent=True), layout)
    assert store.read_bytes() == b"vars"


def test_a_link_in_place_of_the_persistent_store_is_refused(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    os.makedirs(layout.persistent_nvram_dir)
    secret = tmp_path / "token"
    secret.write_text("not for the guest")
    os.symlink(secret, layout.nvram("a", persistent=True))
    with pytest.raises(VmiRejectedError) as refused:
        prepare_efi_vars(_vmi(secureBoot=False, persistent=True), layout)
    assert refused.value.field == "spec.domain.firmware.bootloader.efi.persistent"


def test_a_bios_vmi_needs_nothing(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    vmi = load(
        VirtualMachineInstance,
        {"metadata": {"name": "a"}, "spec": {"domain": {"devices": {}}}},
    )
    prepare_efi_vars(vmi, layout)
    assert not os.path.exists(layout.nvram_dir)
