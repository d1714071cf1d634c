"""cloud-init media: the right files, labels and metadata; secrets passed in."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pycdlib
import pytest
from kubevirt_api import VirtualMachineInstance
from virt_domain import (
    CONFIG_DRIVE_LABEL,
    NOCLOUD_LABEL,
    ConversionError,
    LauncherLayout,
    cloud_init_media,
    convert,
)

VmiFactory = Callable[..., VirtualMachineInstance]


def _read_iso(image: bytes) -> tuple[str, dict[str, bytes]]:
    """Volume label and Joliet files of an ISO image."""
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(image))
    try:
        label = iso.pvd.volume_identifier.decode().strip()
        files: dict[str, bytes] = {}
        for root, _dirs, names in iso.walk(joliet_path="/"):
            for name in names:
                path = f"{root.rstrip('/')}/{name}"
                out = io.BytesIO()
                iso.get_file_from_iso_fp(out, joliet_path=path)
                files[path.lstrip("/")] = out.getvalue()
        return label, files
    finally:
        iso.close()


def _vmi(make_vmi: VmiFactory, volume: dict[str, Any], **spec: Any) -> VirtualMachineInstance:
    return make_vmi(
        {"firmware": {"uuid": "e4686d2c-6e8d-4335-b8fd-81bee22f4814"}},
        volumes=[{"name": "ci", **volume}],
        **spec,
    )


def test_nocloud_iso_has_cidata_label_and_files(make_vmi: VmiFactory) -> None:
    vmi = _vmi(
        make_vmi,
        {"cloudInitNoCloud": {"userData": "#cloud-config\n", "networkData": "version: 2\n"}},
    )
    (media,) = cloud_init_media(vmi)
    label, files = _read_iso(media.iso())
    assert (label, media.label) == (NOCLOUD_LABEL, "cidata")
    assert files["user-data"] == b"#cloud-config\n"
    assert files["network-config"] == b"version: 2\n"
    assert json.loads(files["meta-data"]) == {
        "instance-id": "e4686d2c-6e8d-4335-b8fd-81bee22f4814",
        "local-hostname": "vm",
    }


def test_iso_path_is_the_one_in_the_domain(make_vmi: VmiFactory) -> None:
    vmi = make_vmi(
        {"devices": {"disks": [{"name": "ci", "disk": {"bus": "virtio"}}]}},
        volumes=[{"name": "ci", "cloudInitNoCloud": {"userData": "x"}}],
    )
    layout = LauncherLayout(cloud_init_dir="/run/ci")
    (media,) = cloud_init_media(vmi, layout=layout)
    disk_source = convert(vmi, layout=layout).devices.disks[0].source
    assert disk_source is not None
    assert media.path == disk_source.file == "/run/ci/ns/vm/noCloud.iso"


def test_config_drive_layout_and_metadata(make_vmi: VmiFactory) -> None:
    encoded = base64.b64encode(b"#!/bin/sh\necho hi\n").decode()
    vmi = _vmi(make_vmi, {"cloudInitConfigDrive": {"userDataBase64": encoded}}, hostname="guest")
    (media,) = cloud_init_media(vmi)
    label, files = _read_iso(media.iso())
    assert (label, media.config_drive) == (CONFIG_DRIVE_LABEL, True)
    assert files["openstack/latest/user_data"] == b"#!/bin/sh\necho hi\n"
    assert "openstack/latest/network_data.json" not in files
    assert json.loads(files["openstack/latest/meta_data.json"]) == {
        "instance_id": "vm.ns",
        "hostname": "guest",
        "uuid": "e4686d2c-6e8d-4335-b8fd-81bee22f4814",
    }


def test_secret_references_and_ssh_keys(make_vmi: VmiFactory) -> None:
    vmi = _vmi(
        make_vmi,
        {"cloudInitNoCloud": {"secretRef": {"name": "ud"}, "networkDataSecretRef": {"name": "nd"}}},
        accessCredentials=[
            {
                "sshPublicKey": {
                    "source": {"secret": {"secretName": "keys"}},
                    "propagationMethod": {"noCloud": {}},
                }
            }
        ],
    )
    secrets = {
        "ud": {"userData": b"#cloud-config\nusers: []\n"},
        "nd": {"networkdata": b"version: 2\n"},
        "keys": {"b": b"ssh-ed25519 BBB\n", "a": b"ssh-ed25519 AAA", "..data": b"skip"},
    }
    (media,) = cloud_init_media(vmi, secrets)
    assert media.files["user-data"] == b"#cloud-config\nusers: []\n"
    assert media.files["network-config"] == b"version: 2\n"
    meta = json.loads(media.files["meta-data"])
    assert meta["public-keys"] == {"0": "ssh-ed25519 AAA", "1": "ssh-ed25519 BBB"}


def test_instance_type_annotation_reaches_metadata(make_vmi: VmiFactory) -> None:
    vmi = make_vmi(
        volumes=[{"name": "ci", "cloudInitNoCloud": {"userData": "x"}}],
        metadata={"annotations": {"kubevirt.io/cluster-instancetype-name": "u1.small"}},
    )
    (media,) = cloud_init_media(vmi)
    assert json.loads(media.files["meta-data"])["instance-type"] == "u1.small"


def test_no_cloud_init_volume_means_no_media(make_vmi: VmiFactory) -> None:
    assert cloud_init_media(make_vmi()) == []


@pytest.mark.parametrize(
    ("volume", "secrets", "field"),
    [
        (
            {"cloudInitNoCloud": {"userDataBase64": "%%%"}},
            {},
            "spec.volumes[0].cloudInitNoCloud.userDataBase64",
        ),
        (
            {"cloudInitNoCloud": {"secretRef": {"name": "missing"}}},
            {},
            "spec.volumes[0].cloudInitNoCloud.secretRef",
        ),
        (
            {"cloudInitNoCloud": {"secretRef": {"name": "s"}}},
            {"s": {"other": b"x"}},
            "spec.volumes[0].cloudInitNoCloud.secretRef",
        ),
        (
            {"cloudInitConfigDrive": {"networkDataSecretRef": {"name": "n"}}},
            {"n": {"userdata": b"x"}},
            "spec.volumes[0].cloudInitConfigDrive.networkDataSecretRef",
        ),
        ({"cloudInitConfigDrive": {}}, {}, "spec.volumes[0].cloudInitConfigDrive"),
    ],
)
def test_bad_sources_name_the_field(
    make_vmi: VmiFactory, volume: dict[str, Any], secrets: dict[str, dict[str, bytes]], field: str
) -> None:
    with pytest.raises(ConversionError) as info:
        cloud_init_media(_vmi(make_vmi, volume), secrets)
    assert info.value.field == field


@pytest.mark.skipif(shutil.which("blkid") is None, reason="blkid (util-linux) not installed")
@pytest.mark.parametrize(
    ("volume", "label"), [("cloudInitNoCloud", "cidata"), ("cloudInitConfigDrive", "config-2")]
)
def test_linux_sees_the_label_cloud_init_looks_for(
    make_vmi: VmiFactory, tmp_path: Path, volume: str, label: str
) -> None:
    (media,) = cloud_init_media(_vmi(make_vmi, {volume: {"userData": "#cloud-config\n"}}))
    image = tmp_path / "ci.iso"
    image.write_bytes(media.iso())
    probe = subprocess.run(
        ["blkid", "-p", "-o", "export", str(image)], capture_output=True, text=True, check=True
    )
    fields = dict(line.split("=", 1) for line in probe.stdout.splitlines() if "=" in line)
    assert (fields["TYPE"], fields["LABEL"]) == ("iso9660", label)
