"""The ISOs the domain's disks read, written before the domain is defined.

cloud-init NoCloud/ConfigDrive media (user data, network data and accessCredentials'
SSH keys from the Secrets the controller mounted) and config-volume ISOs (configMap,
secret, downwardAPI, serviceAccount), at the paths the converter put in the domain
(virt_domain's `LauncherLayout`). An ISO is rewritten only when what it holds changed,
atomically (a temporary file renamed over it in the same directory), by the launcher's
own uid, which QEMU runs as (QEMU's uid when the launcher is root); no symlink under the private dir is followed. Blocking:
call off the event loop (the domain builder runs in a thread).
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import secrets
import stat
from collections.abc import Callable, Iterator, Mapping
from typing import BinaryIO

from kubevirt_api import VirtualMachineInstance
from kubevirt_api.models import Volume
from virt_domain import (
    ConversionError,
    IsoError,
    cloud_init_media,
    config_volume_media,
    iso_image,
    read_iso,
)
from virt_domain.launcher_pod import LAUNCHER_UID, NETWORK_DATA_KEYS, USER_DATA_KEYS
from virt_domain.layout import LauncherLayout

from virt_launcher.conversion import VmiRejectedError
from virt_launcher.mounted import MountedFileError, read_tree

__all__ = ["prepare_media", "write_blank", "write_iso"]

_MODE = 0o600  # only the launcher's uid (and QEMU, the same uid) reads the guest's data
_DIR_MODE = 0o700
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


def _qemu_owner() -> tuple[int, int] | None:
    # In its pod the launcher is QEMU's uid already; a launcher run as root (tests, a
    # privileged setup) hands the files to QEMU's uid, as upstream does.
    return (LAUNCHER_UID, LAUNCHER_UID) if os.geteuid() == 0 else None


def prepare_media(vmi: VirtualMachineInstance, layout: LauncherLayout, blank: bool = False) -> None:
    """Write every cloud-init and config-volume ISO ``vmi``'s disks read.

    ``blank``: on a migration target, write zeros of each ISO's exact size instead;
    block migration copies the source's bytes into them (upstream's empty ISOs).
    Raises `VmiRejectedError` naming the field when a referenced Secret, key or volume
    is not in the pod (or cannot become an ISO).
    """
    try:
        media = cloud_init_media(vmi, _cloud_init_secrets(vmi, layout), layout)
    except ConversionError as exc:
        raise VmiRejectedError(exc.field, exc.message) from None
    for item in media:
        _write(
            layout,
            f"spec.volumes[{_index(vmi, item.volume)}]",
            item.path,
            item.label,
            item.files,
            blank,
        )
    disks = {disk.name for disk in vmi.spec.domain.devices.disks or ()}
    for index, volume in enumerate(vmi.spec.volumes or ()):
        if volume.name in disks:
            _config_volume(index, volume, layout, blank)


def _index(vmi: VirtualMachineInstance, name: str) -> int:
    return next(i for i, v in enumerate(vmi.spec.volumes or ()) if v.name == name)


def _under(root: str, path: str, field: str) -> str:
    if not path.startswith(root.rstrip("/") + "/"):
        raise VmiRejectedError(field, f"{path} is outside the launcher's directory {root}")
    return path[len(root.rstrip("/")) + 1 :]


def _tree(root: str, mount: str, field: str) -> dict[str, bytes] | None:
    try:
        return read_tree(root, _under(root, mount, field) if mount else "")
    except (MountedFileError, OSError) as exc:
        raise VmiRejectedError(field, str(exc)) from None


def _cloud_init_secrets(
    vmi: VirtualMachineInstance, layout: LauncherLayout
) -> dict[str, dict[str, bytes]]:
    """What the mounted Secrets hold, by Secret name (only the keys cloud-init reads).

    A Secret whose mount is absent is left out, so the converter names it as missing.
    """
    found: dict[str, dict[str, bytes]] = {}
    root = layout.private_dir
    for index, volume in enumerate(vmi.spec.volumes or ()):
        source = volume.cloud_init_no_cloud or volume.cloud_init_config_drive
        if source is None:
            continue
        kind = "cloudInitNoCloud" if volume.cloud_init_no_cloud else "cloudInitConfigDrive"
        refs = (
            (source.secret_ref, USER_DATA_KEYS, "secretRef"),
            (source.network_data_secret_ref, NETWORK_DATA_KEYS, "networkDataSecretRef"),
        )
        for ref, keys, name in refs:
            if ref is None or not ref.name:
                continue
            # Both Secrets' keys are files of one directory (subPath mounts); a key the
            # Secret lacks is an empty directory there, which the tree leaves out.
            mount = posixpath.dirname(layout.cloud_init_secret_file(volume.name, keys[0]))
            tree = _tree(root, mount, f"spec.volumes[{index}].{kind}.{name}")
            if tree is not None:
                data = found.setdefault(ref.name, {})
                data.update({key: tree[key] for key in keys if key in tree})
    for index, credential in enumerate(vmi.spec.access_credentials or ()):
        ssh = credential.ssh_public_key
        if ssh is None or ssh.source.secret is None:
            continue
        method = ssh.propagation_method
        if method.no_cloud is None and method.config_drive is None:
            continue  # another propagation (guest agent): not cloud-init's
        secret = ssh.source.secret.secret_name
        field = f"spec.accessCredentials[{index}].sshPublicKey.source.secret"
        public_keys = _tree(root, layout.access_credential_dir(secret), field)
        if public_keys is not None:
            found[secret] = public_keys
    return found


def _config_volume(index: int, volume: Volume, layout: LauncherLayout, blank: bool) -> None:
    field = f"spec.volumes[{index}]"
    root: str
    if volume.config_map is not None:
        field, root = f"{field}.configMap", layout.private_dir
        mount = layout.config_volume_dir("configMap", volume.name)
    elif volume.secret is not None:
        field, root = f"{field}.secret", layout.private_dir
        mount = layout.config_volume_dir("secret", volume.name)
    elif volume.downward_api is not None:
        field, root = f"{field}.downwardAPI", layout.private_dir
        mount = layout.config_volume_dir("downwardAPI", volume.name)
    elif volume.service_account is not None:
        field, root = f"{field}.serviceAccount", layout.service_account_dir
        mount = ""
    elif volume.sysprep is not None:
        raise VmiRejectedError(f"{field}.sysprep", "sysprep volumes are not supported yet")
    else:
        return
    files = _tree(root, mount, field)
    if files is None:
        raise VmiRejectedError(field, f"not mounted in the pod at {mount or root}")
    try:
        item = config_volume_media(volume, files, layout)
    except ConversionError as exc:
        raise VmiRejectedError(exc.field, exc.message) from None
    _write(layout, field, item.path, item.label, item.files, blank)


def _write(
    layout: LauncherLayout,
    field: str,
    path: str,
    label: str,
    files: Mapping[str, bytes],
    blank: bool,
) -> None:
    try:
        image = iso_image(label, files)
        relative = _under(layout.private_dir, path, field)
        if blank:
            write_blank(layout.private_dir, relative, len(image))
        else:
            write_iso(layout.private_dir, relative, image, label, files)
    except IsoError as exc:
        raise VmiRejectedError(field, str(exc)) from None
    except OSError as exc:
        raise VmiRejectedError(field, f"cannot write {path}: {exc}") from None


@contextlib.contextmanager
def _directory(root: str, relative: str) -> Iterator[int]:
    """root/relative as an fd, made (mode 0700) where missing, refusing every symlink."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in (p for p in relative.split("/") if p):
            if name in (".", ".."):
                raise OSError(errno.EINVAL, f"{name!r} in {relative!r}")
            made = True
            try:
                os.mkdir(name, _DIR_MODE, dir_fd=fd)
            except FileExistsError:
                made = False
            child = os.open(name, _DIR, dir_fd=fd)  # ELOOP for a planted symlink
            owner = _qemu_owner()
            if made and owner is not None:
                os.fchown(child, *owner)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _holds(directory: int, name: str, label: str, files: Mapping[str, bytes]) -> bool:
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory
        )
    except OSError:
        return False
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return False
        current = stream.read()
    try:
        held = read_iso(current)
    except IsoError:
        return False
    return held.label == label and dict(held.files) == dict(files)


