"""Where a launcher pod's sockets are, seen from the node: the kubelet pods dir.

A launcher pod's emptyDir volumes live at
``<pods dir>/<pod uid>/volumes/kubernetes.io~empty-dir/<volume>/``. Volume and socket
names are the launcher-pod contract's (``virt_domain.launcher_pod``): the launcher
serves ``Cmd`` on ``sockets/launcher-sock`` (renamed from ``launcher-init-sock`` when
ready); virt-handler serves that VMI's ``Notify`` on ``sockets/domain-notify-pipe.sock``;
the serial console, its log and the VNC socket are in ``private/<vmi uid>/``; libvirtd's
socket is in ``libvirt-runtime/``, and the live-migration proxy's sockets in
``public/migrationproxy/``.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import NewType

from virt_domain.launcher_pod import (
    LAUNCHER_UID,
    LIBVIRT_RUNTIME,
    MIGRATION_PROXY_DIR,
    NOTIFY_SOCKET,
    PRIVATE,
    PUBLIC,
    READY_SOCKET,
    SOCKETS,
    VNC_SOCKET,
)
from virt_domain.launcher_pod import serial_log as _serial_log
from virt_domain.launcher_pod import serial_socket as _serial_socket

from .safepath import PathRefusedError, PinnedDir, open_dir

__all__ = [
    "LAUNCHER_SOCKET",
    "NOTIFY_SOCKET",
    "SERIAL_LOG",
    "SERIAL_SOCKET",
    "VNC_SOCKET",
    "PodFiles",
    "PodUid",
    "pod_uid",
]

PodUid = NewType("PodUid", str)

#: The launcher's Cmd socket once it is ready.
LAUNCHER_SOCKET = READY_SOCKET
#: The first serial console's socket and its log, in the guest dir.
SERIAL_SOCKET = _serial_socket()
SERIAL_LOG = _serial_log()
_EMPTY_DIR = "kubernetes.io~empty-dir"
_UID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def pod_uid(value: object, what: str = "pod uid") -> PodUid:
    """A Kubernetes UID (the only thing accepted as a pods-dir component)."""
    if not isinstance(value, str) or not _UID.match(value):
        raise PathRefusedError(f"{what} {value!r} is not a Kubernetes UID")
    return PodUid(value)


@dataclass(frozen=True)
class PodFiles:
    """The kubelet pods dir of this node; opens a pod's volumes safely."""

    pods_dir: Path

    def volume(self, pod: PodUid, volume: str) -> PinnedDir:
        """The emptyDir `volume` of `pod`, opened without following symlinks."""
        return open_dir(self.pods_dir, pod_uid(pod), "volumes", _EMPTY_DIR, volume)

    def sockets_dir(self, pod: PodUid) -> PinnedDir:
        """The launcher's sockets dir (where launcher-sock and our notify socket live)."""
        return self.volume(pod, SOCKETS.name)

    def guest_dir(self, pod: PodUid, vmi_uid: str) -> PinnedDir:
        """`private/<vmi uid>`: the serial console and VNC sockets of the guest."""
        return open_dir(
            self.pods_dir,
            pod_uid(pod),
            "volumes",
            _EMPTY_DIR,
            PRIVATE.name,
            pod_uid(vmi_uid, "VMI uid"),
        )

    def libvirt_dir(self, pod: PodUid) -> PinnedDir:
        """`libvirt-runtime`: where the launcher's libvirtd serves its socket."""
        return self.volume(pod, LIBVIRT_RUNTIME.name)

    def migration_dir(self, pod: PodUid, *, create: bool = False) -> PinnedDir:
        """`public/migrationproxy`, made (owned by the qemu user) when `create` and missing."""
        parts = (pod_uid(pod), "volumes", _EMPTY_DIR, PUBLIC.name)
        if create:
            with open_dir(self.pods_dir, *parts) as public:
                try:
                    os.mkdir(MIGRATION_PROXY_DIR, 0o750, dir_fd=public.fd)
                except FileExistsError:
                    pass
                else:
                    os.chown(
                        MIGRATION_PROXY_DIR,
                        LAUNCHER_UID,
                        LAUNCHER_UID,
                        dir_fd=public.fd,
                        follow_symlinks=False,
                    )
                st = os.stat(MIGRATION_PROXY_DIR, dir_fd=public.fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise PathRefusedError(
                        f"{public.display}/{MIGRATION_PROXY_DIR} is not a directory"
                    )
        return open_dir(self.pods_dir, *parts, MIGRATION_PROXY_DIR)

    def display(self, pod: PodUid, volume: str, name: str) -> str:
        """The full path (for logs and events only; never opened as such)."""
        return str(self.pods_dir / pod / "volumes" / _EMPTY_DIR / volume / name)
