"""Volume hotplug, the handler's half: a claim's disk into the launcher, and the later phases.

As upstream (`pkg/virt-handler/hotplug-disk/mount.go`): once virt-controller's attachment
pod holds the claim on this node (phase AttachedToNode), the claim's `disk.img` in that pod
is bind-mounted onto `/var/run/kubevirt/hotplug-disks/<volume>.img` in the launcher's
mount namespace (`mountns`, run as its own process) → MountedToPod; the launcher's next
Sync attaches it to the domain → Ready, with the guest's device as `target`. A volume that
left the spec (Detaching) is detached by that Sync first, then unmounted → UnMountedFromPod.

A memoryDump volume (`kubevirt_api.memorydump`) is bound as a directory onto
`/var/run/kubevirt/hotplug-disks/<volume>/` instead; then, in the same pass, its phase goes
MemoryDumpInProgress with the dump's file name, the launcher is asked for libvirt's core
dump into it, and the launcher's record of the dump (on its Domain) makes the phase
MemoryDumpCompleted or MemoryDumpFailed. virt-controller then takes the volume out.

Block claims are not hotplugged here: upstream mknods the device into the launcher and
opens the cgroup's device filter for it, which this handler does not do yet; such a volume
stays AttachedToNode with a message saying so.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import posixpath
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubevirt_api.hotplug import (
    ATTACHMENT_CONTAINER,
    DISK_IMAGE,
    MOUNTED_PHASES,
    VolumePhase,
    attachment_volume_dir,
    hotplug_claims,
    memory_dump_volumes,
)
from kubevirt_api.memorydump import MemoryDumpVolumePhase, dump_file_name
from virt_domain.launcher_pod import LAUNCHER_UID
from virt_domain.layout import LauncherLayout

from . import mountns
from .procs import find_pod_process
from .status import MemoryDumpView

__all__ = [
    "BLOCK_UNSUPPORTED",
    "HotplugError",
    "VolumeWork",
    "container_pid",
    "dump_path",
    "dumps_to_take",
    "hotplug_status",
    "mount_disk",
    "plan_volumes",
    "unmount_disk",
]

_LAYOUT = LauncherLayout()
_COMPUTE = "compute"
_CONTAINER_ID = re.compile(r"^[a-z0-9]+://([0-9a-f]{64})$")
BLOCK_UNSUPPORTED = "block volumes cannot be hotplugged by this virt-handler yet"


class HotplugError(Exception):
    """A hotplug step failed; the message says which (retried on the next pass)."""


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _container_id(pod: Mapping[str, Any], container: str) -> str:
    for status in _map(pod.get("status")).get("containerStatuses") or ():
        status = _map(status)
        if status.get("name") == container and _map(status.get("state")).get("running"):
            found = _CONTAINER_ID.match(str(status.get("containerID") or ""))
            if found:
                return found.group(1)
    raise HotplugError(
        f"container {container} of pod {_map(pod.get('metadata')).get('name')} is not running"
    )


def container_pid(pod: Mapping[str, Any], container: str, proc: str = "/proc") -> int:
    """A process of `container` in `pod` (its cgroup names the pod and the container's id)."""
    cid = _container_id(pod, container)
    pid = find_pod_process(str(_map(pod.get("metadata")).get("uid") or ""), cid, proc)
    if pid is not None:
        return pid
    raise HotplugError(f"no process of container {container} ({cid[:12]}) found")


async def _run_mountns(*args: str) -> str:
    # The module's file, not `-m`: a fresh interpreter need not import the whole handler.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        mountns.__file__,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise HotplugError(
            err.decode(errors="replace").strip() or f"mountns exited {process.returncode}"
        )
    return out.decode().strip()


def _target(volume: str, directory: bool) -> str:
    return _LAYOUT.memory_dump_dir(volume) if directory else _LAYOUT.hotplug_disk_image(volume)


