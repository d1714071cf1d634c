"""Unix-socket transport for the protocol: checked paths, a client channel, a server.

Socket paths cross a trust boundary (the launcher's directory is writable by the
guest's pod), so they are lstat'ed: a symlink or a regular file is refused, never
followed or replaced.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from grpclib.client import Channel
from grpclib.server import Server

if TYPE_CHECKING:
    from grpclib._typing import IServable

__all__ = ["MAX_SOCKET_PATH", "SocketPathError", "check_socket", "open_channel", "serve_unix"]

# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


class SocketPathError(ValueError):
    """A socket path that is missing, too long, or not a socket (e.g. a symlink)."""


def _check_length(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise SocketPathError(
            f"{path}: socket path is {len(os.fsencode(path))} bytes, at most {MAX_SOCKET_PATH} fit"
        )


def check_socket(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` if it names a unix socket itself (not through a symlink)."""
    p = Path(path)
    _check_length(p)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        raise SocketPathError(f"{p}: no such socket") from None
    if not stat.S_ISSOCK(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a socket"
        raise SocketPathError(f"{p}: is {kind}; a unix socket is required")
    return p


async def open_channel(path: str | os.PathLike[str]) -> Channel:
    """A grpclib channel to the unix socket at ``path``, checked first (off the loop).

    The channel connects lazily on the first call; close it with ``channel.close()``
    or ``async with await open_channel(p) as channel:``.
    """
    checked = await asyncio.to_thread(check_socket, path)
    return Channel(path=str(checked))


async def serve_unix(
    handlers: Collection[IServable], path: str | os.PathLike[str], mode: int = 0o600
) -> Server:
    """Start a grpclib server for ``handlers`` on a unix socket at ``path``.

    A stale socket left by a previous process is removed; any other file there is
    refused. The socket gets permissions ``mode``. Stop it with ``server.close()``
    then ``await server.wait_closed()``.
    """
    p = Path(path)
    await asyncio.to_thread(_remove_stale_socket, p)
    server = Server(list(handlers))
    await server.start(path=str(p))
    # The directory's permissions guard the short window before this chmod.
    try:
        await asyncio.to_thread(_chmod_socket, p, mode)
    except BaseException:
        server.close()
        await server.wait_closed()
        raise
    return server


def _chmod_socket(p: Path, mode: int) -> None:
    # os.chmod follows a symlink (and Linux has no lchmod): go through an O_PATH descriptor
    # of the path itself, so a symlink swapped in after bind is refused, its target untouched.
    fd = os.open(p, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise SocketPathError(f"{p}: replaced after bind (not a socket); refusing to chmod")
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


def _remove_stale_socket(p: Path) -> None:
    _check_length(p)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketPathError(f"{p}: exists and is not a socket; refusing to replace it")
    os.unlink(p)
