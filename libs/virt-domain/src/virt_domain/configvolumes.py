"""ISO images of configMap, secret, downwardAPI, serviceAccount and sysprep volumes.

Pure: the launcher lists the mounted volume's files and passes their contents; the
result says where the ISO goes (the path the converter put in the domain) and its
bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubevirt_api.models import Volume

from .errors import ConversionError
from .iso import IsoError, iso_image
from .layout import LauncherLayout, check_component

__all__ = ["DEFAULT_CONFIG_LABEL", "ConfigVolumeMedia", "config_volume_media"]

#: The volume label KubeVirt gives config volume ISOs unless ``volumeLabel`` says otherwise.
DEFAULT_CONFIG_LABEL = "cfgdata"


@dataclass(frozen=True, slots=True)
class ConfigVolumeMedia:
    """One config volume ISO: kind, path, label and files."""

    volume: str
    kind: str
    path: str
    label: str
    files: Mapping[str, bytes]

    def iso(self) -> bytes:
        """The ISO 9660 image."""
        return iso_image(self.label, self.files)


def config_volume_media(
    volume: Volume, files: Mapping[str, bytes], layout: LauncherLayout | None = None
) -> ConfigVolumeMedia:
    """The ISO of a config volume holding ``files`` (relative path -> contents).

    Raises `ConversionError` for a volume that is not a config volume or a file name an
    ISO cannot carry (Kubernetes' ``..data``-style bookkeeping entries must be left out).
    """
    layout = layout or LauncherLayout()
    name = check_component("volume.name", volume.name)
    label: str | None = None
    if volume.config_map is not None:
        kind, label = "configMap", volume.config_map.volume_label
    elif volume.secret is not None:
        kind, label = "secret", volume.secret.volume_label
    elif volume.downward_api is not None:
        kind, label = "downwardAPI", volume.downward_api.volume_label
    elif volume.service_account is not None:
        kind = "serviceAccount"
    elif volume.sysprep is not None:
        kind = "sysprep"
    else:
        raise ConversionError(
            f"volume {name}",
            "not a configMap, secret, downwardAPI, serviceAccount or sysprep volume",
        )
    media = ConfigVolumeMedia(
        volume=name,
        kind=kind,
        path=layout.config_volume_iso(kind, name),
        label=label or DEFAULT_CONFIG_LABEL,
        files=dict(files),
    )
    try:
        iso_image(media.label, {})  # checks the label before any work on files
    except IsoError as exc:
        raise ConversionError(f"volume {name}.volumeLabel", str(exc)) from None
    return media