async def mount_disk(
    launcher: Mapping[str, Any],
    attachment: Mapping[str, Any],
    volume: str,
    *,
    directory: bool = False,
) -> str:
    """Bind the attachment pod's disk.img of `volume` (or, for a memory dump, the claim's
    directory) into the launcher (idempotent)."""
    source_pid = await asyncio.to_thread(container_pid, attachment, ATTACHMENT_CONTAINER)
    target_pid = await asyncio.to_thread(container_pid, launcher, _COMPUTE)
    source = attachment_volume_dir(volume)
    return await _run_mountns(
        "mount",
        "--source-pid",
        str(source_pid),
        "--source",
        source if directory else f"{source}/{DISK_IMAGE}",
        "--target-pid",
        str(target_pid),
        "--target",
        _target(volume, directory),
        "--uid",
        str(LAUNCHER_UID),
    )


async def unmount_disk(launcher: Mapping[str, Any], volume: str, *, directory: bool = False) -> str:
    """Take `volume`'s disk (or dump directory) out of the launcher (idempotent)."""
    target_pid = await asyncio.to_thread(container_pid, launcher, _COMPUTE)
    return await _run_mountns(
        "umount", "--target-pid", str(target_pid), "--target", _target(volume, directory)
    )


def dump_path(volume: str, file_name: str) -> str:
    """Where the launcher writes a memory dump: in the volume's bound directory."""
    return posixpath.join(_LAYOUT.memory_dump_dir(volume), file_name)


@dataclass(frozen=True)
class VolumeWork:
    """What one pass does for a VMI's hotplugged volumes."""

    #: volume → attachment pod name: to be (or stay) mounted into the launcher.
    mount: Mapping[str, str]
    #: volumes that left the spec while mounted: detach from the domain, then unmount.
    unmount: tuple[str, ...]
    #: block volumes (not supported yet).
    block: tuple[str, ...]
    #: the memoryDump volumes among `mount` and `unmount`: bound as directories.
    dumps: frozenset[str] = field(default_factory=frozenset)


_MOUNTABLE = frozenset(
    {
        VolumePhase.ATTACHED_TO_NODE,
        VolumePhase.MOUNTED_TO_POD,
        VolumePhase.READY,
        *MemoryDumpVolumePhase,
    }
)


def plan_volumes(vmi: Mapping[str, Any]) -> VolumeWork:
    """From the VMI's spec and volumeStatus (the controller's attachment pod per volume)."""
    spec = hotplug_claims(_map(vmi.get("spec")))
    dumps = set(memory_dump_volumes(_map(vmi.get("spec"))))
    mount: dict[str, str] = {}
    unmount: list[str] = []
    block: list[str] = []
    for entry in _map(vmi.get("status")).get("volumeStatus") or ():
        entry = _map(entry)
        name = str(entry.get("name") or "")
        attach = _map(entry.get("hotplugVolume"))
        if not attach:
            continue
        if entry.get("memoryDumpVolume"):
            dumps.add(name)  # a dump volume that left the spec is still a directory
        if name not in spec:
            if entry.get("phase") in MOUNTED_PHASES:
                unmount.append(name)
            continue
        if _map(entry.get("persistentVolumeClaimInfo")).get("volumeMode") == "Block":
            block.append(name)
            continue
        if entry.get("phase") in _MOUNTABLE and attach.get("attachPodName"):
            mount[name] = str(attach["attachPodName"])
    return VolumeWork(
        mount,
        tuple(sorted(unmount)),
        tuple(sorted(block)),
        frozenset(dumps & {*mount, *unmount}),
    )


