"""Persistent TPM state: libvirt's swtpm dir becomes a link into the backend-storage claim;
a link the user's pods put in place of the claim's directory is refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain.layout import LauncherLayout
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.disks import prepare_tpm_state
from virt_launcher.libvirtd_start import LibvirtdPaths, prepare_files


def _vmi(**tpm: Any) -> VirtualMachineInstance:
    return load(
        VirtualMachineInstance,
        {
            "metadata": {"name": "a", "namespace": "ns", "uid": "u"},
            "spec": {"domain": {"devices": {"tpm": tpm}}},
        },
    )


def _layout(tmp_path: Path) -> LauncherLayout:
    return LauncherLayout(
        persistent_swtpm_dir=str(tmp_path / "claim" / "swtpm"),
        libvirt_swtpm_dir=str(tmp_path / "libvirt" / "libvirt" / "qemu" / "swtpm"),
    )


def test_libvirts_swtpm_dir_links_to_the_claim(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    os.makedirs(layout.libvirt_swtpm_dir)  # libvirtd made it, empty, at start-up
    prepare_tpm_state(_vmi(persistent=True), layout)
    assert os.readlink(layout.libvirt_swtpm_dir) == layout.persistent_swtpm_dir
    assert os.path.isdir(layout.persistent_swtpm_dir)
    prepare_tpm_state(_vmi(persistent=True), layout)  # again: unchanged
    assert os.readlink(layout.libvirt_swtpm_dir) == layout.persistent_swtpm_dir


def test_a_tpm_without_persistence_keeps_its_state_in_the_pod(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    prepare_tpm_state(_vmi(), layout)
    assert not os.path.lexists(layout.libvirt_swtpm_dir)
    assert not os.path.exists(layout.persistent_swtpm_dir)


def test_a_link_in_place_of_the_claims_state_dir_is_refused(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    os.makedirs(tmp_path / "claim")
    os.symlink(tmp_path, layout.persistent_swtpm_dir)
    with pytest.raises(VmiRejectedError) as refused:
        prepare_tpm_state(_vmi(persistent=True), layout)
    assert refused.value.field == "spec.domain.devices.tpm.persistent"
    assert not os.path.lexists(layout.libvirt_swtpm_dir)


def test_swtpm_setup_finds_a_local_ca_the_launcher_can_write(tmp_path: Path) -> None:
    paths = LibvirtdPaths(tmp_path / "libvirt")
    prepare_files(paths, "3:*", None)
    for config in (paths.root / "swtpm_setup.conf", paths.root / ".config" / "swtpm_setup.conf"):
        assert (
            f"create_certs_tool_config = {paths.root / 'swtpm-localca.conf'}" in config.read_text()
        )
    ca = (paths.root / "swtpm-localca.conf").read_text()
    assert f"statedir = {paths.root / 'swtpm-localca'}\n" in ca
    assert (paths.root / "swtpm-localca").is_dir()
