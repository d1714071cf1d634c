"""Hotplugged volumes: which are in the pod, and what to attach to or detach from the guest.

virt-handler bind-mounts a hotplugged filesystem claim's ``disk.img`` onto
``<hotplug dir>/<volume>.img`` (`LauncherLayout.hotplug_disk_image`). A volume is
present while that path is a mount point (``/proc/self/mountinfo``) and a regular
file: a file or link someone else left there is not the handler's mount, and QEMU would
follow a link to any file the launcher can read.

A running domain's hotplugged disks are those whose source file is in the hotplug dir;
the domain the converter builds now says which it should have. The difference is
attached and detached by name (the VMI volume, alias ``ua-<name>``). Blocking (reads
files): call `present_hotplug_volumes` off the event loop.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from dataclasses import dataclass

from kubevirt_api import VirtualMachineInstance
from virt_domain import Disk, Domain, hotpluggable_volumes
from virt_domain.layout import LauncherLayout

__all__ = [
    "MOUNTINFO",
    "HotplugChanges",
    "hotplug_changes",
    "mount_points",
    "present_hotplug_volumes",
]

#: This process's mounts (the launcher's mount namespace).
MOUNTINFO = "/proc/self/mountinfo"
_ESCAPE = re.compile(r"\\([0-7]{3})")


def mount_points(mountinfo: str) -> frozenset[str]:
    """The mount points (field 5, octal escapes undone) of a mountinfo document."""
    points = set()
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) >= 5:
            points.add(_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4]))
    return frozenset(points)


def present_hotplug_volumes(
    vmi: VirtualMachineInstance, layout: LauncherLayout, mountinfo: str = MOUNTINFO
) -> frozenset[str]:
    """The hotpluggable volumes whose image is mounted in the pod now, as a regular file."""
    wanted = hotpluggable_volumes(vmi)
    if not wanted:
        return frozenset()
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as stream:
            points = mount_points(stream.read())
    except OSError:
        return frozenset()
    # The kernel reports resolved paths (/var/run may be a link to /run in the image);
    # the directory is the contract's, only the image itself must be no link.
    directory = os.path.realpath(layout.hotplug_dir)
    present = set()
    for name in wanted:
        image = layout.hotplug_disk_image(name)
        if posixpath.join(directory, posixpath.basename(image)) not in points:
            continue
        try:
            found = os.lstat(image)
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode):
            present.add(name)
    return frozenset(present)


@dataclass(frozen=True, slots=True)
class HotplugChanges:
    """What makes a running domain's hotplugged disks those of the domain now built."""

    attach: tuple[Disk, ...] = ()
    detach: tuple[Disk, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.attach or self.detach)


def _hotplugged(domain: Domain, hotplug_dir: str) -> dict[str, Disk]:
    prefix = hotplug_dir.rstrip("/") + "/"
    found: dict[str, Disk] = {}
    for disk in domain.devices.disks:
        source = disk.source.file if disk.source is not None else None
        if source is None or not source.startswith(prefix):
            continue
        name = disk.alias.user_device if disk.alias is not None else None
        dev = disk.target.dev if disk.target is not None else None
        found[name or dev or source] = disk
    return found


def hotplug_changes(live_xml: str, new_xml: str, hotplug_dir: str) -> HotplugChanges:
    """The hotplugged disks (source in ``hotplug_dir``) of ``new_xml`` that the live domain
    lacks, and the live domain's that ``new_xml`` no longer has, each in device order."""
    live = _hotplugged(Domain.from_xml(live_xml), hotplug_dir)
    new = _hotplugged(Domain.from_xml(new_xml), hotplug_dir)
    return HotplugChanges(
        attach=tuple(disk for key, disk in new.items() if key not in live),
        detach=tuple(disk for key, disk in live.items() if key not in new),
    )
