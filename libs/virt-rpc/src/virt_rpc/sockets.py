"""Unix sockets across a trust boundary: a connection, a grpclib channel, a server.

Every path is checked with `virt_rpc.socketfiles` first (lstat, no symlink followed, a
stale socket removed, anything else refused); a connection goes through a pinned
descriptor of the socket itself. The coroutines run those blocking checks off the loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from grpclib.client import Channel
from grpclib.server import Server

from virt_rpc.socketfiles import (
    SocketPathError,
    check_socket,
    pin_socket,
    remove_stale_socket,
)
from virt_rpc.strictcodec import StrictProtoCodec

if TYPE_CHECKING:
    from grpclib._typing import IServable

__all__ = ["open_channel", "open_unix_connection", "serve_unix"]

StrPath = str | os.PathLike[str]


async def open_unix_connection(
    path: StrPath, *, dir_fd: int | None = None, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to the unix socket ``path`` without following a symlink swapped in for it."""
    pinned = await asyncio.to_thread(pin_socket, path, dir_fd=dir_fd)
    try:
        return await asyncio.open_unix_connection(pinned.path, limit=limit)
    finally:
        pinned.close()


async def open_channel(path: StrPath) -> Channel:
    """A grpclib channel to the unix socket at ``path``, checked first (off the loop).

    The channel connects lazily on the first call; close it with ``channel.close()``
    or ``async with await open_channel(p) as channel:``. For a directory the peer can
    write to, keep a `PinnedSocket` open and pass its ``path`` to the channel instead.
    """
    checked = await asyncio.to_thread(check_socket, path)
    return Channel(path=str(checked), codec=StrictProtoCodec())


async def serve_unix(handlers: Collection[IServable], path: StrPath, mode: int = 0o600) -> Server:
    """Start a grpclib server for ``handlers`` on a unix socket at ``path``.

    A stale socket left by a previous process is removed; any other file there is
    refused. The socket gets permissions ``mode``. Stop it with ``server.close()``
    then ``await server.wait_closed()``.
    """
    p = Path(path)
    await asyncio.to_thread(remove_stale_socket, p)
    # The peer may be hostile: an ill-typed request is INVALID_ARGUMENT, not a crash.
    server = Server(list(handlers), codec=StrictProtoCodec())
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
    try:
        pinned = pin_socket(p)
    except SocketPathError:
        raise SocketPathError(
            f"{p}: replaced after bind (not a socket); refusing to chmod"
        ) from None
    with pinned:
        os.chmod(pinned.path, mode)
