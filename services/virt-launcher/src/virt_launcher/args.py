"""The launcher's command line: flags from the launcher-pod contract, checked values.

Light on purpose (argparse and the contract): ``python -m virt_launcher`` parses it to
start libvirtd before the launcher's heavy imports (`virt_launcher.headstart`).
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from virt_domain.launcher_pod import LAUNCHER_DIRS, LAUNCHER_UID, Flag, LauncherDirs

from virt_launcher.identity import VmiIdentity, VmiUid

__all__ = ["LauncherArgs", "UsageError", "parse_args"]

DESCRIPTION = "virt-launcher: one process per VMI, run as an unprivileged user in the VMI's pod."


@dataclass(frozen=True)
class LauncherArgs:
    """The launcher's validated command line."""

    identity: VmiIdentity
    sockets_dir: Path
    private_dir: Path
    ephemeral_disk_dir: Path
    container_disk_dir: Path
    kernel_boot_dir: Path
    libvirt_dir: Path
    notify_socket: Path | None
    grace_period_seconds: int
    reboot_window_seconds: float
    libvirtd: str
    #: The uid:gid libvirtd (and so QEMU) runs as when the launcher itself is root.
    libvirtd_user: tuple[int, int] | None

    @property
    def dirs(self) -> LauncherDirs:
        """The directories as the launcher-pod contract names them."""
        return LauncherDirs(
            sockets_dir=str(self.sockets_dir),
            private_dir=str(self.private_dir),
            ephemeral_disk_dir=str(self.ephemeral_disk_dir),
            container_disk_dir=str(self.container_disk_dir),
            kernel_boot_dir=str(self.kernel_boot_dir),
            libvirt_dir=str(self.libvirt_dir),
        )


class UsageError(Exception):
    """A command-line value is invalid; the message names the flag."""


_DIR_HELP = {
    Flag.KERNEL_BOOT_DIR: "where the kernelBoot container's files are, at their paths inside "
    "the image",
    Flag.LIBVIRT_DIR: "libvirtd's private dir; keep it short, QEMU's channel sockets go under it",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="virt-launcher", description=DESCRIPTION)
    p.add_argument(Flag.NAME, required=True, help="the VMI's name")
    p.add_argument(Flag.NAMESPACE, required=True, help="the VMI's namespace")
    p.add_argument(Flag.UID, required=True, help="the VMI's metadata.uid")
    for flag, default in LAUNCHER_DIRS.flags():
        p.add_argument(flag, default=default, help=_DIR_HELP.get(flag))
    p.add_argument(Flag.NOTIFY_SOCKET, default=None, help="virt-handler's Notify socket")
    p.add_argument(Flag.GRACE_PERIOD_SECONDS, type=int, default=30)
    p.add_argument("--reboot-window-seconds", type=float, default=2.0)
    p.add_argument("--libvirtd", default="/usr/sbin/libvirtd", help="the libvirtd binary")
    p.add_argument(
        "--libvirtd-user",
        default=f"{LAUNCHER_UID}:{LAUNCHER_UID}",
        help="UID:GID for libvirtd and QEMU when the launcher runs as root (never root)",
    )
    return p


def _absolute(flag: str, value: str) -> Path:
    path = Path(value)
    if not path.is_absolute() or ".." in path.parts:
        raise UsageError(f"{flag}: {value!r} must be an absolute path without '..'")
    return path


def _existing_dir(flag: str, path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise UsageError(f"{flag}: {path} does not exist") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{flag}: {path} must be a directory (symlinks are not followed)")


def parse_args(argv: Sequence[str]) -> LauncherArgs:
    """Parse and validate the command line; raises UsageError naming the flag."""
    ns = _parser().parse_args(argv)
    for flag, value in ((Flag.NAME, ns.name), (Flag.NAMESPACE, ns.namespace), (Flag.UID, ns.uid)):
        if not value or "/" in value or value in (".", "..") or len(value) > 253:
            raise UsageError(f"{flag}: {value!r} must be a non-empty name without '/'")
    if ns.grace_period_seconds < 0:
        raise UsageError(f"{Flag.GRACE_PERIOD_SECONDS}: must be 0 or more")
    if ns.reboot_window_seconds < 0:
        raise UsageError("--reboot-window-seconds: must be 0 or more")
    user: tuple[int, int] | None = None
    if os.geteuid() == 0:
        uid, _, gid = ns.libvirtd_user.partition(":")
        if not (uid.isdigit() and gid.isdigit()) or int(uid) == 0:
            raise UsageError(
                f"--libvirtd-user: {ns.libvirtd_user!r} must be UID:GID of an unprivileged "
                "user (libvirtd runs in session mode, never as root)"
            )
        user = (int(uid), int(gid))
    args = LauncherArgs(
        identity=VmiIdentity(ns.namespace, ns.name, VmiUid(ns.uid)),
        sockets_dir=_absolute(Flag.SOCKETS_DIR, ns.sockets_dir),
        private_dir=_absolute(Flag.PRIVATE_DIR, ns.private_dir),
        ephemeral_disk_dir=_absolute(Flag.EPHEMERAL_DISK_DIR, ns.ephemeral_disk_dir),
        container_disk_dir=_absolute(Flag.CONTAINER_DISK_DIR, ns.container_disk_dir),
        kernel_boot_dir=_absolute(Flag.KERNEL_BOOT_DIR, ns.kernel_boot_dir),
        libvirt_dir=_absolute(Flag.LIBVIRT_DIR, ns.libvirt_dir),
        notify_socket=(
            None if ns.notify_socket is None else _absolute(Flag.NOTIFY_SOCKET, ns.notify_socket)
        ),
        grace_period_seconds=ns.grace_period_seconds,
        reboot_window_seconds=ns.reboot_window_seconds,
        libvirtd=ns.libvirtd,
        libvirtd_user=user,
    )
    for flag, path in ((Flag.SOCKETS_DIR, args.sockets_dir), (Flag.PRIVATE_DIR, args.private_dir)):
        _existing_dir(flag, path)
    return args
