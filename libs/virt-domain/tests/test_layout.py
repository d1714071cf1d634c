"""Path checks of the launcher layout."""

from __future__ import annotations

import pytest
from virt_domain import ConversionError, LauncherLayout
from virt_domain.layout import check_component, check_image_path


@pytest.mark.parametrize("value", ["disk0", "my_volume", "a.b-c", "0"])
def test_good_components(value: str) -> None:
    assert check_component("f", value) == value


@pytest.mark.parametrize("value", ["", "..", "a/b", "-x", "x..y", ".hidden", "a\x00b"])
def test_bad_components(value: str) -> None:
    with pytest.raises(ConversionError):
        check_component("f", value)


@pytest.mark.parametrize("value", ["/boot/vmlinuz", "/disk/img.qcow2"])
def test_good_image_paths(value: str) -> None:
    assert check_image_path("f", value) == value


@pytest.mark.parametrize(
    "value", ["boot/vmlinuz", "/boot/../etc", "/./x", "/boot/", "//x", "/a\x00"]
)
def test_bad_image_paths(value: str) -> None:
    with pytest.raises(ConversionError) as info:
        check_image_path("spec.x", value)
    assert info.value.field == "spec.x"


def test_layout_paths_compose_from_base_dirs() -> None:
    layout = LauncherLayout(
        private_dir="/p", ephemeral_dir="/e", container_disks_dir="/c", cloud_init_dir="/ci"
    )
    assert layout.serial_socket("u") == "/p/u/virt-serial0"
    assert layout.vnc_socket("u") == "/p/u/virt-vnc"
    assert layout.overlay_image("v") == "/e/disk-data/v/disk.qcow2"
    assert layout.container_disk_image("v", "/disk/x.img") == "/c/v/disk/x.img"
    assert layout.cloud_init_iso("ns", "n", config_drive=True) == "/ci/ns/n/configdrive.iso"
