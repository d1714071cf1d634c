"""The converter's options over the wire: virt_domain's ConverterOptions <-> SyncOptions.

One options type end to end: virt-handler builds a :class:`ConverterOptions`, sends it
with :func:`options_to_wire`, and virt-launcher hands :func:`options_from_wire`'s result to
the converter as it is. The mapping is field for field, so every option the converter
knows can come from the handler, and ``options_from_wire(options_to_wire(o)) == o``.

One exception, so the request carries one copy of it: ``pod_networks`` (phase 1's
network facts) travels in the request's own ``networks`` field (``virt_rpc.podnetwork``),
not in SyncOptions; :func:`options_from_request` joins the two on the launcher's side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from virt_domain import ConverterOptions, SMBiosInfo

from virt_rpc.generated.kubevirtpy.launcher.v1 import NetworkSetup, SmBios, SyncOptions
from virt_rpc.podnetwork import networks_from_wire

__all__ = ["InvalidOptionsError", "options_from_request", "options_from_wire", "options_to_wire"]

_DISK_FORMATS: dict[str, Literal["raw", "qcow2"]] = {"raw": "raw", "qcow2": "qcow2"}


class InvalidOptionsError(ValueError):
    """A SyncOptions field the converter cannot take; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def options_to_wire(options: ConverterOptions) -> SyncOptions:
    """The SyncOptions message carrying every field of ``options`` but ``pod_networks``."""
    smbios = options.smbios
    return SyncOptions(
        use_emulation=options.use_emulation,
        # The two SMBIOS types name the same five strings alike.
        smbios=None if smbios is None else SmBios(**dataclasses.asdict(smbios)),
        omit_smbios=smbios is None,
        mem_balloon_stats_period_seconds=options.memballoon_stats_period,
        serial_console_log=options.serial_console_log,
        block_volumes=sorted(options.block_volumes),
        hotplug_volumes=sorted(options.hotplug_volumes),
        container_disk_formats=dict(options.container_disk_formats),
        tap_devices=dict(options.tap_devices),
        dedicated_cpus=list(options.dedicated_cpus),
        free_page_reporting=options.free_page_reporting,
    )


def options_from_wire(message: SyncOptions | None) -> ConverterOptions:
    """The ConverterOptions a SyncOptions message carries (None: the converter's defaults).

    Raises InvalidOptionsError for a disk format the converter does not know.
    """
    if message is None:
        return ConverterOptions()
    formats: dict[str, Literal["raw", "qcow2"]] = {}
    for volume, name in message.container_disk_formats.items():
        known = _DISK_FORMATS.get(name)
        if known is None:
            raise InvalidOptionsError(
                f"options.container_disk_formats[{volume}]",
                f"{name!r} is not a disk format; use raw or qcow2",
            )
        formats[volume] = known
    s = message.smbios
    smbios = (
        None
        if message.omit_smbios
        else SMBiosInfo()
        if s is None
        else SMBiosInfo(**{f.name: getattr(s, f.name) for f in dataclasses.fields(SMBiosInfo)})
    )
    return ConverterOptions(
        use_emulation=message.use_emulation,
        block_volumes=frozenset(message.block_volumes),
        hotplug_volumes=frozenset(message.hotplug_volumes),
        container_disk_formats=formats,
        tap_devices=dict(message.tap_devices),
        dedicated_cpus=tuple(message.dedicated_cpus),
        smbios=smbios,
        memballoon_stats_period=message.mem_balloon_stats_period_seconds,
        free_page_reporting=True
        if message.free_page_reporting is None
        else message.free_page_reporting,
        serial_console_log=message.serial_console_log,
    )


def options_from_request(
    message: SyncOptions | None, networks: Sequence[NetworkSetup]
) -> ConverterOptions:
    """The ConverterOptions of a SyncVirtualMachine request: its options and its networks.

    Raises InvalidOptionsError, or InvalidNetworkError (``virt_rpc.podnetwork``) naming
    the bad ``networks[i]`` field.
    """
    options = options_from_wire(message)
    return dataclasses.replace(options, pod_networks=networks_from_wire(networks))
