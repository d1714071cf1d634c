"""Files the domain's disks need before it is defined: containerDisk overlays, emptyDisks,
the disk.img of filesystem-mode claims, and the EFI variable store's directory.

The images a user's storage holds (a filesystem PVC's ``disk.img``, a hostDisk's file)
are checked too: QEMU would follow a symlink there to any file the launcher can read
(its service-account token, another volume), so only a regular file is accepted
(upstream's GHSA-qw6q-3pgr-5cwq).

A containerDisk's image (copied into the pod by an init container, or an image volume's
own file: `container_disk_images` finds which) stays read-only;
the guest writes to a qcow2 overlay in the ephemeral dir whose backing file is that
image, as upstream does. An emptyDisk is a fresh qcow2 of its capacity. Both are made
the same way on a migration target, where block migration then fills them. Blocking
(runs qemu-img): call it off the event loop.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Collection, Mapping

from kubevirt_api import VirtualMachineInstance
from kubevirt_api.models import PersistentVolumeClaimInfo
from service_kit import get_logger
from virt_domain import hotpluggable_volumes
from virt_domain.layout import LauncherLayout

from virt_launcher.conversion import VmiRejectedError

__all__ = [
    "LESS_PVC_SPACE_TOLERATION",
    "MINIMUM_PVC_RESERVE_BYTES",
    "ClaimImageError",
    "block_claim_volumes",
    "check_storage_images",
    "claim_image_size",
    "container_disk_images",
    "create_claim_image",
    "prepare_claim_images",
    "prepare_container_disk_overlays",
    "prepare_efi_vars",
    "prepare_empty_disks",
    "prepare_tpm_state",
]

_log = get_logger(__name__)
_MIB = 1 << 20
#: Upstream's defaults (developerConfiguration.pvcTolerateLessSpaceUpToPercent and
#: minimumReservePVCBytes): a disk.img may be up to 10 % smaller than its claim when the
#: volume has less room, and 128 KiB of the volume stay free.
LESS_PVC_SPACE_TOLERATION = 10
MINIMUM_PVC_RESERVE_BYTES = 131072


def _format(image: str) -> str:
    info = subprocess.run(
        ["qemu-img", "info", "--output=json", image],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if info.returncode != 0:
        return "raw"
    found = json.loads(info.stdout).get("format")
    return found if found in ("qcow2", "raw") else "raw"


def _qemu_img_create(field: str, what: str, argv: list[str]) -> None:
    made = subprocess.run(
        ["qemu-img", "create", *argv], capture_output=True, text=True, check=False, timeout=60
    )
    if made.returncode != 0:
        raise VmiRejectedError(field, f"{what}: {made.stderr.strip()}")


def prepare_empty_disks(vmi: VirtualMachineInstance, layout: LauncherLayout) -> None:
    """Create the missing image of every emptyDisk volume (existing ones are kept)."""
    for index, volume in enumerate(vmi.spec.volumes or ()):
        if volume.empty_disk is None:
            continue
        field = f"spec.volumes[{index}].emptyDisk.capacity"
        capacity = volume.empty_disk.capacity.to_int()
        if capacity <= 0:
            raise VmiRejectedError(field, "must be a positive quantity, e.g. 1Gi")
        image = layout.empty_disk_image(volume.name)
        if os.path.lexists(image):
            continue
        os.makedirs(os.path.dirname(image), exist_ok=True)
        _qemu_img_create(field, "image", ["-f", "qcow2", image, str(capacity)])


def container_disk_images(vmi: VirtualMachineInstance, layout: LauncherLayout) -> dict[str, str]:
    """The image file of each containerDisk volume without `path` that came as an image
    volume: no copy at `<volume>/disk.img`, the one regular file (the first by name, as
    the copy takes it) in the image's `disk/` directory instead."""
    found: dict[str, str] = {}
    for volume in vmi.spec.volumes or ():
        source = volume.container_disk
        if source is None or source.path is not None:
            continue
        if os.path.lexists(layout.container_disk_image(volume.name, None)):
            continue
        directory = layout.container_disk_image_dir(volume.name)
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found[volume.name] = path
                break
    return found


def prepare_container_disk_overlays(
    vmi: VirtualMachineInstance, layout: LauncherLayout, images: Mapping[str, str]
) -> None:
    """Create the missing overlay of every containerDisk volume (existing ones are kept);
    `images` as `container_disk_images` found them."""
    for index, volume in enumerate(vmi.spec.volumes or ()):
        source = volume.container_disk
        if source is None:
            continue
        image = images.get(volume.name) or layout.container_disk_image(volume.name, source.path)
        overlay = layout.overlay_image(volume.name)
        if os.path.lexists(overlay):
            continue
        if not os.path.isfile(image) or os.path.islink(image):
            raise VmiRejectedError(
                f"spec.volumes[{index}].containerDisk",
                f"the image file {image} is missing from the pod (is the image's disk "
                "file under /disk/, or at the volume's path?)",
            )
        os.makedirs(os.path.dirname(overlay), exist_ok=True)
        _qemu_img_create(
            f"spec.volumes[{index}].containerDisk",
            "overlay",
            ["-f", "qcow2", "-F", _format(image), "-b", image, overlay],
        )


