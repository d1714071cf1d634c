"""Where a launcher pod's sockets are, seen from the node: the kubelet pods dir.

A launcher pod's emptyDir volumes live at
``<pods dir>/<pod uid>/volumes/kubernetes.io~empty-dir/<volume>/``. The launcher serves
``Cmd`` on ``sockets/launcher-sock`` (after renaming it from ``launcher-init-sock`` when
ready); virt-handler serves that VMI's ``Notify`` on ``sockets/domain-notify-pipe.sock``;
the serial console and VNC sockets are ``private/<vmi uid>/virt-serial0`` and
``…/virt-vnc`` (virt_domain's LauncherLayout).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NewType

from .safepath import PathRefusedError, PinnedDir, open_dir

__all__ = [
    "LAUNCHER_SOCKET",
    "NOTIFY_SOCKET",
    "SERIAL_SOCKET",
    "VNC_SOCKET",
    "PodFiles",
    "PodUid",
    "pod_uid",
]

PodUid = NewType("PodUid", str)

LAUNCHER_SOCKET = "launcher-sock"
NOTIFY_SOCKET = "domain-notify-pipe.sock"
SERIAL_SOCKET = "virt-serial0"
VNC_SOCKET = "virt-vnc"
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
        return self.volume(pod, "sockets")

    def guest_dir(self, pod: PodUid, vmi_uid: str) -> PinnedDir:
        """`private/<vmi uid>`: the serial console and VNC sockets of the guest."""
        return open_dir(
            self.pods_dir,
            pod_uid(pod),
            "volumes",
            _EMPTY_DIR,
            "private",
            pod_uid(vmi_uid, "VMI uid"),
        )

    def display(self, pod: PodUid, volume: str, name: str) -> str:
        """The full path (for logs and events only; never opened as such)."""
        return str(self.pods_dir / pod / "volumes" / _EMPTY_DIR / volume / name)