def _dump_phase(
    vmi: Mapping[str, Any],
    entry: dict[str, Any],
    dump: MemoryDumpView | None,
    now: dt.datetime,
) -> None:
    """A mounted memoryDump volume's entry, moved on (upstream's updateMemoryDumpInfo)."""
    name = str(entry.get("name") or "")
    info = dict(_map(entry.get("memoryDumpVolume")))
    if entry.get("phase") in (VolumePhase.ATTACHED_TO_NODE, VolumePhase.MOUNTED_TO_POD):
        vmi_name = str(_map(vmi.get("metadata")).get("name") or "")
        info["targetFileName"] = dump_file_name(vmi_name, name, now)
        entry["phase"] = MemoryDumpVolumePhase.IN_PROGRESS
        entry["reason"] = "VolumeMountedToPod"
        entry["message"] = f"Memory dump Volume {name} is attached, getting memory dump"
    elif (
        entry.get("phase") == MemoryDumpVolumePhase.IN_PROGRESS
        and dump is not None
        and dump.file_name == info.get("targetFileName")
    ):
        if dump.start_timestamp:
            info["startTimestamp"] = dump.start_timestamp
        if dump.completed and dump.failed:
            entry["phase"] = MemoryDumpVolumePhase.FAILED
            entry["message"] = f"Memory dump to pvc {name} failed: {dump.failure_reason}"
            info["endTimestamp"] = dump.end_timestamp
        elif dump.completed:
            entry["phase"] = MemoryDumpVolumePhase.COMPLETED
            entry["reason"] = "VolumeReady"
            entry["message"] = f"Memory dump to Volume {name} has completed successfully"
            info["endTimestamp"] = dump.end_timestamp
    entry["memoryDumpVolume"] = info


def dumps_to_take(
    entries: Sequence[Mapping[str, Any]], dump: MemoryDumpView | None
) -> list[tuple[str, str]]:
    """(volume, file name) of each dump in progress the launcher has not finished: ask it
    (it ignores a file it is already writing)."""
    out = []
    for entry in entries:
        info = _map(entry.get("memoryDumpVolume"))
        target = str(info.get("targetFileName") or "")
        if entry.get("phase") != MemoryDumpVolumePhase.IN_PROGRESS or not target:
            continue
        if dump is not None and dump.file_name == target and dump.completed:
            continue
        out.append((str(entry.get("name") or ""), target))
    return out


def hotplug_status(
    vmi: Mapping[str, Any],
    mounted: Sequence[str],
    unmounted: Sequence[str],
    disks: Mapping[str, str],
    block: Sequence[str] = (),
    *,
    dumps: frozenset[str] = frozenset(),
    dump: MemoryDumpView | None = None,
    now: dt.datetime | None = None,
) -> list[dict[str, Any]] | None:
    """The VMI's volumeStatus with the handler's phases: MountedToPod (mounted), Ready (the
    domain has the disk: `disks` is volume → guest device), UnMountedFromPod, and the
    memory-dump phases of the mounted `dumps` (`dump`: the launcher's record); None when
    nothing changes."""
    current = [dict(_map(e)) for e in _map(vmi.get("status")).get("volumeStatus") or ()]
    out: list[dict[str, Any]] = []
    for entry in current:
        entry = dict(entry)
        name = str(entry.get("name") or "")
        if name in unmounted:
            entry.update(phase=VolumePhase.UNMOUNTED_FROM_POD, target="")
            entry.pop("message", None)
            entry.pop("reason", None)
        elif name in block:
            entry["message"] = BLOCK_UNSUPPORTED
        elif name in mounted and name in dumps:
            _dump_phase(vmi, entry, dump, now or dt.datetime.now(dt.UTC))
        elif name in mounted:
            if name in disks:
                entry.update(phase=VolumePhase.READY, target=disks[name])
                entry["reason"] = "VolumeReady"
                entry["message"] = "Successfully attach hotplugged volume " + name + " to VM"
            elif entry.get("phase") != VolumePhase.READY:
                entry["phase"] = VolumePhase.MOUNTED_TO_POD
                entry["reason"] = "VolumeMountedToPod"
                entry["message"] = f"Volume {name} has been mounted in virt-launcher pod"
        out.append(entry)
    return out if out != current else None
