"""Files of the Secret, ConfigMap and downwardAPI volumes kubelet mounted for the launcher.

Such a volume is kubelet's atomic-writer tree: ``key -> ..data/key``, ``..data ->
..<timestamp>/``. Its symlinks are followed only while they stay inside the volume
(relative, without a ``..`` component, a few hops at most); the walk from the trusted
root (a mount path of the launcher-pod contract) to the volume follows none. Blocking:
call off the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

__all__ = ["MountedFileError", "read_tree"]

#: A Secret or ConfigMap holds at most 1 MiB; a file this large is not one of theirs.
MAX_FILE = 4 * 1024 * 1024
_MAX_HOPS = 8
_MAX_DEPTH = 16
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_FILE = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


class MountedFileError(Exception):
    """A mounted volume's file leaves its volume, is not a regular file, or is too large."""


def _components(path: str, shown: str) -> list[str]:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise MountedFileError(f"{shown}: '..' is not followed")
    return parts


@contextlib.contextmanager
def _open_volume(root: str, relative: str) -> Iterator[int | None]:
    """The volume directory root/relative (None if absent), reached without symlinks."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in _components(relative, f"{root}/{relative}"):
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                yield None
                return
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise MountedFileError(
                        f"{root}/{relative}: {name!r} is not a directory (or is a symlink)"
                    ) from None
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _open_beneath(volume: int, path: str, shown: str) -> int | None:
    """An fd of ``path`` inside the volume ``volume``; None if it does not exist."""
    pending = _components(path, shown)
    dirs = [os.dup(volume)]
    hops = 0
    try:
        while pending:
            name = pending.pop(0)
            try:
                fd = os.open(name, _FILE, dir_fd=dirs[-1])
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                hops += 1
                target = os.readlink(name, dir_fd=dirs[-1])
                if hops > _MAX_HOPS or target.startswith("/"):
                    raise MountedFileError(f"{shown}: a symlink leaves the volume") from None
                pending[:0] = _components(target, shown)
                continue
            if not pending:
                return fd
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                os.close(fd)
                return None
            dirs.append(fd)
        return os.dup(dirs[-1])
    finally:
        for fd in dirs:
            os.close(fd)


def _read(fd: int, shown: str) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise MountedFileError(f"{shown} is not a regular file")
    if info.st_size > MAX_FILE:
        raise MountedFileError(f"{shown} is larger than {MAX_FILE} bytes")
    with os.fdopen(fd, "rb", closefd=False) as stream:
        return stream.read(MAX_FILE + 1)


def read_tree(root: str, relative: str) -> dict[str, bytes] | None:
    """Every file of the volume mounted at root/relative, by slash-separated path.

    Kubelet's bookkeeping (names starting with ``..``) is left out. None when the
    volume is not mounted there.
    """
    with _open_volume(root, relative) as volume:
        if volume is None:
            return None
        files: dict[str, bytes] = {}
        _collect(volume, volume, "", f"{root}/{relative}", files, 0)
        return files


def _collect(
    volume: int, directory: int, prefix: str, shown: str, out: dict[str, bytes], depth: int
) -> None:
    if depth > _MAX_DEPTH:
        raise MountedFileError(f"{shown}/{prefix}: nested too deep")
    for name in sorted(os.listdir(directory)):
        if name.startswith(".."):
            continue
        path = f"{prefix}{name}"
        # Resolved from the volume's root: kubelet's links are relative to it.
        fd = _open_beneath(volume, path, f"{shown}/{path}")
        if fd is None:
            continue
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                _collect(volume, fd, f"{path}/", shown, out, depth + 1)
            else:
                out[path] = _read(fd, f"{shown}/{path}")
        finally:
            os.close(fd)
