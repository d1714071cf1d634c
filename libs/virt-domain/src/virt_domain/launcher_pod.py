"""The launcher-pod contract: what controller, launcher and handler agree on.

One owner for the launcher pod's shape, upstream KubeVirt's names and paths:

- virt-controller renders the pod from it: the emptyDir volumes (`VOLUMES`), their
  mount paths in the compute container, the pod's uid (`LAUNCHER_UID`) and the
  launcher's command line (`launcher_args`).
- virt-launcher takes its flags' names and defaults from it (`Flag`, `LAUNCHER_DIRS`)
  and binds `INIT_SOCKET`, renamed to `READY_SOCKET` when ready.
- virt-handler looks its files up by volume name under the kubelet's pods dir:
  `SOCKETS` (with `READY_SOCKET` and its own `NOTIFY_SOCKET`), `PRIVATE` (the guest's
  `<vmi uid>/` with `serial_socket()`, `serial_log()`, `VNC_SOCKET`).
- virt_domain's `LauncherLayout` (the paths in the domain XML) takes its base
  directories from the mount paths here.
- Hotplugged volumes appear in `HOTPLUG_DISKS`: virt-handler mounts a claim's image at
  ``<volume>.img`` there (`LauncherLayout.hotplug_disk_image`), the launcher attaches it.
- The Secrets cloud-init and access credentials read are pod volumes named by
  `cloud_init_secret_volume` and `access_credential_volume`, mounted read-only under
  ``<private>/secret/`` (`LauncherLayout.cloud_init_secret_file`,
  `LauncherLayout.access_credential_dir`): the controller mounts them, the launcher
  reads them into the cloud-init ISO.
"""

from __future__ import annotations

import enum
import posixpath
from dataclasses import dataclass
from typing import NewType

__all__ = [
    "CONTAINER_DISKS",
    "EPHEMERAL_DISKS",
    "HOTPLUG_DISKS",
    "INIT",
    "INIT_SOCKET",
    "KERNEL_BOOT",
    "LAUNCHER_DIRS",
    "LAUNCHER_UID",
    "LIBVIRT_RUNTIME",
    "LIBVIRT_SOCKET",
    "LOG_VERBOSITY_ENV",
    "MIGRATION_BLOCK_PORT",
    "MIGRATION_MEMORY_PORT",
    "MIGRATION_PROXY_DIR",
    "NETWORK_DATA_KEYS",
    "NOTIFY_SOCKET",
    "PRIVATE",
    "PUBLIC",
    "READY_SOCKET",
    "RESERVED_VOLUMES",
    "SERVICE_ACCOUNT_DIR",
    "SOCKETS",
    "USER_DATA_KEYS",
    "VNC_SOCKET",
    "VOLUMES",
    "Flag",
    "LauncherDirs",
    "PodVolume",
    "SocketName",
    "VolumeName",
    "access_credential_volume",
    "cloud_init_secret_volume",
    "launcher_args",
    "migration_proxy_socket",
    "serial_log",
    "serial_socket",
]

#: A pod volume's name (an emptyDir of the launcher pod).
VolumeName = NewType("VolumeName", str)
#: A unix socket's file name inside one of the launcher's directories.
SocketName = NewType("SocketName", str)

#: The unprivileged uid:gid the launcher, libvirtd and QEMU run as (upstream's qemu user).
LAUNCHER_UID = 107


@dataclass(frozen=True, slots=True)
class PodVolume:
    """An emptyDir volume of the launcher pod and where the compute container mounts it."""

    name: VolumeName
    mount_path: str