def _claim_infos(vmi: VirtualMachineInstance) -> dict[str, PersistentVolumeClaimInfo]:
    statuses = (vmi.status.volume_status if vmi.status is not None else None) or ()
    return {
        s.name: s.persistent_volume_claim_info
        for s in statuses
        if s.persistent_volume_claim_info is not None
    }


def _is_block_device(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def block_claim_volumes(vmi: VirtualMachineInstance, layout: LauncherLayout) -> frozenset[str]:
    """Claim volumes the launcher gets as block devices: the VMI's volumeStatus says
    volumeMode Block, or the pod has a block device at /dev/<volume> (upstream's test).
    Hotplugged volumes are not among them: they come as files (`virt_launcher.hotplug`)."""
    infos = _claim_infos(vmi)
    hotplugged = hotpluggable_volumes(vmi)
    out = set()
    for volume in vmi.spec.volumes or ():
        if volume.persistent_volume_claim is None and volume.data_volume is None:
            continue
        if volume.name in hotplugged:
            continue  # in the hotplug-disks dir, as a file
        info = infos.get(volume.name)
        if (info is not None and info.volume_mode == "Block") or _is_block_device(
            layout.block_volume_device(volume.name)
        ):
            out.add(volume.name)
    return frozenset(out)


def claim_image_size(info: PersistentVolumeClaimInfo, available: int) -> int:
    """The size of a new disk.img, as upstream's host-disk: the claim's request when its
    capacity is larger (a volume bigger than asked for) or unknown, else the capacity;
    rounded down to whole MiB; shrunk to `available` bytes when that is within the 10 % toleration.
    Raises ValueError with the reason otherwise."""
    capacity = (info.capacity or {}).get("storage")
    requested = (info.requests or {}).get("storage")
    if capacity is None and requested is None:
        raise ValueError("the claim reports neither a capacity nor a storage request")
    if requested is not None and (capacity is None or capacity.to_int() > requested.to_int()):
        size = requested.to_int()
    else:
        assert capacity is not None
        size = capacity.to_int()
    size -= size % _MIB
    if size == 0:
        raise ValueError("the size is too low, must be at least 1MiB")
    if size <= available:
        return size
    tolerated = size * (100 - LESS_PVC_SPACE_TOLERATION) // 100
    if tolerated > available:
        raise ValueError(
            f"not enough space, demanded size {size} B is bigger than available space "
            f"{available} B, also after taking {LESS_PVC_SPACE_TOLERATION} % toleration "
            "into account"
        )
    _log.info(
        "PV size too small; using it anyway, it is within the toleration",
        expected_bytes=size,
        found_bytes=available,
        toleration_percent=LESS_PVC_SPACE_TOLERATION,
    )
    return available


def _available(directory: str) -> int:
    found = os.statvfs(directory)
    return found.f_bavail * found.f_frsize - MINIMUM_PVC_RESERVE_BYTES


def prepare_claim_images(vmi: VirtualMachineInstance, layout: LauncherLayout) -> None:
    """Create the missing disk.img of every filesystem-mode claim volume: a sparse raw file
    of the claim's size, owned by this launcher's user (qemu, 107). An existing one is the
    guest's data and stays as it is. Hotplugged volumes are the attachment pod's to
    prepare (`virt_launcher.attachment`)."""
    infos = _claim_infos(vmi)
    block = block_claim_volumes(vmi, layout)
    hotplugged = hotpluggable_volumes(vmi)
    for index, volume in enumerate(vmi.spec.volumes or ()):
        if volume.persistent_volume_claim is None and volume.data_volume is None:
            continue
        if volume.name in block or volume.name in hotplugged:
            continue
        field = f"spec.volumes[{index}]"
        image = layout.filesystem_volume_image(volume.name)
        try:
            create_claim_image(image, infos.get(volume.name))
        except ClaimImageError as exc:
            raise VmiRejectedError(field, str(exc)) from None


class ClaimImageError(Exception):
    """A claim's disk.img cannot be used or made; the message says why."""


def create_claim_image(image: str, info: PersistentVolumeClaimInfo | None) -> bool:
    """Create ``image`` (a claim's ``disk.img``) when it is missing: a sparse raw file of the
    claim's size (`claim_image_size`), mode 0660, owned by the running user. Whether it
    was created; an existing regular file is kept. Raises ClaimImageError otherwise."""
    directory = os.path.dirname(image)
    if os.path.lexists(image):
        if os.path.islink(image) or not os.path.isfile(image):
            raise ClaimImageError(f"{image} is not a regular file")
        return False
    if not os.path.isdir(directory) or os.path.islink(directory):
        raise ClaimImageError(f"the claim is not mounted at {directory}")
    if info is None:
        raise ClaimImageError(
            "the claim's size is not known yet (status.volumeStatus has no "
            "persistentVolumeClaimInfo for it)"
        )
    try:
        size = claim_image_size(info, _available(directory))
    except ValueError as exc:
        raise ClaimImageError(f"unable to create {image}: {exc}") from None
    # O_EXCL|O_NOFOLLOW: never through a link someone put there.
    fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o660)
    try:
        os.fchmod(fd, 0o660)  # whatever the umask: QEMU's group shares it
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    return True


