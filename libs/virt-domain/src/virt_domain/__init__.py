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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# The object <-> XML model and the launcher-pod contract are light (the standard
# library only) and imported now; the rest on first use (PEP 562, below), so that reading
# the contract, as the launcher's head start does before libvirtd starts, does not load
# the API models.
from . import devices, launcher_pod, schema
from .devices import *  # noqa: F403
from .errors import ConversionError
from .schema import *  # noqa: F403
from .xmlmap import XmlError, format_xml, parse_xml

if TYPE_CHECKING:
    from . import namescheme
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
    from .iso import IsoContents, IsoError, iso_image, read_iso
    from .layout import EfiFirmware, LauncherLayout

__all__ = [
    *devices.__all__,
    *schema.__all__,
    "CONFIGURATORS",
    "CONFIG_DRIVE_LABEL",
    "DEFAULT_CONFIG_LABEL",
    "NOCLOUD_LABEL",
    "CloudInitMedia",
    "ConfigVolumeMedia",
    "Configurator",
    "ConversionError",
    "ConverterOptions",
    "EfiFirmware",
    "IsoContents",
    "IsoError",
    "LauncherLayout",
    "SMBiosInfo",
    "SecretData",
    "XmlError",
    "cloud_init_media",
    "config_volume_media",
    "convert",
    "convert_to_xml",
    "derived_firmware_uuid",
    "format_xml",
    "hotpluggable_volumes",
    "interface_queues",
    "iso_image",
    "launcher_pod",
    "namescheme",
    "parse_xml",
    "read_iso",
]

_SOURCES = (
    "virt_domain.cloudinit",
    "virt_domain.configvolumes",
    "virt_domain.converter",
    "virt_domain.converter.context",
    "virt_domain.converter.interfaces",
    "virt_domain.converter.metadata",
    "virt_domain.iso",
    "virt_domain.layout",
)


def __getattr__(name: str) -> object:
    if name == "namescheme":
        return importlib.import_module("virt_domain.namescheme")
    for source in _SOURCES if name in __all__ else ():
        if hasattr(module := importlib.import_module(source), name):
            return globals().setdefault(name, getattr(module, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
