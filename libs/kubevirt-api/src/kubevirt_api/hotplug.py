"""The volume-hotplug contract: which volumes are hotplugged, their phases, the attachment pod.

One owner for what virt-controller (which renders the attachment pod and writes the early
phases), virt-handler (which mounts the claim into the launcher and writes the later
phases) and virt-launcher (which attaches the disk) agree on. Names are upstream
KubeVirt's (`pkg/virt-controller/services/template.go`, `pkg/virt-handler/hotplug-disk`).

A hotplugged volume's `status.volumeStatus[]` entry moves through

    Pending → Bound → AttachedToNode (controller) → MountedToPod → Ready (handler)

and, once the volume left the spec, Detaching (controller) → UnMountedFromPod (handler),
after which the controller drops the entry. A memoryDump volume (`kubevirt_api.memorydump`)
is mounted as a directory and goes on from MountedToPod to the memory-dump phases.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from .memorydump import MemoryDumpVolumePhase
from .models import VirtualMachineInstance

__all__ = [
    "ATTACHMENT_CONTAINER",
    "ATTACHMENT_LABEL_VALUE",
    "ATTACHMENT_MOUNT_ROOT",
    "ATTACHMENT_VOLUMES_ANNOTATION",
    "DISK_IMAGE",
    "MOUNTED_PHASES",
    "VolumePhase",
    "attachment_volume_dir",
    "hotplug_claims",
    "hotpluggable_volumes",
    "is_hotplug_volume",
    "memory_dump_volumes",
]


class VolumePhase(enum.StrEnum):
    """`status.volumeStatus[].phase` of a hotplugged volume (upstream's VolumePhase)."""

    PENDING = "Pending"
    BOUND = "Bound"
    ATTACHED_TO_NODE = "AttachedToNode"
    MOUNTED_TO_POD = "MountedToPod"
    READY = "Ready"
    DETACHING = "Detaching"
    UNMOUNTED_FROM_POD = "UnMountedFromPod"


#: Phases in which the claim's disk (or dump directory) is, or may still be, mounted into
#: the launcher.
MOUNTED_PHASES = frozenset(
    {VolumePhase.MOUNTED_TO_POD, VolumePhase.READY, VolumePhase.DETACHING, *MemoryDumpVolumePhase}
)

#: The attachment pod's `kubevirt.io` label value (upstream's).
ATTACHMENT_LABEL_VALUE = "hotplug-disk"
#: The attachment pod's one container.
ATTACHMENT_CONTAINER = "hotplug-disk"
#: Where the attachment container mounts each claim: `<root>/<volume>/` (upstream: /path).
ATTACHMENT_MOUNT_ROOT = "/path"
#: The attachment pod lists the VMI volumes it holds, comma-separated and sorted.
ATTACHMENT_VOLUMES_ANNOTATION = "kubevirt.io/hotplug-volumes"
#: A filesystem claim's image, as for a claim the launcher pod mounts itself.
DISK_IMAGE = "disk.img"


def attachment_volume_dir(volume: str) -> str:
    """Where the attachment container has the claim of VMI volume `volume`."""
    return f"{ATTACHMENT_MOUNT_ROOT}/{volume}"


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def is_hotplug_volume(volume: Mapping[str, Any]) -> bool:
    """Whether a raw VMI volume was (or may be) hot-plugged: a PVC or DataVolume source
    marked ``hotpluggable: true``, or a memoryDump volume (always hot-plugged, as upstream)."""
    if "memoryDump" in volume:
        return True
    return any(
        _map(volume.get(source)).get("hotpluggable") is True
        for source in ("persistentVolumeClaim", "dataVolume")
    )


def hotplug_claims(spec: Mapping[str, Any], *, memory_dump: bool = True) -> dict[str, str]:
    """VMI volume name → claim name for every hotplugged volume of a raw VMI spec (without
    the memoryDump ones if `memory_dump` is false)."""
    out: dict[str, str] = {}
    for volume in spec.get("volumes") or ():
        volume = _map(volume)
        if not is_hotplug_volume(volume) or (not memory_dump and "memoryDump" in volume):
            continue
        claim = (
            _map(volume.get("persistentVolumeClaim")).get("claimName")
            or _map(volume.get("memoryDump")).get("claimName")
            or _map(volume.get("dataVolume")).get("name")
        )
        if volume.get("name") and claim:
            out[str(volume["name"])] = str(claim)
    return out


def memory_dump_volumes(spec: Mapping[str, Any]) -> frozenset[str]:
    """The names of a raw VMI spec's memoryDump volumes (mounted as a directory, no disk)."""
    return frozenset(
        str(_map(v).get("name"))
        for v in spec.get("volumes") or ()
        if "memoryDump" in _map(v) and _map(v).get("name")
    )


def hotpluggable_volumes(vmi: VirtualMachineInstance) -> frozenset[str]:
    """The typed VMI's volumes that become hotplugged disks: a claim or DataVolume marked
    ``hotpluggable`` (added to or removed from the running guest, never one of the launcher
    pod's own volumes). memoryDump volumes are hotplugged too, but are no disk."""
    return frozenset(
        volume.name
        for volume in vmi.spec.volumes or ()
        if (volume.persistent_volume_claim and volume.persistent_volume_claim.hotpluggable)
        or (volume.data_volume and volume.data_volume.hotpluggable)
    )
