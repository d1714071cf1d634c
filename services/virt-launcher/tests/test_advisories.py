"""Upstream advisory classes, seen from the launcher (docs/security.md has the table).

A symlink planted in the user's storage: a filesystem PVC's ``disk.img`` or a hostDisk's
file that points elsewhere in the launcher pod (its service-account token, another
volume) must not become the guest's disk (GHSA-qw6q-3pgr-5cwq).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from virt_domain import ConverterOptions
from virt_domain.launcher_pod import LauncherDirs
from virt_domain.layout import LauncherLayout
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.converter import converter_builder

SECRET = b"the launcher's service-account token"


def vmi(volume: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm-a", "namespace": "ns", "uid": "uid-1"},
        "spec": {
            "domain": {
                "devices": {"disks": [{"name": volume["name"], "disk": {"bus": "virtio"}}]},
                "resources": {"requests": {"memory": "64Mi"}},
            },
            "volumes": [volume],
        },
    }


PVC = {"name": "data", "persistentVolumeClaim": {"claimName": "mine"}}
HOST_DISK = {"name": "host", "hostDisk": {"path": "/var/data/guest.img", "type": "Disk"}}


@pytest.fixture
def dirs(tmp_path: Path) -> LauncherDirs:
    private = tmp_path / "private"
    private.mkdir()
    return LauncherDirs(private_dir=str(private))


def planted(dirs: LauncherDirs, tmp_path: Path, image: str) -> Path:
    """A symlink at the image path to a file the guest must never read."""
    token = tmp_path / "token"
    token.write_bytes(SECRET)
    link = Path(image)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(token)
    return token


@pytest.mark.parametrize(
    ("volume", "field", "image"),
    [
        (PVC, "spec.volumes[0]", lambda layout: layout.filesystem_volume_image("data")),
        (
            HOST_DISK,
            "spec.volumes[0].hostDisk.path",
            lambda layout: layout.host_disk_image("host", "/var/data/guest.img"),
        ),
    ],
    ids=["pvc-disk.img", "hostDisk"],
)
def test_a_symlinked_storage_image_is_refused_not_given_to_qemu(
    dirs: LauncherDirs, tmp_path: Path, volume: dict[str, Any], field: str, image: Any
) -> None:
    path = image(LauncherLayout.for_launcher(dirs))
    planted(dirs, tmp_path, path)

    with pytest.raises(VmiRejectedError) as refused:
        converter_builder(dirs)(vmi(volume), ConverterOptions())

    assert refused.value.field == field
    assert "is a symlink" in str(refused.value)


def test_a_regular_storage_image_is_used(dirs: LauncherDirs) -> None:
    image = Path(LauncherLayout.for_launcher(dirs).filesystem_volume_image("data"))
    image.parent.mkdir(parents=True)
    image.write_bytes(b"\0" * 512)

    xml = converter_builder(dirs)(vmi(PVC), ConverterOptions())

    assert f"file='{image}'" in xml or f'file="{image}"' in xml
