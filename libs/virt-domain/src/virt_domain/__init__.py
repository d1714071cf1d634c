"""virt_domain: the libvirt domain model (object <-> XML) and the converter VMI -> domain.

Pure: no I/O, no clocks, no host probing. The launcher and ``virtctl convert`` call it.

- `Domain` and its parts (`virt_domain.schema`, `virt_domain.devices`): object <-> XML.
- `convert(vmi, options, layout)` / `convert_to_xml(...)`: the converter.
- `LauncherLayout`: the paths launcher and converter agree on, derived from
- `launcher_pod`: the launcher-pod contract (volumes, mount paths, sockets, flags) that
  virt-controller, virt-launcher and virt-handler read.
- `namescheme`: the names of a network's links in the launcher pod (`eth0`/`pod<hash>`,
  `tap0`/`tap<hash>`, `k6t-…`), which the controller, the handler and the converter share.
- `cloud_init_media(...)`, `iso_image(...)`, `read_iso(...)`: cloud-init NoCloud/ConfigDrive ISO bytes, and what an image holds.
"""

from . import devices, launcher_pod, namescheme, schema
from .cloudinit import (
    CONFIG_DRIVE_LABEL,
    NOCLOUD_LABEL,
    CloudInitMedia,
    SecretData,
    cloud_init_media,
)
from .configvolumes import DEFAULT_CONFIG_LABEL, ConfigVolumeMedia, config_volume_media
from .converter import (
    CONFIGURATORS,
    Configurator,
    ConverterOptions,
    SMBiosInfo,
    convert,
    convert_to_xml,
)
from .converter.context import hotpluggable_volumes
from .converter.interfaces import interface_queues
from .converter.metadata import derived_firmware_uuid
from .devices import *  # noqa: F403
from .errors import ConversionError
from .iso import IsoContents, IsoError, iso_image, read_iso
from .layout import EfiFirmware, LauncherLayout
from .schema import *  # noqa: F403
from .xmlmap import XmlError, format_xml, parse_xml

__all__ = [
    *devices.__all__,
    *schema.__all__,
    "launcher_pod",
    "namescheme",
    "CONFIGURATORS",
    "CONFIG_DRIVE_LABEL",
    "NOCLOUD_LABEL",
    "CloudInitMedia",
    "ConfigVolumeMedia",
    "DEFAULT_CONFIG_LABEL",
    "Configurator",
    "ConversionError",
    "ConverterOptions",
    "EfiFirmware",
    "IsoContents",
    "IsoError",
    "LauncherLayout",
    "SMBiosInfo",
    "XmlError",
    "SecretData",
    "cloud_init_media",
    "config_volume_media",
    "convert",
    "convert_to_xml",
    "hotpluggable_volumes",
    "interface_queues",
    "derived_firmware_uuid",
    "format_xml",
    "iso_image",
    "parse_xml",
    "read_iso",
]
