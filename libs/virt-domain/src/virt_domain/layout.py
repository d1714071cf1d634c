"""Where the launcher keeps things: the paths the converter writes into the domain.

The launcher and the converter share this one typed value so they agree on every
socket, disk and image path. Its base directories are the launcher-pod contract's
(`virt_domain.launcher_pod`); paths are built here only from validated names.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from kubevirt_api.paths import image_path_problem

from .errors import ConversionError
from .launcher_pod import (
    CONTAINER_DISKS,
    EPHEMERAL_DISKS,
    HOTPLUG_DISKS,
    KERNEL_BOOT,
    LIBVIRT_RUNTIME,
    PRIVATE,
    SERVICE_ACCOUNT_DIR,
    VNC_SOCKET,
    LauncherDirs,
    access_credential_volume,
    serial_log,
    serial_socket,
)

__all__ = ["EfiFirmware", "LauncherLayout", "check_component", "check_image_path"]

# Under the private dir, so the launcher's unprivileged user can write them.
_CLOUD_INIT = "cloud-init"
_NVRAM = posixpath.join("libvirt", "qemu", "nvram")

# Volume and interface names become path components: keep them to one safe segment.
_COMPONENT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?$")


def check_component(field: str, value: str) -> str:
    """Return ``value`` if it is a single safe path component, else raise."""
    if not _COMPONENT.match(value) or ".." in value:
        raise ConversionError(
            field,
            f"{value!r} cannot name a file: use letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit, without '..'",
        )
    return value


def check_image_path(field: str, value: str) -> str:
    """Return ``value`` unchanged if it passes kubevirt_api's image path rule, else raise.

    Nothing is normalised: a path that is not already absolute and normal is refused.
    """
    problem = image_path_problem(value)
    if problem is not None:
        raise ConversionError(field, f"{value!r} {problem}")
    return value


@dataclass(frozen=True, slots=True)
class EfiFirmware:
    """OVMF images on the launcher's filesystem (Debian's ``ovmf`` package by default)."""

    code: str = "/usr/share/OVMF/OVMF_CODE_4M.fd"
    vars: str = "/usr/share/OVMF/OVMF_VARS_4M.fd"
    secure_code: str = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
    secure_vars: str = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"


@dataclass(frozen=True, slots=True)
class LauncherLayout:
    """Base directories inside the launcher's mount namespace.

    Every path the converter emits is one of the methods below; the launcher creates
    the files (ISOs, overlays, sockets' parent dirs) at the same paths.
    """

    #: Per-VMI sockets (``<private>/<uid>/virt-serial0``, ``virt-vnc``), mounted
    #: filesystem volumes (``vmi-disks/<volume>/disk.img``) and config-volume ISOs.
    private_dir: str = PRIVATE.mount_path
    #: Copy-on-write overlays for containerDisk and ephemeral volumes, and emptyDisks.
    ephemeral_dir: str = EPHEMERAL_DISKS.mount_path
    #: Container disk images, one directory per volume holding the image's files.
    container_disks_dir: str = CONTAINER_DISKS.mount_path
    #: The kernelBoot container image's files (kernel, initrd) at their image paths.
    kernel_boot_dir: str = KERNEL_BOOT.mount_path
    #: cloud-init ISOs, ``<dir>/<namespace>/<name>/noCloud.iso|configdrive.iso``; under
    #: the private dir so the launcher's unprivileged user can write them.
    cloud_init_dir: str = posixpath.join(PRIVATE.mount_path, _CLOUD_INIT)
    #: EFI variable stores (``<dir>/<name>_VARS.fd``); persistent EFI keeps it on a PVC.
    nvram_dir: str = posixpath.join(PRIVATE.mount_path, _NVRAM)
    #: The VM's backend-storage claim (persistent EFI variables and TPM state); the
    #: launcher makes upstream's subPath names in it as directories.
    backend_storage_dir: str = "/var/lib/kubevirt-backend-storage"
    #: EFI variable stores of VMIs with ``efi.persistent`` (on the backend-storage claim).
    persistent_nvram_dir: str = "/var/lib/kubevirt-backend-storage/nvram"
    #: swtpm's state of VMIs with ``tpm.persistent`` (on the backend-storage claim).
    persistent_swtpm_dir: str = "/var/lib/kubevirt-backend-storage/swtpm"
    #: Where session-mode libvirt keeps swtpm state (``$XDG_CONFIG_HOME/libvirt/qemu/swtpm``,
    #: libvirt's qemu_conf.c; libvirtd's config home is its runtime dir).
    libvirt_swtpm_dir: str = posixpath.join(LIBVIRT_RUNTIME.mount_path, "libvirt", "qemu", "swtpm")
    #: A serviceAccount volume's files: the pod's own service account token.
    service_account_dir: str = SERVICE_ACCOUNT_DIR
    #: Hotplugged volumes' images, ``<dir>/<volume>.img`` (mounted there by virt-handler).
    hotplug_dir: str = HOTPLUG_DISKS.mount_path
    #: Block-mode PVCs appear as ``<dir>/<volume>``.
    block_device_dir: str = "/dev"
    efi: EfiFirmware = EfiFirmware()

    @classmethod
    def for_launcher(cls, dirs: LauncherDirs) -> LauncherLayout:
        """The layout of a launcher started with ``dirs`` (its command line's directories).

        cloud-init media and EFI variable stores go under its private dir.
        """
        return cls(
            private_dir=dirs.private_dir,
            ephemeral_dir=dirs.ephemeral_disk_dir,
            container_disks_dir=dirs.container_disk_dir,
            kernel_boot_dir=dirs.kernel_boot_dir,
            cloud_init_dir=posixpath.join(dirs.private_dir, _CLOUD_INIT),
            nvram_dir=posixpath.join(dirs.private_dir, _NVRAM),
        )

    # --- sockets --------------------------------------------------------------------

    def vmi_private_dir(self, uid: str) -> str:
        """Directory of one VMI's sockets."""
        return posixpath.join(self.private_dir, uid)

    def serial_socket(self, uid: str, port: int = 0) -> str:
        """The serial console's unix socket (QEMU binds it)."""
        return posixpath.join(self.vmi_private_dir(uid), serial_socket(port))

    def serial_log(self, uid: str, port: int = 0) -> str:
        """Where the serial console's output is kept while no client is connected."""
        return posixpath.join(self.vmi_private_dir(uid), serial_log(port))

    def vnc_socket(self, uid: str) -> str:
        """The VNC server's unix socket."""
        return posixpath.join(self.vmi_private_dir(uid), VNC_SOCKET)

    # --- disks ----------------------------------------------------------------------

    def volume_mount_dir(self, volume: str) -> str:
        """Where a filesystem-mode PVC/DataVolume or a hostDisk's directory is mounted."""
        return posixpath.join(self.private_dir, "vmi-disks", volume)

    def filesystem_volume_image(self, volume: str) -> str:
        """The raw image of a filesystem-mode PVC/DataVolume (or hostDisk) volume."""
        return posixpath.join(self.volume_mount_dir(volume), "disk.img")

    def host_disk_image(self, volume: str, host_path: str) -> str:
        """A hostDisk's image: the host directory is mounted per volume."""
        return posixpath.join(self.volume_mount_dir(volume), posixpath.basename(host_path))

    def hotplug_disk_image(self, volume: str) -> str:
        """The raw image of a hotplugged filesystem-mode PVC/DataVolume volume."""
        return posixpath.join(self.hotplug_dir, f"{volume}.img")

    def memory_dump_dir(self, volume: str) -> str:
        """Where a memoryDump volume's claim is bound as a directory (upstream's
        `hotplug-disks/<volume>/`): the launcher writes the dump file into it."""
        return posixpath.join(self.hotplug_dir, volume)

    def block_volume_device(self, volume: str) -> str:
        """The device node of a block-mode PVC/DataVolume volume."""
        return posixpath.join(self.block_device_dir, volume)

    def overlay_image(self, volume: str) -> str:
        """The qcow2 overlay over a containerDisk or ephemeral volume."""
        return posixpath.join(self.ephemeral_dir, "disk-data", volume, "disk.qcow2")

    def empty_disk_image(self, volume: str) -> str:
        """An emptyDisk's qcow2 image."""
        return posixpath.join(self.ephemeral_dir, "empty-disks", f"{volume}.qcow2")

    def container_disk_image(self, volume: str, image_path: str | None) -> str:
        """A containerDisk's image file; ``image_path`` is its path inside the image.

        Without ``image_path`` the copy of the image's single disk file is at
        ``<volume>/disk.img``; an image volume (the ImageVolume gate) shows that file at
        its own name under :meth:`container_disk_image_dir` instead.
        """
        base = posixpath.join(self.container_disks_dir, volume)
        if image_path is None:
            return posixpath.join(base, "disk.img")
        return base + image_path

    def container_disk_image_dir(self, volume: str) -> str:
        """An image volume's ``/disk/`` directory: where its one disk file is, under the
        name the image gave it (upstream's containerDisk convention)."""
        return posixpath.join(self.container_disks_dir, volume, "disk")

    def kernel_boot_artifact(self, image_path: str) -> str:
        """A kernel or initrd from the kernelBoot container (``image_path`` is absolute)."""
        return self.kernel_boot_dir + image_path

    def cloud_init_iso(self, namespace: str, name: str, config_drive: bool) -> str:
        """The cloud-init ISO of a VMI."""
        leaf = "configdrive.iso" if config_drive else "noCloud.iso"
        return posixpath.join(self.cloud_init_dir, namespace, name, leaf)

    def config_volume_iso(self, kind: str, volume: str) -> str:
        """The ISO made from a configMap/secret/downwardAPI/sysprep volume.

        ``kind`` is one of ``configMap``, ``secret``, ``downwardAPI``, ``sysprep``,
        ``serviceAccount`` (there is at most one serviceAccount volume).
        """
        if kind == "serviceAccount":
            return posixpath.join(self.private_dir, "service-account-disk", "service-account.iso")
        folder = {
            "configMap": "config-map-disks",
            "secret": "secret-disks",
            "downwardAPI": "downwardapi-disks",
            "sysprep": "sysprep-disks",
        }[kind]
        return posixpath.join(self.private_dir, folder, f"{volume}.iso")

    def config_volume_dir(self, kind: str, volume: str) -> str:
        """Where a configMap/secret/downwardAPI volume's files are mounted.

        ``kind`` is one of ``configMap``, ``secret``, ``downwardAPI``.
        """
        folder = {"configMap": "config-map", "secret": "secret", "downwardAPI": "downwardapi"}
        return posixpath.join(self.private_dir, folder[kind], volume)

    def cloud_init_secret_file(self, volume: str, key: str) -> str:
        """Where one key of a cloud-init volume's user/network-data Secret is mounted.

        Upstream's path: both Secrets of one volume share ``<private>/secret/<volume>/``,
        one file per key in `launcher_pod.USER_DATA_KEYS`/`NETWORK_DATA_KEYS`.
        """
        return posixpath.join(self.config_volume_dir("secret", volume), key)

    def access_credential_dir(self, secret: str) -> str:
        """Where an access credential's Secret is mounted (``secret/<name>-access-cred``)."""
        return self.config_volume_dir("secret", access_credential_volume(secret))

    def nvram(self, name: str, persistent: bool = False) -> str:
        """The EFI variable store of a VMI."""
        base = self.persistent_nvram_dir if persistent else self.nvram_dir
        return posixpath.join(base, f"{name}_VARS.fd")
