"""cloud-init media: NoCloud (``cidata``) and ConfigDrive (``config-2``) ISO contents.

Pure: secret data is passed in (the launcher reads the mounted secrets), the result is
bytes; the launcher writes them at `CloudInitMedia.path`, which is the path the
converter put in the domain.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubevirt_api import VirtualMachineInstance
from kubevirt_api.models import CloudInitConfigDriveSource, CloudInitNoCloudSource

from .converter.metadata import derived_firmware_uuid
from .errors import ConversionError
from .hostname import guest_hostname
from .iso import iso_image
from .launcher_pod import NETWORK_DATA_KEYS, USER_DATA_KEYS
from .layout import LauncherLayout, check_component

__all__ = [
    "CONFIG_DRIVE_LABEL",
    "NOCLOUD_LABEL",
    "CloudInitMedia",
    "SecretData",
    "cloud_init_media",
]

NOCLOUD_LABEL = "cidata"
CONFIG_DRIVE_LABEL = "config-2"

#: Secret contents by secret name, then key (values already base64-decoded).
SecretData = Mapping[str, Mapping[str, bytes]]

_CLUSTER_INSTANCETYPE = "kubevirt.io/cluster-instancetype-name"
_INSTANCETYPE = "kubevirt.io/instancetype-name"


@dataclass(frozen=True, slots=True)
class CloudInitMedia:
    """One cloud-init ISO: where it goes, its label and its files."""

    volume: str
    config_drive: bool
    path: str
    label: str
    files: Mapping[str, bytes]

    def iso(self) -> bytes:
        """The ISO 9660 image (Joliet + Rock Ridge names, labelled `label`)."""
        return iso_image(self.label, self.files)


def cloud_init_media(
    vmi: VirtualMachineInstance,
    secrets: SecretData | None = None,
    layout: LauncherLayout | None = None,
) -> list[CloudInitMedia]:
    """The cloud-init ISOs ``vmi`` needs (at most one NoCloud and one ConfigDrive).

    Raises `ConversionError` naming the field for undecodable base64, a missing secret or
    key, or a source without any data.
    """
    layout = layout or LauncherLayout()
    secrets = secrets or {}
    meta = vmi.metadata
    name = check_component("metadata.name", (meta.name if meta else None) or "")
    namespace = check_component(
        "metadata.namespace", (meta.namespace if meta else None) or "default"
    )
    annotations = (meta.annotations if meta else None) or {}
    instance_type = annotations.get(_CLUSTER_INSTANCETYPE) or annotations.get(_INSTANCETYPE)
    hostname = guest_hostname(vmi)
    firmware = vmi.spec.domain.firmware
    uuid = (firmware.uuid if firmware and firmware.uuid else None) or derived_firmware_uuid(name)
    media: list[CloudInitMedia] = []
    done: set[bool] = set()
    for index, volume in enumerate(vmi.spec.volumes or ()):
        source: CloudInitNoCloudSource | CloudInitConfigDriveSource | None
        drive = volume.cloud_init_config_drive is not None
        source = volume.cloud_init_config_drive if drive else volume.cloud_init_no_cloud
        if source is None or drive in done:
            continue
        done.add(drive)
        kind = "cloudInitConfigDrive" if drive else "cloudInitNoCloud"
        path = f"spec.volumes[{index}].{kind}"
        user, network = _payload(source, path, secrets)
        keys = _public_keys(vmi, secrets, "config_drive" if drive else "no_cloud")
        if drive:
            metadata: dict[str, Any] = {}
            if instance_type:
                metadata["instance_type"] = instance_type
            metadata["instance_id"] = f"{name}.{namespace}"
            metadata["hostname"] = hostname
            metadata["uuid"] = uuid
            if keys:
                metadata["public_keys"] = keys
            files = {
                "openstack/latest/meta_data.json": _json(metadata),
                "openstack/latest/user_data": user,
            }
            if network:
                files["openstack/latest/network_data.json"] = network
        else:
            metadata = {}
            if instance_type:
                metadata["instance-type"] = instance_type
            metadata["instance-id"] = uuid
            metadata["local-hostname"] = hostname
            if keys:
                metadata["public-keys"] = keys
            files = {"meta-data": _json(metadata), "user-data": user}
            if network:
                files["network-config"] = network
        media.append(
            CloudInitMedia(
                volume=volume.name,
                config_drive=drive,
                path=layout.cloud_init_iso(namespace, name, drive),
                label=CONFIG_DRIVE_LABEL if drive else NOCLOUD_LABEL,
                files=files,
            )
        )
    return media


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _decode(path: str, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ConversionError(path, "is not valid base64") from None


def _from_secret(
    path: str, secrets: SecretData, name: str | None, keys: tuple[str, ...]
) -> bytes | None:
    if not name:
        raise ConversionError(f"{path}.name", "required: the secret holding the data")
    data = secrets.get(name)
    if data is None:
        raise ConversionError(path, f"secret {name!r} was not provided to the launcher")
    for key in keys:
        if key in data:
            return data[key]
    return None


def _payload(
    source: CloudInitNoCloudSource | CloudInitConfigDriveSource, path: str, secrets: SecretData
) -> tuple[bytes, bytes]:
    user = network = b""
    if source.user_data:
        user = source.user_data.encode()
    elif source.user_data_base64:
        user = _decode(f"{path}.userDataBase64", source.user_data_base64)
    if source.network_data:
        network = source.network_data.encode()
    elif source.network_data_base64:
        network = _decode(f"{path}.networkDataBase64", source.network_data_base64)
    # As upstream: one referenced secret lacking its keys is fine if the other has its.
    missing: list[tuple[str, str, tuple[str, ...]]] = []
    if source.secret_ref is not None:
        field = f"{path}.secretRef"
        value = _from_secret(field, secrets, source.secret_ref.name, USER_DATA_KEYS)
        if value is None:
            missing.append((field, source.secret_ref.name or "", USER_DATA_KEYS))
        else:
            user = value
    if source.network_data_secret_ref is not None:
        ref = source.network_data_secret_ref
        field = f"{path}.networkDataSecretRef"
        value = _from_secret(field, secrets, ref.name, NETWORK_DATA_KEYS)
        if value is None:
            missing.append((field, ref.name or "", NETWORK_DATA_KEYS))
        else:
            network = value
    referenced = (source.secret_ref is not None) + (source.network_data_secret_ref is not None)
    if missing and len(missing) == referenced:
        field, name, keys = missing[0]
        raise ConversionError(field, f"secret {name!r} has none of the keys {', '.join(keys)}")
    if not user and not network:
        raise ConversionError(
            path,
            "no data: give userData, userDataBase64, secretRef, networkData, "
            "networkDataBase64 or networkDataSecretRef",
        )
    return user, network


def _public_keys(vmi: VirtualMachineInstance, secrets: SecretData, method: str) -> dict[str, str]:
    """SSH keys propagated through this data source, numbered in a stable order."""
    keys: dict[str, str] = {}
    for index, credential in enumerate(vmi.spec.access_credentials or ()):
        ssh = credential.ssh_public_key
        if ssh is None or getattr(ssh.propagation_method, method) is None:
            continue
        secret = ssh.source.secret
        if secret is None:
            continue
        path = f"spec.accessCredentials[{index}].sshPublicKey.source.secret"
        data = secrets.get(secret.secret_name)
        if data is None:
            raise ConversionError(
                path, f"secret {secret.secret_name!r} was not provided to the launcher"
            )
        for key in sorted(data):
            value = data[key].decode(errors="replace").strip()
            if key.startswith("..") or not value:
                continue
            keys[str(len(keys))] = value
    return keys
