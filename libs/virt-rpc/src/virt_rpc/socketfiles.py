"""Unix socket files across a trust boundary: checked paths and pinned sockets.

The launcher's directories are writable by the guest's pod, so every socket path is
treated as hostile (upstream KubeVirt's rules, our code):

- a socket is looked at with lstat: a symlink or a regular file is refused, never
  followed or replaced (`socket_stat`, `check_socket`);
- a stale socket is removed before binding, anything else there is refused
  (`remove_stale_socket`);
- a socket is reached through an ``O_PATH | O_NOFOLLOW`` descriptor of the socket itself
  (`pin_socket`), so a symlink swapped in after the check is not followed, and the short
  ``/proc/self/fd/N`` path lifts the length limit;
- a path given as such must fit in ``sockaddr_un`` (`check_length`).

Each function takes ``dir_fd`` to work relative to an open directory (a name, then).
The functions are blocking (syscalls on a possibly slow filesystem): call them with
``asyncio.to_thread`` from a loop. Only the standard library is imported here, so the
launcher's head start can use them before anything heavy is loaded; connecting and
serving are `virt_rpc.sockets`'.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

__all__ = [
    "MAX_SOCKET_PATH",
    "PinnedPath",
    "PinnedSocket",
    "SocketPathError",
    "check_length",
    "check_socket",
    "pin_socket",
    "remove_stale_socket",
    "socket_stat",
]

# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107

StrPath = str | os.PathLike[str]


class SocketPathError(ValueError):
    """A socket path that is missing, too long, or not a socket (e.g. a symlink)."""


def check_length(path: StrPath) -> None:
    """Raise SocketPathError when ``path`` does not fit in a unix socket address."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise SocketPathError(
            f"{os.fspath(path)}: socket path is {size} bytes, at most {MAX_SOCKET_PATH} fit"
        )


def _lstat(path: StrPath, dir_fd: int | None) -> os.stat_result | None:
    try:
        return os.lstat(path, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def _refusal(path: StrPath, st: os.stat_result) -> SocketPathError:
    if stat.S_ISLNK(st.st_mode):
        return SocketPathError(f"{os.fspath(path)}: is a symlink; refusing to follow it")
    return SocketPathError(f"{os.fspath(path)}: is not a unix socket")


def socket_stat(path: StrPath, *, dir_fd: int | None = None) -> os.stat_result | None:
    """The lstat of ``path`` when it is a unix socket itself; None if missing or anything else."""
    st = _lstat(path, dir_fd)
    return st if st is not None and stat.S_ISSOCK(st.st_mode) else None


def check_socket(path: StrPath, *, dir_fd: int | None = None) -> Path:
    """Return ``path`` if it names a unix socket itself (not through a symlink)."""
    p = Path(path)
    if dir_fd is None:
        check_length(p)
    st = _lstat(p, dir_fd)
    if st is None:
        raise SocketPathError(f"{p}: no such socket")
    if not stat.S_ISSOCK(st.st_mode):
        raise _refusal(p, st)
    return p


def remove_stale_socket(path: StrPath, *, dir_fd: int | None = None) -> bool:
    """Remove the socket a previous process left at ``path``; True if there was one.

    Nothing there is fine; a symlink or any other file is refused (SocketPathError)
    and left alone. Without ``dir_fd`` the path must also fit a socket address.
    """
    if dir_fd is None:
        check_length(path)
    st = _lstat(path, dir_fd)
    if st is None:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketPathError(
            f"{os.fspath(path)}: exists and is not a socket; refusing to replace it"
        )
    try:
        os.unlink(path, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


@dataclass
class PinnedPath:
    """An ``O_PATH`` descriptor: the file it was opened on, whatever its name becomes."""

    fd: int
    display: str
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Release the descriptor (idempotent)."""
        if not self._closed:
            self._closed = True
            os.close(self.fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PinnedSocket(PinnedPath):
    """One unix socket inode, pinned; connect through :attr:`path`."""

    @property
    def path(self) -> str:
        """A short path that reaches this very socket, whatever its name points to now."""
        return f"/proc/self/fd/{self.fd}"


def pin_socket(path: StrPath, *, dir_fd: int | None = None, display: str = "") -> PinnedSocket:
    """Open the unix socket ``path`` itself (``O_PATH | O_NOFOLLOW``).

    Raises FileNotFoundError when nothing is there, SocketPathError for a symlink or a
    file that is not a socket. ``display`` names the socket in messages.
    """
    shown = display or os.fspath(path)
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise FileNotFoundError(f"{shown}: no such socket") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISSOCK(st.st_mode):
            raise _refusal(shown, st)
    except BaseException:
        os.close(fd)
        raise
    return PinnedSocket(fd, shown)
