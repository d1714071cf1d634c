"""The launcher writes the cloud-init and config-volume ISOs the domain's disks read."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConverterOptions, read_iso
from virt_domain.launcher_pod import LauncherDirs
from virt_domain.layout import LauncherLayout
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.converter import converter_builder
from virt_launcher.media import prepare_media

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@host"


def kubelet_volume(directory: Path, files: dict[str, bytes]) -> None:
    """A Secret/ConfigMap volume as kubelet's atomic writer lays it out."""
    stamp = directory / "..2026_08_22_10_00_00.000000001"
    for name, data in files.items():
        (stamp / name).parent.mkdir(parents=True, exist_ok=True)
        (stamp / name).write_bytes(data)
    (directory / "..data").symlink_to(stamp.name)
    for top in {name.split("/")[0] for name in files}:
        (directory / top).symlink_to(f"..data/{top}")


def sub_path_mounts(directory: Path, files: dict[str, bytes], absent: tuple[str, ...]) -> None:
    """Keys mounted one by one (subPath): a file each, a directory for a missing key."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    for name in absent:
        (directory / name).mkdir()


@pytest.fixture
def layout(tmp_path: Path) -> LauncherLayout:
    private = tmp_path / "private"
    private.mkdir()
    base = LauncherLayout.for_launcher(LauncherDirs(private_dir=str(private)))
    return dataclasses.replace(base, service_account_dir=str(tmp_path / "serviceaccount"))


def vmi_body(volumes: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A VMI with a disk on each of ``volumes``, as virt-handler sends it."""
    disks = [{"name": v["name"], "disk": {"bus": "virtio"}} for v in volumes]
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm-a", "namespace": "ns", "uid": "uid-1"},
        "spec": {
            "domain": {
                "devices": {"disks": disks},
                "resources": {"requests": {"memory": "64Mi"}},
            },
            "volumes": volumes,
            **spec,
        },
    }


def make_vmi(volumes: list[dict[str, Any]], **spec: Any) -> VirtualMachineInstance:
    return load(VirtualMachineInstance, vmi_body(volumes, **spec))


NOCLOUD_WITH_KEYS = {
    "volumes": [{"name": "cloudinit", "cloudInitNoCloud": {"secretRef": {"name": "user-data"}}}],
    "accessCredentials": [
        {
            "sshPublicKey": {
                "source": {"secret": {"secretName": "my-keys"}},
                "propagationMethod": {"noCloud": {}},
            }
        }
    ],
}


def mount_nocloud_secrets(
    layout: LauncherLayout, user_data: bytes = b"#cloud-config\n", keys: bool = True
) -> None:
    sub_path_mounts(
        Path(layout.private_dir, "secret", "cloudinit"),
        {"userdata": user_data},
        absent=("userData",),
    )
    if not keys:
        return
    access = Path(layout.access_credential_dir("my-keys"))
    access.mkdir(parents=True)
    kubelet_volume(access, {"key1": f"{KEY}\n".encode()})


def nocloud_body() -> dict[str, Any]:
    spec = dict(NOCLOUD_WITH_KEYS)
    return vmi_body(spec.pop("volumes"), **spec)


def nocloud_vmi() -> VirtualMachineInstance:
    return load(VirtualMachineInstance, nocloud_body())


def test_the_nocloud_iso_holds_the_secret_user_data_and_the_access_keys(
    layout: LauncherLayout,
) -> None:
    mount_nocloud_secrets(layout, b"#cloud-config\npassword: x\n")
    prepare_media(nocloud_vmi(), layout)
    path = Path(layout.cloud_init_iso("ns", "vm-a", config_drive=False))
    held = read_iso(path.read_bytes())
    assert held.label == "cidata"
    assert held.files["user-data"] == b"#cloud-config\npassword: x\n"
    assert json.loads(held.files["meta-data"])["public-keys"] == {"0": KEY}
    info = path.stat()
    qemu = 107 if os.geteuid() == 0 else os.geteuid()
    assert (info.st_uid, info.st_mode & 0o777) == (qemu, 0o600)
    assert [p.name for p in path.parent.iterdir()] == ["noCloud.iso"]  # no staging left


def test_an_unchanged_iso_is_not_rewritten_and_a_changed_secret_is(
    layout: LauncherLayout,
) -> None:
    mount_nocloud_secrets(layout)
    prepare_media(nocloud_vmi(), layout)
    path = Path(layout.cloud_init_iso("ns", "vm-a", config_drive=False))
    first = path.stat().st_ino
    prepare_media(nocloud_vmi(), layout)
    assert path.stat().st_ino == first
    Path(layout.private_dir, "secret", "cloudinit", "userdata").write_bytes(b"#cloud-config\n#2\n")
    prepare_media(nocloud_vmi(), layout)
    assert path.stat().st_ino != first
    assert read_iso(path.read_bytes()).files["user-data"] == b"#cloud-config\n#2\n"


