"""The exported volumes: read from the pod's environment, opened without following links.

A Filesystem volume is a read-only mount holding `disk.img`; a Block volume is the device
itself. The image is opened with O_NOFOLLOW below a directory opened with O_NOFOLLOW, so
neither the mount point nor `disk.img` can be a symlink leading out of the mount.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from kubevirt_api import exports as ex

__all__ = ["ConfigError", "Volume", "open_image", "volumes_from_env"]


class ConfigError(ValueError):
    """The environment does not describe a usable export; the message names the variable."""


@dataclass(frozen=True, slots=True)
class Volume:
    """One exported volume and the URL paths it answers."""

    #: The mount directory (Filesystem) or the device node (Block).
    path: str
    raw_uri: str
    gzip_uri: str

    @property
    def name(self) -> str:
        """The claim's name, as in its URLs (`/volumes/<name>/disk.img`)."""
        return self.raw_uri.removeprefix(ex.URL_BASE + "/").rpartition("/")[0]


def _checked_uri(variable: str, value: str, suffix: str) -> str:
    parts = value.split("/")
    if (
        not value.startswith(ex.URL_BASE + "/")
        or not value.endswith("/" + suffix)
        or any(p in ("", ".", "..") for p in parts[1:])
    ):
        raise ConfigError(
            f"{variable}: {value!r} is not {ex.URL_BASE}/<volume>/{suffix} (no '.', '..' or '//')"
        )
    return value


def volumes_from_env(env: Mapping[str, str]) -> list[Volume]:
    """Every `VOLUME<i>_EXPORT_PATH` with its `_RAW_URI` and `_RAW_GZIP_URI`, by index."""
    found: list[tuple[int, Volume]] = []
    for variable, path in env.items():
        if not (variable.startswith("VOLUME") and variable.endswith("_EXPORT_PATH")):
            continue
        index_text = variable.removeprefix("VOLUME").removesuffix("_EXPORT_PATH")
        if not index_text.isdigit():
            raise ConfigError(f"{variable}: expected VOLUME<number>_EXPORT_PATH")
        prefix = f"VOLUME{index_text}_EXPORT"
        if not os.path.isabs(path) or ".." in path.split("/"):
            raise ConfigError(f"{variable}: {path!r} must be an absolute path without '..'")
        raw = env.get(f"{prefix}_RAW_URI")
        gzip = env.get(f"{prefix}_RAW_GZIP_URI")
        if raw is None or gzip is None:
            raise ConfigError(f"{prefix}_RAW_URI and {prefix}_RAW_GZIP_URI: both required")
        volume = Volume(
            path,
            _checked_uri(f"{prefix}_RAW_URI", raw, ex.RAW_FILE),
            _checked_uri(f"{prefix}_RAW_GZIP_URI", gzip, ex.GZIP_FILE),
        )
        found.append((int(index_text), volume))
    if not found:
        raise ConfigError("VOLUME0_EXPORT_PATH: no volume to export")
    return [v for _, v in sorted(found, key=lambda item: item[0])]


def open_image(volume: Volume) -> tuple[int, int]:
    """Open the volume's image read-only: (fd, size). Blocking: call it in an executor.

    Raises FileNotFoundError when there is no image, PermissionError when the path is a
    symlink or no regular file or block device.
    """
    mode = os.lstat(volume.path).st_mode
    if stat.S_ISBLK(mode):
        fd = os.open(volume.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            os.close(fd)
            raise
        return fd, size
    if not stat.S_ISDIR(mode):
        raise PermissionError(f"{volume.path}: neither a directory nor a block device")
    directory = os.open(volume.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(
                ex.DISK_IMAGE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # disk.img is a symlink
                raise PermissionError(f"{volume.path}/{ex.DISK_IMAGE}: a symlink") from None
            raise
    finally:
        os.close(directory)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise PermissionError(f"{volume.path}/{ex.DISK_IMAGE}: not a regular file")
    return fd, info.st_size