def write_iso(
    root: str, relative: str, image: bytes, label: str, files: Mapping[str, bytes]
) -> bool:
    """Put ``image`` at root/relative unless the file there already holds ``files``.

    Returns whether it wrote. The bytes go to a fresh temporary file (``O_EXCL``, mode
    0600) in the same directory, are synced, and are renamed over the old file, so QEMU
    never sees half an image; a symlink on the way or at the end is never followed.
    """
    parent, _, name = relative.rpartition("/")
    with _directory(root, parent) as directory:
        if _holds(directory, name, label, files):
            return False
        _replace(directory, name, lambda stream: stream.write(image))
        return True


def write_blank(root: str, relative: str, size: int) -> bool:
    """Put a file of ``size`` zero bytes (sparse) at root/relative, as :func:`write_iso`
    does, unless a regular file of that size is there already; returns whether it wrote."""
    parent, _, name = relative.rpartition("/")
    with _directory(root, parent) as directory:
        try:
            found = os.stat(name, dir_fd=directory, follow_symlinks=False)
            if stat.S_ISREG(found.st_mode) and found.st_size == size:
                return False
        except FileNotFoundError:
            pass
        _replace(directory, name, lambda stream: stream.truncate(size))
        return True


def _replace(directory: int, name: str, fill: Callable[[BinaryIO], object]) -> None:
    staging = f".{name}.{secrets.token_hex(4)}.staging"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(staging, flags, _MODE, dir_fd=directory)
    try:
        owner = _qemu_owner()
        if owner is not None:
            os.fchown(fd, *owner)
        with os.fdopen(fd, "wb") as stream:
            fill(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.rename(staging, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging, dir_fd=directory)
        raise
    os.fsync(directory)