#: Per-VMI guest sockets (``<vmi uid>/virt-serial0``, ``virt-vnc``), mounted volumes,
#: config-volume ISOs, cloud-init media; the handler reads the guest's sockets here.
PRIVATE = PodVolume(VolumeName("private"), "/var/run/kubevirt-private")
PUBLIC = PodVolume(VolumeName("public"), "/var/run/kubevirt")
#: ``launcher-sock`` (the launcher's Cmd) and ``domain-notify-pipe.sock`` (the handler's
#: Notify); the only volume both sides bind sockets in.
SOCKETS = PodVolume(VolumeName("sockets"), "/var/run/kubevirt/sockets")
EPHEMERAL_DISKS = PodVolume(VolumeName("ephemeral-disks"), "/var/run/kubevirt-ephemeral-disks")
CONTAINER_DISKS = PodVolume(VolumeName("container-disks"), "/var/run/kubevirt/container-disks")
#: libvirtd's private directory; short, QEMU's channel sockets go under it.
LIBVIRT_RUNTIME = PodVolume(VolumeName("libvirt-runtime"), "/var/run/libvirt")
#: Hotplugged volumes' images: virt-handler bind-mounts a filesystem claim's ``disk.img``
#: onto ``<volume>.img`` here while the pod runs; the launcher attaches what it finds.
HOTPLUG_DISKS = PodVolume(VolumeName("hotplug-disks"), "/var/run/kubevirt/hotplug-disks")
#: Only when the VMI boots a kernelBoot container: its files at their image paths.
KERNEL_BOOT = PodVolume(VolumeName("kernel-boot"), "/var/run/kubevirt/kernel-boot")
#: Only with init containers: the static busybox the image-copy containers run.
INIT = PodVolume(VolumeName("kubevirt-init"), "/var/run/kubevirt-init")

#: The emptyDirs every launcher pod has, in the order they are rendered.
VOLUMES: tuple[PodVolume, ...] = (
    PRIVATE,
    PUBLIC,
    SOCKETS,
    EPHEMERAL_DISKS,
    CONTAINER_DISKS,
    LIBVIRT_RUNTIME,
    HOTPLUG_DISKS,
)
#: Every name the launcher's own volumes take; a VMI volume may not use one.
RESERVED_VOLUMES: frozenset[VolumeName] = frozenset(v.name for v in (*VOLUMES, KERNEL_BOOT, INIT))

#: The keys of a cloud-init ``secretRef`` (user data) and ``networkDataSecretRef``, in the
#: order the launcher takes the first present; each is mounted as its own file.
USER_DATA_KEYS: tuple[str, ...] = ("userdata", "userData")
NETWORK_DATA_KEYS: tuple[str, ...] = ("networkdata", "networkData")
#: Where Kubernetes mounts the pod's service account token: a serviceAccount volume's
#: files (the pod runs as that account only when the VMI has such a volume).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def cloud_init_secret_volume(volume: str, network: bool) -> VolumeName:
    """The pod volume of a cloud-init volume's user-data (or network-data) Secret."""
    return VolumeName(f"{volume}-{'ndata' if network else 'udata'}")


def access_credential_volume(secret: str) -> VolumeName:
    """The pod volume of an access credential's Secret (mounted whole)."""
    return VolumeName(f"{secret}-access-cred")


#: The launcher serves Cmd here while it starts (only Ping answers) ...
INIT_SOCKET = SocketName("launcher-init-sock")
#: ... and renames it to this once libvirt is connected: its presence means ready.
READY_SOCKET = SocketName("launcher-sock")
#: virt-handler's Notify service for this VMI, in the same sockets volume.
NOTIFY_SOCKET = SocketName("domain-notify-pipe.sock")
#: The VNC server's socket in ``<private>/<vmi uid>/``.
VNC_SOCKET = SocketName("virt-vnc")


#: The compute container's environment variable with the KubeVirt CR's virtLauncher log
#: verbosity (0-9; upstream's name), set only when the CR sets one.
LOG_VERBOSITY_ENV = "VIRT_LAUNCHER_LOG_VERBOSITY"

#: libvirtd's read-write socket in `LIBVIRT_RUNTIME` (the launcher's private libvirtd).
LIBVIRT_SOCKET = SocketName("libvirt-sock")

