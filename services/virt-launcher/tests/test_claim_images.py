"""A filesystem-mode claim's disk.img: made when absent at upstream's size, never replaced,
and block claims are left to their device."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from kubevirt_api.models import PersistentVolumeClaimInfo
from virt_domain.layout import LauncherLayout
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.disks import block_claim_volumes, claim_image_size, prepare_claim_images

MIB = 1 << 20


def _info(**fields: Any) -> PersistentVolumeClaimInfo:
    return load(PersistentVolumeClaimInfo, fields)


def _vmi(info: dict[str, Any] | None) -> VirtualMachineInstance:
    status = [{"name": "data", "target": ""}]
    if info is not None:
        status[0]["persistentVolumeClaimInfo"] = info  # type: ignore[assignment]
    return load(
        VirtualMachineInstance,
        {
            "metadata": {"name": "a", "namespace": "ns", "uid": "u"},
            "spec": {
                "domain": {"devices": {"disks": [{"name": "data", "disk": {}}]}},
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}],
            },
            "status": {"volumeStatus": status},
        },
    )


def test_the_size_is_the_smaller_of_capacity_and_request_in_whole_mib() -> None:
    assert claim_image_size(_info(capacity={"storage": "64Mi"}), 1 << 40) == 64 * MIB
    bigger_request = _info(capacity={"storage": "64Mi"}, requests={"storage": "100Mi"})
    assert claim_image_size(bigger_request, 1 << 40) == 64 * MIB
    bigger_volume = _info(capacity={"storage": "2Gi"}, requests={"storage": "1Gi"})
    assert claim_image_size(bigger_volume, 1 << 40) == 1024 * MIB
    assert claim_image_size(_info(requests={"storage": "1500000"}), 1 << 40) == MIB


def test_a_smaller_volume_is_used_within_ten_percent_and_refused_beyond() -> None:
    info = _info(capacity={"storage": "100Mi"})
    assert claim_image_size(info, 95 * MIB) == 95 * MIB
    with pytest.raises(ValueError, match="10 % toleration"):
        claim_image_size(info, 89 * MIB)


def test_a_claim_without_size_or_below_one_mib_is_refused() -> None:
    with pytest.raises(ValueError, match="neither a capacity nor a storage request"):
        claim_image_size(_info(), 1 << 40)
    with pytest.raises(ValueError, match="at least 1MiB"):
        claim_image_size(_info(capacity={"storage": "1000Ki"}), 1 << 40)


def _layout(tmp_path: Path) -> LauncherLayout:
    return LauncherLayout(private_dir=str(tmp_path), block_device_dir=str(tmp_path / "dev"))


def test_a_missing_image_is_made_sparse_and_an_existing_one_kept(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    mounted = tmp_path / "vmi-disks" / "data"
    mounted.mkdir(parents=True)
    vmi = _vmi({"volumeMode": "Filesystem", "capacity": {"storage": "8Mi"}})
    prepare_claim_images(vmi, layout)
    image = mounted / "disk.img"
    assert image.stat().st_size == 8 * MIB
    assert image.stat().st_blocks * 512 < 8 * MIB
    assert image.stat().st_uid == os.getuid()
    image.write_bytes(b"guest data")
    prepare_claim_images(vmi, layout)
    assert image.read_bytes() == b"guest data"


def test_an_unmounted_claim_or_unknown_size_is_refused_naming_the_volume(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    with pytest.raises(VmiRejectedError, match="not mounted") as unmounted:
        prepare_claim_images(_vmi({"capacity": {"storage": "8Mi"}}), layout)
    assert unmounted.value.field == "spec.volumes[0]"
    (tmp_path / "vmi-disks" / "data").mkdir(parents=True)
    with pytest.raises(VmiRejectedError, match="size is not known yet"):
        prepare_claim_images(_vmi(None), layout)


def test_a_link_in_place_of_the_image_is_refused(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    mounted = tmp_path / "vmi-disks" / "data"
    mounted.mkdir(parents=True)
    (mounted / "disk.img").symlink_to("/etc/passwd")
    with pytest.raises(VmiRejectedError, match="not a regular file"):
        prepare_claim_images(_vmi({"capacity": {"storage": "8Mi"}}), layout)


def test_block_claims_come_from_the_status_and_get_no_image(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    vmi = _vmi({"volumeMode": "Block", "capacity": {"storage": "8Mi"}})
    assert block_claim_volumes(vmi, layout) == frozenset({"data"})
    prepare_claim_images(vmi, layout)  # nothing to make, nothing mounted: no error
    assert not (tmp_path / "vmi-disks").exists()
    assert block_claim_volumes(_vmi({"volumeMode": "Filesystem"}), layout) == frozenset()
