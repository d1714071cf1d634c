"""The default domain builder: virt_domain's converter with this launcher's layout.

The layout is the one contract between the launcher and the converter: every path
the domain XML names (serial socket, kernelBoot files, disks) is under the
directories the launcher was started with. Hotplugged volumes get a disk while their
image is mounted in the pod (`virt_launcher.hotplug`) or the handler says it is. The builder also writes the files those
paths name (cloud-init and config-volume ISOs, containerDisk overlays, emptyDisks); it
runs in a thread, off the event loop. The migration target's builder writes the same
files except that the ISOs are blank (block migration copies the source's into them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from virt_domain.converter import ConversionError, ConverterOptions, convert_to_xml
from virt_domain.launcher_pod import LauncherDirs
from virt_domain.layout import LauncherLayout

from virt_launcher.conversion import DomainBuilder, VmiRejectedError
from virt_launcher.disks import (
    block_claim_volumes,
    check_storage_images,
    container_disk_images,
    prepare_claim_images,
    prepare_container_disk_overlays,
    prepare_efi_vars,
    prepare_empty_disks,
    prepare_tpm_state,
)
from virt_launcher.hotplug import present_hotplug_volumes
from virt_launcher.media import prepare_media

__all__ = ["converter_builder", "converter_target_builder"]


def converter_builder(dirs: LauncherDirs) -> DomainBuilder:
    """A builder that loads the VMI with kubevirt_api and converts it with virt_domain."""
    return _builder(dirs, migration_target=False)


def converter_target_builder(dirs: LauncherDirs) -> DomainBuilder:
    """:func:`converter_builder` for a migration target: the disks' files at the same
    paths, with blank ISOs of the sizes the source's have."""
    return _builder(dirs, migration_target=True)


def _builder(dirs: LauncherDirs, migration_target: bool) -> DomainBuilder:
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
        block = block_claim_volumes(typed, layout)
        if not block <= options.block_volumes:
            options = replace(options, block_volumes=options.block_volumes | block)
        hotplugged = present_hotplug_volumes(typed, layout)
        if not hotplugged <= options.hotplug_volumes:
            options = replace(options, hotplug_volumes=options.hotplug_volumes | hotplugged)
        images = container_disk_images(typed, layout)
        if images:
            options = replace(
                options, container_disk_images={**options.container_disk_images, **images}
            )
        try:
            xml = convert_to_xml(typed, options, layout)
        except ConversionError as exc:
            raise VmiRejectedError(exc.field, exc.message) from None
        # The files the domain's disks name, before libvirt sees the domain.
        check_storage_images(typed, layout, options.block_volumes, options.hotplug_volumes)
        prepare_media(typed, layout, blank=migration_target)
        prepare_container_disk_overlays(typed, layout, options.container_disk_images)
        prepare_empty_disks(typed, layout)
        prepare_claim_images(typed, layout)
        prepare_efi_vars(typed, layout)
        prepare_tpm_state(typed, layout)
        return xml

    return build
