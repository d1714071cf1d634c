"""A containerDisk's image file: the init container's copy at `<volume>/disk.img`, or, when
the image came as an image volume (the ImageVolume gate), the image's own file under
`<volume>/disk/`; the domain's backing file and the overlay name the same file."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConverterOptions
from virt_domain.launcher_pod import LauncherDirs
from virt_domain.layout import LauncherLayout
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.converter import converter_builder
from virt_launcher.disks import container_disk_images


def _vmi_body(**container_disk: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u"},
        "spec": {
            "domain": {
                "devices": {"disks": [{"name": "root", "disk": {}}]},
                "memory": {"guest": "64Mi"},
            },
            "volumes": [{"name": "root", "containerDisk": {"image": "x:1", **container_disk}}],
        },
    }


def _dirs(tmp_path: Path) -> LauncherDirs:
    return LauncherDirs(
        sockets_dir=str(tmp_path / "sockets"),
        private_dir=str(tmp_path / "private"),
        ephemeral_disk_dir=str(tmp_path / "ephemeral"),
        container_disk_dir=str(tmp_path / "container-disks"),
        kernel_boot_dir=str(tmp_path / "kernel-boot"),
        libvirt_dir=str(tmp_path / "libvirt"),
    )


def _backing_file(xml: str) -> str:
    source = ET.fromstring(xml).find("./devices/disk/backingStore/source")
    assert source is not None
    return source.attrib["file"]


def _raw_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * 65536)
    return path


def test_an_image_volume_s_disk_file_backs_the_overlay(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    # As an image volume shows upstream's containerDisk layout: /disk/<its own name>.
    image = _raw_file(tmp_path / "container-disks" / "root" / "disk" / "cirros.img")
    xml = converter_builder(dirs)(_vmi_body(), ConverterOptions())
    assert _backing_file(xml) == str(image)
    overlay = Path(LauncherLayout.for_launcher(dirs).overlay_image("root"))
    assert str(image).encode() in overlay.read_bytes()[:4096]


def test_a_copy_at_disk_img_wins_and_a_path_is_taken_as_given(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    copy = _raw_file(tmp_path / "container-disks" / "root" / "disk.img")
    _raw_file(tmp_path / "container-disks" / "root" / "disk" / "other.img")
    assert _backing_file(converter_builder(dirs)(_vmi_body(), ConverterOptions())) == str(copy)
    with_path = _vmi_body(path="/images/d.img")
    at_path = _raw_file(tmp_path / "container-disks" / "root" / "images" / "d.img")
    layout = LauncherLayout.for_launcher(dirs)
    assert container_disk_images(load(VirtualMachineInstance, with_path), layout) == {}
    shutil.rmtree(tmp_path / "ephemeral")
    assert _backing_file(converter_builder(dirs)(with_path, ConverterOptions())) == str(at_path)


def test_a_symlink_in_the_image_s_disk_dir_is_not_taken(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    disk_dir = tmp_path / "container-disks" / "root" / "disk"
    disk_dir.mkdir(parents=True)
    (disk_dir / "a.img").symlink_to(_raw_file(tmp_path / "secret"))
    layout = LauncherLayout.for_launcher(dirs)
    assert container_disk_images(load(VirtualMachineInstance, _vmi_body()), layout) == {}
    with pytest.raises(VmiRejectedError) as err:
        converter_builder(dirs)(_vmi_body(), ConverterOptions())
    assert err.value.field == "spec.volumes[0].containerDisk"
    assert "/disk/" in err.value.message