#: The directory in `PUBLIC` (``/var/run/kubevirt/migrationproxy``) where virt-handler binds
#: the source's migration proxy sockets and the target's QEMU listens; owned by the qemu
#: user. The same names in both pods: libvirt gives one unix URI to both QEMUs.
MIGRATION_PROXY_DIR = "migrationproxy"
#: The "ports" naming QEMU's streams in the proxy's socket names and in
#: ``targetDirectMigrationNodePorts`` (upstream's values; 0 names libvirt's own connection).
MIGRATION_MEMORY_PORT = 49152
MIGRATION_BLOCK_PORT = 49153


def migration_proxy_socket(migration_uid: str, port: int = 0) -> SocketName:
    """A socket in `MIGRATION_PROXY_DIR`: libvirt's connection (port 0) or a QEMU stream."""
    if port == 0:
        return SocketName(f"{migration_uid}-source.sock")
    return SocketName(f"{migration_uid}-{port}-source.sock")


def serial_socket(port: int = 0) -> SocketName:
    """The serial console's socket in ``<private>/<vmi uid>/`` (QEMU binds it)."""
    return SocketName(f"virt-serial{port}")


def serial_log(port: int = 0) -> str:
    """The file in ``<private>/<vmi uid>/`` that keeps the console's output."""
    return f"{serial_socket(port)}-log"


class Flag(enum.StrEnum):
    """The launcher's command-line flags that the controller passes."""

    NAME = "--name"
    NAMESPACE = "--namespace"
    UID = "--uid"
    SOCKETS_DIR = "--sockets-dir"
    PRIVATE_DIR = "--private-dir"
    EPHEMERAL_DISK_DIR = "--ephemeral-disk-dir"
    CONTAINER_DISK_DIR = "--container-disk-dir"
    KERNEL_BOOT_DIR = "--kernel-boot-dir"
    LIBVIRT_DIR = "--libvirt-dir"
    NOTIFY_SOCKET = "--notify-socket"
    GRACE_PERIOD_SECONDS = "--grace-period-seconds"


@dataclass(frozen=True, slots=True)
class LauncherDirs:
    """The directories a launcher is started with (its flags' values)."""

    sockets_dir: str = SOCKETS.mount_path
    private_dir: str = PRIVATE.mount_path
    ephemeral_disk_dir: str = EPHEMERAL_DISKS.mount_path
    container_disk_dir: str = CONTAINER_DISKS.mount_path
    kernel_boot_dir: str = KERNEL_BOOT.mount_path
    libvirt_dir: str = LIBVIRT_RUNTIME.mount_path

    @property
    def notify_socket(self) -> str:
        """Where the handler's Notify socket appears for the launcher."""
        return posixpath.join(self.sockets_dir, NOTIFY_SOCKET)

    def flags(self) -> tuple[tuple[Flag, str], ...]:
        """Each directory flag with its value, in the order the command line has them."""
        return (
            (Flag.SOCKETS_DIR, self.sockets_dir),
            (Flag.PRIVATE_DIR, self.private_dir),
            (Flag.EPHEMERAL_DISK_DIR, self.ephemeral_disk_dir),
            (Flag.CONTAINER_DISK_DIR, self.container_disk_dir),
            (Flag.KERNEL_BOOT_DIR, self.kernel_boot_dir),
            (Flag.LIBVIRT_DIR, self.libvirt_dir),
        )


#: The launcher pod's directories: the mount paths above.
LAUNCHER_DIRS = LauncherDirs()


def launcher_args(
    name: str,
    namespace: str,
    uid: str,
    *,
    grace_period_seconds: int,
    notify_socket: str | None = None,
    dirs: LauncherDirs = LAUNCHER_DIRS,
) -> list[str]:
    """The compute container's arguments for the VMI ``namespace/name`` (``uid``).

    ``notify_socket`` defaults to the handler's socket in ``dirs.sockets_dir``.
    """
    args = [Flag.NAME, name, Flag.NAMESPACE, namespace, Flag.UID, uid]
    for flag, value in dirs.flags():
        args += [flag, value]
    args += [
        Flag.NOTIFY_SOCKET,
        dirs.notify_socket if notify_socket is None else notify_socket,
        Flag.GRACE_PERIOD_SECONDS,
        str(grace_period_seconds),
    ]
    return [str(a) for a in args]