def test_a_secret_without_the_user_data_keys_is_refused_by_field(layout: LauncherLayout) -> None:
    mount_nocloud_secrets(layout)
    secret_dir = Path(layout.private_dir, "secret", "cloudinit")
    (secret_dir / "userdata").unlink()
    (secret_dir / "userdata").mkdir()  # kubelet's stand-in for the missing key
    with pytest.raises(VmiRejectedError) as info:
        prepare_media(nocloud_vmi(), layout)
    assert info.value.field == "spec.volumes[0].cloudInitNoCloud.secretRef"
    assert "userdata, userData" in info.value.message
    assert not Path(layout.cloud_init_iso("ns", "vm-a", config_drive=False)).exists()


def test_an_unmounted_access_credential_secret_is_refused_by_field(
    layout: LauncherLayout,
) -> None:
    mount_nocloud_secrets(layout, keys=False)
    with pytest.raises(VmiRejectedError) as info:
        prepare_media(nocloud_vmi(), layout)
    assert info.value.field == "spec.accessCredentials[0].sshPublicKey.source.secret"


def test_a_symlink_out_of_a_mounted_volume_is_refused(layout: LauncherLayout) -> None:
    mount_nocloud_secrets(layout)
    Path(layout.access_credential_dir("my-keys"), "stolen").symlink_to("/etc/passwd")
    with pytest.raises(VmiRejectedError) as info:
        prepare_media(nocloud_vmi(), layout)
    assert info.value.field == "spec.accessCredentials[0].sshPublicKey.source.secret"
    assert "leaves the volume" in info.value.message


def test_a_symlink_planted_where_the_iso_goes_is_not_followed(
    layout: LauncherLayout, tmp_path: Path
) -> None:
    mount_nocloud_secrets(layout)
    outside = tmp_path / "outside"
    outside.mkdir()
    Path(layout.cloud_init_dir).symlink_to(outside)
    with pytest.raises(VmiRejectedError) as info:
        prepare_media(nocloud_vmi(), layout)
    assert info.value.field == "spec.volumes[0]"
    assert list(outside.iterdir()) == []


def test_a_planted_symlink_at_the_iso_path_is_replaced_not_written_through(
    layout: LauncherLayout, tmp_path: Path
) -> None:
    mount_nocloud_secrets(layout)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    path = Path(layout.cloud_init_iso("ns", "vm-a", config_drive=False))
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    prepare_media(nocloud_vmi(), layout)
    assert victim.read_bytes() == b"keep"
    assert not path.is_symlink()
    assert read_iso(path.read_bytes()).label == "cidata"


def test_config_volumes_become_isos_of_their_mounted_files(layout: LauncherLayout) -> None:
    mount = Path(layout.config_volume_dir("configMap", "app"))
    mount.mkdir(parents=True)
    kubelet_volume(mount, {"app.conf": b"a=1\n", "nested/more.conf": b"b=2\n"})
    sa = Path(layout.service_account_dir)
    sa.mkdir()
    kubelet_volume(sa, {"token": b"tok", "namespace": b"ns"})
    vmi = make_vmi(
        [
            {"name": "app", "configMap": {"name": "app-config", "volumeLabel": "appcfg"}},
            {"name": "sa", "serviceAccount": {"serviceAccountName": "robot"}},
        ]
    )
    prepare_media(vmi, layout)
    app = read_iso(Path(layout.config_volume_iso("configMap", "app")).read_bytes())
    assert (app.label, dict(app.files)) == (
        "appcfg",
        {"app.conf": b"a=1\n", "nested/more.conf": b"b=2\n"},
    )
    token = read_iso(Path(layout.config_volume_iso("serviceAccount", "sa")).read_bytes())
    assert dict(token.files) == {"namespace": b"ns", "token": b"tok"}


def test_an_unmounted_config_volume_is_refused_by_field(layout: LauncherLayout) -> None:
    vmi = make_vmi([{"name": "sec", "secret": {"secretName": "s"}}])
    with pytest.raises(VmiRejectedError) as info:
        prepare_media(vmi, layout)
    assert info.value.field == "spec.volumes[0].secret"


def test_the_builder_writes_the_iso_the_domain_names(layout: LauncherLayout) -> None:
    mount_nocloud_secrets(layout)
    build = converter_builder(LauncherDirs(private_dir=layout.private_dir))
    body = nocloud_body()
    xml = build(body, ConverterOptions())
    path = layout.cloud_init_iso("ns", "vm-a", config_drive=False)
    assert f"file='{path}'" in xml or f'file="{path}"' in xml
    assert read_iso(Path(path).read_bytes()).files["user-data"] == b"#cloud-config\n"


def test_a_migration_target_gets_blank_isos_of_the_sources_sizes(
    layout: LauncherLayout, tmp_path: Path
) -> None:
    mount_nocloud_secrets(layout)
    path = Path(layout.cloud_init_iso("ns", "vm-a", config_drive=False))
    prepare_media(nocloud_vmi(), layout)
    written = path.read_bytes()

    path.unlink()
    prepare_media(nocloud_vmi(), layout, blank=True)
    blank = path.read_bytes()
    assert len(blank) == len(written)
    assert blank == bytes(len(written))  # block migration copies the source's bytes in

    # Asked again (the handler retries): a blank of the right size is kept as it is,
    # so bytes a block migration already copied are never overwritten.
    path.write_bytes(written)
    prepare_media(nocloud_vmi(), layout, blank=True)
    assert path.read_bytes() == written
