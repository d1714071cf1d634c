"""Which hotplugged volumes are in the pod (a mount point and a regular file), and what a
running domain must attach and detach to match the domain just built."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConverterOptions, convert_to_xml
from virt_domain.layout import LauncherLayout
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.disks import check_storage_images, prepare_claim_images
from virt_launcher.hotplug import hotplug_changes, mount_points, present_hotplug_volumes

MOUNTINFO_LINE = "1503 1490 0:52 /disk.img {point} rw,relatime master:1 - ext4 /dev/vda1 rw"


def _vmi(*hotplugged: str, plain: tuple[str, ...] = ()) -> VirtualMachineInstance:
    names = [*hotplugged, *plain]
    return load(
        VirtualMachineInstance,
        {
            "metadata": {"name": "vm", "namespace": "ns", "uid": "u"},
            "spec": {
                "domain": {
                    "memory": {"guest": "64Mi"},
                    "devices": {"disks": [{"name": n, "disk": {"bus": "scsi"}} for n in names]},
                },
                "volumes": [
                    {
                        "name": n,
                        "persistentVolumeClaim": {
                            "claimName": f"c-{n}",
                            "hotpluggable": n in hotplugged,
                        },
                    }
                    for n in names
                ],
            },
        },
    )


@pytest.fixture
def layout(tmp_path: Path) -> LauncherLayout:
    (tmp_path / "hotplug").mkdir()
    return LauncherLayout(
        private_dir=str(tmp_path / "private"), hotplug_dir=str(tmp_path / "hotplug")
    )


def _mountinfo(tmp_path: Path, *points: str) -> str:
    path = tmp_path / "mountinfo"
    path.write_text("".join(MOUNTINFO_LINE.format(point=p) + "\n" for p in points))
    return str(path)


def test_mount_points_undo_the_kernels_octal_escapes() -> None:
    text = "\n".join(
        [
            MOUNTINFO_LINE.format(point="/var/run/kubevirt/hotplug-disks/a.img"),
            MOUNTINFO_LINE.format(point=r"/mnt/with\040space"),
            "garbage",
        ]
    )
    assert mount_points(text) == {"/var/run/kubevirt/hotplug-disks/a.img", "/mnt/with space"}


def test_a_mounted_regular_image_is_present(tmp_path: Path, layout: LauncherLayout) -> None:
    for name in ("a", "b"):
        Path(layout.hotplug_disk_image(name)).write_bytes(b"")
    # Only a.img is a mount point: b.img is a file somebody left, not the handler's mount.
    info = _mountinfo(tmp_path, layout.hotplug_disk_image("a"))
    assert present_hotplug_volumes(_vmi("a", "b"), layout, info) == {"a"}


def test_the_directory_is_compared_resolved(tmp_path: Path) -> None:
    real = tmp_path / "run" / "hotplug"
    real.mkdir(parents=True)
    (tmp_path / "var-run").symlink_to(tmp_path / "run")  # as /var/run -> /run in images
    layout = LauncherLayout(hotplug_dir=str(tmp_path / "var-run" / "hotplug"))
    (real / "a.img").write_bytes(b"")
    info = _mountinfo(tmp_path, str(real / "a.img"))
    assert present_hotplug_volumes(_vmi("a"), layout, info) == {"a"}


def test_a_link_or_a_directory_is_never_present(tmp_path: Path, layout: LauncherLayout) -> None:
    secret = tmp_path / "token"
    secret.write_text("s")
    os.symlink(secret, layout.hotplug_disk_image("link"))
    os.mkdir(layout.hotplug_disk_image("dir"))
    info = _mountinfo(tmp_path, layout.hotplug_disk_image("link"), layout.hotplug_disk_image("dir"))
    assert present_hotplug_volumes(_vmi("link", "dir"), layout, info) == frozenset()


def test_only_hotpluggable_volumes_are_looked_for(tmp_path: Path, layout: LauncherLayout) -> None:
    Path(layout.hotplug_disk_image("plain")).write_bytes(b"")
    info = _mountinfo(tmp_path, layout.hotplug_disk_image("plain"))
    assert present_hotplug_volumes(_vmi(plain=("plain",)), layout, info) == frozenset()


def test_no_mountinfo_means_none_present(tmp_path: Path, layout: LauncherLayout) -> None:
    assert present_hotplug_volumes(_vmi("a"), layout, str(tmp_path / "absent")) == frozenset()


def test_the_launcher_makes_no_image_for_a_hotplugged_claim(layout: LauncherLayout) -> None:
    # Its image is the attachment pod's; the launcher's own claim dir does not exist.
    prepare_claim_images(_vmi("a"), layout)
    assert not os.path.lexists(layout.filesystem_volume_image("a"))


def test_a_present_hotplugged_image_must_be_a_regular_file(
    tmp_path: Path, layout: LauncherLayout
) -> None:
    os.symlink(tmp_path, layout.hotplug_disk_image("a"))
    check_storage_images(_vmi("a"), layout, (), ())  # absent: not looked at
    with pytest.raises(VmiRejectedError) as info:
        check_storage_images(_vmi("a"), layout, (), ("a",))
    assert info.value.field == "spec.volumes[0]"


def _xml(vmi: VirtualMachineInstance, present: set[str], layout: LauncherLayout) -> str:
    options = ConverterOptions(hotplug_volumes=frozenset(present))
    return convert_to_xml(vmi, options, layout)


def test_changes_attach_the_new_and_detach_the_gone(layout: LauncherLayout) -> None:
    vmi = _vmi("a", "b", "c", plain=("root",))
    live = _xml(vmi, {"a", "b"}, layout)
    new = _xml(vmi, {"b", "c"}, layout)
    changes = hotplug_changes(live, new, layout.hotplug_dir)
    attach: list[Any] = [(d.alias.user_device if d.alias else None) for d in changes.attach]
    detach: list[Any] = [(d.alias.user_device if d.alias else None) for d in changes.detach]
    assert (attach, detach) == (["c"], ["a"])
    (added,) = changes.attach
    assert added.source is not None
    assert added.source.file == layout.hotplug_disk_image("c")


def test_no_changes_when_the_hotplugged_disks_agree(layout: LauncherLayout) -> None:
    vmi = _vmi("a", plain=("root",))
    xml = _xml(vmi, {"a"}, layout)
    assert not hotplug_changes(xml, xml, layout.hotplug_dir)
    # The pod's own disks are never touched, whatever the new XML says.
    assert not hotplug_changes(xml, _xml(_vmi("a"), {"a"}, layout), layout.hotplug_dir)
