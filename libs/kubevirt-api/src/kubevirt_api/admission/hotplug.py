"""Volume hotplug: which changes of a running VMI's volumes and disks are allowed.

Upstream's AdmitHotplugStorage (pkg/storage/admitters/storagehotplug.go): KubeVirt's own
components may add or remove hotpluggable persistentVolumeClaim volumes (and memoryDump
volumes) with their disks; every other volume and its disk stays exactly as it was.
A volume is a hotplug volume when its source says ``hotpluggable: true`` (upstream reads
the same from ``status.volumeStatus``; the flag is what the subresource and the VM
controller write, so it is the one truth here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..hotplug import is_hotplug_volume
from ..values import as_bool, as_int, as_list, as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .storage import DATA_VOLUME_UNSUPPORTED, check_disk_details

__all__ = [
    "HOTPLUG_DISK_BUSES",
    "HOTPLUG_LUN_BUSES",
    "check_hotplug_disk",
    "validate_hotplug_storage",
]

#: Buses a hotplugged disk may use (QEMU hot-adds only SCSI and virtio-blk devices).
HOTPLUG_DISK_BUSES: tuple[str, ...] = ("scsi", "virtio")
HOTPLUG_LUN_BUSES: tuple[str, ...] = ("scsi",)
_HOTPLUG_SOURCES = ("persistentVolumeClaim", "dataVolume")


def check_hotplug_disk(
    disk: object, name: str, field: FieldPath, prefix: str = "Hotplug configuration"
) -> list[Cause]:
    """The disk of a volume being hot-plugged: a disk on bus scsi or virtio, or a LUN on
    scsi; IOThreads only on virtio; a boot order, if any, above 0; valid cache and serial."""
    if not isinstance(disk, Mapping):
        return [
            Cause(
                str(field),
                f"{prefix} for [{name}] requires the disk field to be set.",
                CauseType.REQUIRED,
            )
        ]
    causes: list[Cause] = []
    if "disk" in disk and "lun" not in disk and "cdrom" not in disk:
        target, valid, what = "disk", HOTPLUG_DISK_BUSES, "disk"
    elif "lun" in disk and "disk" not in disk and "cdrom" not in disk:
        target, valid, what = "lun", HOTPLUG_LUN_BUSES, "LUN"
    else:
        return [
            Cause(
                str(field),
                f"{prefix} for [{name}] requires diskDevice of type 'disk' or 'lun' to be used.",
                CauseType.NOT_SUPPORTED,
            )
        ]
    bus = as_str(as_map(disk.get(target)).get("bus")) or ""
    if bus not in valid:
        allowed = " or ".join(f"'{b}'" for b in valid)
        causes.append(
            Cause(
                str(field.child(target, "bus")),
                f"{prefix} for {what} [{name}] requires bus to be {allowed}. "
                f"[{bus}] is not permitted.",
                CauseType.NOT_SUPPORTED,
            )
        )
    if as_bool(disk.get("dedicatedIOThread")) is True and bus != "virtio":
        causes.append(
            Cause(
                str(field.child("dedicatedIOThread")),
                f"{prefix} for [{name}] requires virtio bus for IOThreads.",
            )
        )
    if "bootOrder" in disk:
        order = as_int(disk.get("bootOrder"))
        if order is None or order < 1:
            causes.append(
                Cause(
                    str(field.child("bootOrder")),
                    f"{field} must have a boot order > 0, if supplied",
                )
            )
    causes.extend(check_disk_details(disk, field))
    return causes


def _by_name(
    items: Sequence[Any], path: FieldPath
) -> dict[str, tuple[FieldPath, Mapping[str, Any]]]:
    found: dict[str, tuple[FieldPath, Mapping[str, Any]]] = {}
    for i, raw in enumerate(items):
        item = as_map(raw)
        name = as_str(item.get("name"))
        if name:
            found[name] = (path.index(i), item)
    return found


def _check_pairing(
    volumes: Mapping[str, tuple[FieldPath, Mapping[str, Any]]],
    disks: Mapping[str, tuple[FieldPath, Mapping[str, Any]]],
    filesystems: Sequence[Any],
) -> list[Cause]:
    """Each volume (but memoryDump) backs a disk or a filesystem, and each disk has a
    volume (a CD-ROM may be empty: declarative hotplug ejects media so)."""
    used = set(disks) | {as_str(as_map(f).get("name")) for f in filesystems}
    causes: list[Cause] = []
    for name, (vpath, volume) in volumes.items():
        if "memoryDump" not in volume and name not in used:
            causes.append(
                Cause(
                    str(vpath.child("name")),
                    f"volume {name} doesn't have a matching disk; add a disk named {name}",
                )
            )
    for name, (dpath, disk) in disks.items():
        if name not in volumes and "cdrom" not in disk:
            causes.append(
                Cause(
                    str(dpath.child("name")),
                    f"disk {name} has no volume of that name; remove the disk with its volume",
                )
            )
    return causes


def _migrated(vmi: Mapping[str, Any]) -> set[str]:
    """Volumes a volume migration is moving (their source may change underneath)."""
    return {
        name
        for item in as_list(as_map(vmi.get("status")).get("migratedVolumes"))
        if (name := as_str(as_map(item).get("volumeName")))
    }


def validate_hotplug_storage(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """The volume and disk changes of a VMI update (`new` against `old`, whole VMIs).

    Allowed: adding a hotpluggable persistentVolumeClaim volume with a new disk, removing
    a hotplug volume with its disk. Refused, with upstream's wording: any change to a
    permanent (non-hotplug) volume or its disk, a change to a hotplug volume or its disk
    once added, a new volume that is not hotpluggable, a DataVolume (no CDI here).
    """
    root = FieldPath("spec")
    new_spec, old_spec = as_map(new.get("spec")), as_map(old.get("spec"))
    disks_path = root.child("domain", "devices", "disks")
    new_devices = as_map(as_map(new_spec.get("domain")).get("devices"))
    old_devices = as_map(as_map(old_spec.get("domain")).get("devices"))
    new_volumes = _by_name(as_list(new_spec.get("volumes")), root.child("volumes"))
    old_volumes = _by_name(as_list(old_spec.get("volumes")), root.child("volumes"))
    new_disks = _by_name(as_list(new_devices.get("disks")), disks_path)
    old_disks = _by_name(as_list(old_devices.get("disks")), disks_path)
    if (
        new_spec.get("volumes") == old_spec.get("volumes")
        and new_devices.get("disks") == old_devices.get("disks")
        and new_devices.get("filesystems") == old_devices.get("filesystems")
    ):
        return []  # another field changed (CPU or memory hotplug): not this rule's business
    migrated = _migrated(new)
    causes = _check_pairing(new_volumes, new_disks, as_list(new_devices.get("filesystems")))

    for name, (_, old_volume) in old_volumes.items():
        if not is_hotplug_volume(old_volume) and name not in new_volumes:
            causes.append(
                Cause(
                    str(root.child("volumes")),
                    f"Number of permanent volumes has changed: permanent volume {name} was "
                    "removed; only hotplug volumes can be removed from a running VMI",
                    CauseType.FORBIDDEN,
                )
            )
    for name, (vpath, volume) in new_volumes.items():
        disk = new_disks.get(name)
        old_disk = old_disks.get(name)
        if name in old_volumes:
            old_volume = old_volumes[name][1]
            kind = "hotplug" if is_hotplug_volume(old_volume) else "permanent"
            if volume != old_volume and name not in migrated:
                causes.append(
                    Cause(str(vpath), f"{kind} volume {name}, changed", CauseType.FORBIDDEN)
                )
            elif (
                "memoryDump" not in volume
                and disk is not None
                and (old_disk is None or disk[1] != old_disk[1])
            ):
                causes.append(
                    Cause(str(disk[0]), f"{kind} disk {name}, changed", CauseType.FORBIDDEN)
                )
            continue
        if not is_hotplug_volume(volume):
            sources = [s for s in _HOTPLUG_SOURCES if s in volume]
            causes.append(
                Cause(
                    str(vpath),
                    f"volume {name} is not hotpluggable: a volume added to a running VMI must "
                    "be a persistentVolumeClaim with hotpluggable: true"
                    if sources
                    else f"volume {name} is not a PVC or DataVolume",
                    CauseType.FORBIDDEN,
                )
            )
            continue
        if "dataVolume" in volume:
            causes.append(Cause(str(vpath.child("dataVolume")), DATA_VOLUME_UNSUPPORTED))
            continue
        if "persistentVolumeClaim" in volume and not as_str(
            as_map(volume["persistentVolumeClaim"]).get("claimName")
        ):
            causes.append(
                Cause(
                    str(vpath.child("persistentVolumeClaim", "claimName")),
                    "claimName is required",
                    CauseType.REQUIRED,
                )
            )
        if "memoryDump" in volume:
            continue
        if disk is not None and old_disk is None:  # no disk: _check_pairing said so
            causes.extend(check_hotplug_disk(disk[1], name, disk[0]))
    return causes
