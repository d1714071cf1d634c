"""Volume hotplug, the handler's half: a claim's disk into the launcher, and the later phases.

As upstream (`pkg/virt-handler/hotplug-disk/mount.go`): once virt-controller's attachment
pod holds the claim on this node (phase AttachedToNode), the claim's `disk.img` in that pod
is bind-mounted onto `/var/run/kubevirt/hotplug-disks/<volume>.img` in the launcher's
mount namespace (`mountns`, run as its own process) → MountedToPod; the launcher's next
Sync attaches it to the domain → Ready, with the guest's device as `target`. A volume that
left the spec (Detaching) is detached by that Sync first, then unmounted → UnMountedFromPod.

Block claims are not hotplugged here: upstream mknods the device into the launcher and
opens the cgroup's device filter for it, which this handler does not do yet; such a volume
stays AttachedToNode with a message saying so.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubevirt_api.hotplug import (
    ATTACHMENT_CONTAINER,
    DISK_IMAGE,
    MOUNTED_PHASES,
    VolumePhase,
    attachment_volume_dir,
    hotplug_claims,
)
from virt_domain.launcher_pod import LAUNCHER_UID
from virt_domain.layout import LauncherLayout

from . import mountns
from .procs import find_pod_process

__all__ = [
    "BLOCK_UNSUPPORTED",
    "HotplugError",
    "VolumeWork",
    "container_pid",
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


async def mount_disk(
    launcher: Mapping[str, Any], attachment: Mapping[str, Any], volume: str
) -> str:
    """Bind the attachment pod's disk.img of `volume` into the launcher (idempotent)."""
    source_pid = await asyncio.to_thread(container_pid, attachment, ATTACHMENT_CONTAINER)
    target_pid = await asyncio.to_thread(container_pid, launcher, _COMPUTE)
    return await _run_mountns(
        "mount",
        "--source-pid",
        str(source_pid),
        "--source",
        f"{attachment_volume_dir(volume)}/{DISK_IMAGE}",
        "--target-pid",
        str(target_pid),
        "--target",
        _LAYOUT.hotplug_disk_image(volume),
        "--uid",
        str(LAUNCHER_UID),
    )


async def unmount_disk(launcher: Mapping[str, Any], volume: str) -> str:
    """Take `volume`'s disk out of the launcher (idempotent)."""
    target_pid = await asyncio.to_thread(container_pid, launcher, _COMPUTE)
    return await _run_mountns(
        "umount", "--target-pid", str(target_pid), "--target", _LAYOUT.hotplug_disk_image(volume)
    )


@dataclass(frozen=True)
class VolumeWork:
    """What one pass does for a VMI's hotplugged volumes."""

    #: volume → attachment pod name: to be (or stay) mounted into the launcher.
    mount: Mapping[str, str]
    #: volumes that left the spec while mounted: detach from the domain, then unmount.
    unmount: tuple[str, ...]
    #: block volumes (not supported yet).
    block: tuple[str, ...]


def plan_volumes(vmi: Mapping[str, Any]) -> VolumeWork:
    """From the VMI's spec and volumeStatus (the controller's attachment pod per volume)."""
    spec = hotplug_claims(_map(vmi.get("spec")))
    mount: dict[str, str] = {}
    unmount: list[str] = []
    block: list[str] = []
    for entry in _map(vmi.get("status")).get("volumeStatus") or ():
        entry = _map(entry)
        name = str(entry.get("name") or "")
        attach = _map(entry.get("hotplugVolume"))
        if not attach:
            continue
        if name not in spec:
            if entry.get("phase") in MOUNTED_PHASES:
                unmount.append(name)
            continue
        if _map(entry.get("persistentVolumeClaimInfo")).get("volumeMode") == "Block":
            block.append(name)
            continue
        if entry.get("phase") in (
            VolumePhase.ATTACHED_TO_NODE,
            VolumePhase.MOUNTED_TO_POD,
            VolumePhase.READY,
        ) and attach.get("attachPodName"):
            mount[name] = str(attach["attachPodName"])
    return VolumeWork(mount, tuple(sorted(unmount)), tuple(sorted(block)))


def hotplug_status(
    vmi: Mapping[str, Any],
    mounted: Sequence[str],
    unmounted: Sequence[str],
    disks: Mapping[str, str],
    block: Sequence[str] = (),
) -> list[dict[str, Any]] | None:
    """The VMI's volumeStatus with the handler's phases: MountedToPod (mounted), Ready (the
    domain has the disk: `disks` is volume → guest device), UnMountedFromPod; None when
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
