"""The default domain builder: virt_domain's converter with this launcher's layout.

The layout is the one contract between the launcher and the converter: every path
the domain XML names (serial socket, kernelBoot files, disks) is under the
directories the launcher was started with. The builder also writes the files those
paths name (cloud-init and config-volume ISOs, containerDisk overlays); it runs in a
thread, off the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from virt_domain.converter import ConversionError, ConverterOptions, convert_to_xml
from virt_domain.launcher_pod import LauncherDirs
from virt_domain.layout import LauncherLayout

from virt_launcher.conversion import DomainBuilder, VmiRejectedError
from virt_launcher.disks import prepare_container_disk_overlays
from virt_launcher.media import prepare_media

__all__ = ["converter_builder"]


def converter_builder(dirs: LauncherDirs) -> DomainBuilder:
    """A builder that loads the VMI with kubevirt_api and converts it with virt_domain."""
    layout = LauncherLayout.for_launcher(dirs)

    def build(vmi: Mapping[str, Any], options: ConverterOptions) -> str:
        try:
            typed = load(VirtualMachineInstance, dict(vmi))
        except InvalidObjectError as exc:
            first = exc.errors[0] if exc.errors else None
            if first is None:
                raise VmiRejectedError("", str(exc)) from None
            rest = f" (and {len(exc.errors) - 1} more)" if len(exc.errors) > 1 else ""
            raise VmiRejectedError(first.path, first.message + rest) from None
        try:
            xml = convert_to_xml(typed, options, layout)
        except ConversionError as exc:
            raise VmiRejectedError(exc.field, exc.message) from None
        # The files the domain's disks name, before libvirt sees the domain.
        prepare_media(typed, layout)
        prepare_container_disk_overlays(typed, layout)
        return xml

    return build