def check_storage_images(
    vmi: VirtualMachineInstance,
    layout: LauncherLayout,
    block_volumes: Collection[str],
    hotplug_volumes: Collection[str] = (),
) -> None:
    """Refuse a PVC's, DataVolume's or hostDisk's image that is not a regular file itself.

    A missing image is left to libvirt (its error names the file); a symlink, a directory
    or a device node is refused by field, never opened. A hotplugged volume's image is
    checked while it is present (in ``hotplug_volumes``) and skipped otherwise.
    """
    hotplugged = hotpluggable_volumes(vmi)
    for index, volume in enumerate(vmi.spec.volumes or ()):
        field = f"spec.volumes[{index}]"
        if volume.name in hotplugged:
            if volume.name not in hotplug_volumes:
                continue
            image = layout.hotplug_disk_image(volume.name)
        elif volume.host_disk is not None:
            image = layout.host_disk_image(volume.name, volume.host_disk.path)
            field += ".hostDisk.path"
        elif (
            volume.persistent_volume_claim is not None
            or volume.data_volume is not None
            or (volume.ephemeral is not None and volume.ephemeral.persistent_volume_claim)
        ):
            if volume.name in block_volumes:
                continue
            image = layout.filesystem_volume_image(volume.name)
        else:
            continue
        try:
            found = os.lstat(image)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(found.st_mode):
            raise VmiRejectedError(
                field, f"the disk image {image} is a symlink; it must be a regular file"
            )
        if not stat.S_ISREG(found.st_mode):
            raise VmiRejectedError(field, f"the disk image {image} is not a regular file")


def prepare_efi_vars(vmi: VirtualMachineInstance, layout: LauncherLayout) -> None:
    """The EFI variable store's directory (libvirt copies the template into the store's
    path but makes no directory). A persistent store lives on the VM's backend-storage
    claim, which the user's pods may write: one already there must be a regular file, as
    a claim's disk.img must (QEMU would follow a link to any file the launcher can read)."""
    firmware = vmi.spec.domain.firmware
    bootloader = firmware.bootloader if firmware is not None else None
    efi = bootloader.efi if bootloader is not None else None
    if efi is None:
        return
    name = vmi.metadata.name if vmi.metadata is not None else None
    store = layout.nvram(str(name), bool(efi.persistent))
    os.makedirs(os.path.dirname(store), mode=0o700, exist_ok=True)
    if os.path.lexists(store) and (os.path.islink(store) or not os.path.isfile(store)):
        raise VmiRejectedError(
            "spec.domain.firmware.bootloader.efi.persistent",
            f"the EFI variable store {store} is not a regular file",
        )


def prepare_tpm_state(vmi: VirtualMachineInstance, layout: LauncherLayout) -> None:
    """For `devices.tpm.persistent`: swtpm's state on the backend-storage claim. Session-mode
    libvirt keeps it under its own config home (`layout.libvirt_swtpm_dir`), which is made
    a link to the claim's `swtpm/` directory (a directory the user's pods may have
    replaced by a link is refused, as the EFI store is)."""
    tpm = vmi.spec.domain.devices.tpm
    if tpm is None or tpm.enabled is False or not tpm.persistent:
        return
    field = "spec.domain.devices.tpm.persistent"
    state = layout.persistent_swtpm_dir
    if os.path.islink(state) or (os.path.lexists(state) and not os.path.isdir(state)):
        raise VmiRejectedError(field, f"the TPM state directory {state} is not a directory")
    os.makedirs(state, mode=0o700, exist_ok=True)
    link = layout.libvirt_swtpm_dir
    os.makedirs(os.path.dirname(link), mode=0o700, exist_ok=True)
    if os.path.islink(link):
        if os.readlink(link) == state:
            return
        os.unlink(link)
    elif os.path.isdir(link):
        try:
            os.rmdir(link)  # libvirt made it empty at start-up; no TPM ran in this pod yet
        except OSError:
            raise VmiRejectedError(field, f"{link} already holds TPM state") from None
    os.symlink(state, link)
